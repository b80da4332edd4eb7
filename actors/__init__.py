"""paneward's actors and the pure decisions they drive.

This package's ``__init__`` imports nothing on purpose: ``paneward hook`` runs
``actors.cli.hook_client`` on the agent's hot path with the standard library only.
"""
