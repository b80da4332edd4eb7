"""paneward's actors and the pure decisions they drive, one sub-package per role.

- :mod:`.core` -- every pure decision (the reducer, routing, parsers, badges);
- :mod:`.runtime` -- the supervisor's machinery (mailbox, session actor, broadcast hub);
- :mod:`.harnesses` -- one package per harness, listed by its catalog;
- :mod:`.sources` -- what feeds evidence in; :mod:`.sinks` -- what renders activity out;
- :mod:`.cli` -- the ``paneward`` programs.

This package's ``__init__`` imports nothing on purpose: ``paneward hook`` runs
``actors.cli.hook_client`` on the agent's hot path with the standard library only.
"""
