"""The command line: ``paneward`` and everything it runs (hook client, daemon wiring, wrap,
install-hooks).

This ``__init__`` is the console script's entry point and imports nothing but :mod:`sys`:
``paneward hook`` runs on every hook event of every agent, so it is handed to the stdlib-only
:mod:`actors.cli.hook_client` before anything else is imported (not even
:mod:`actors.cli.main` and its table of subcommands); plain ``status`` and ``watch`` go to their
commands without argparse (:func:`actors.cli.commands.quick`); everything else goes to
:func:`actors.cli.main.main`.
"""

from __future__ import annotations

import sys


def entry() -> int:
    """Dispatch ``hook`` straight to the hook client, plain ``status`` / ``watch`` straight to
    their commands (no argparse); the rest to the full CLI.

    A reader that goes away (``paneward status | head``) ends the command quietly with exit 1,
    as it does for ``cat``: no traceback, neither now nor at the interpreter's final flush.
    """
    try:
        return _dispatch(sys.argv[1:])
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _dispatch(argv: list[str]) -> int:
    if argv[:1] == ["hook"] and "-h" not in argv and "--help" not in argv:
        from actors.cli.hook_client import main as hook

        return hook(argv[1:])
    if argv[:1] in (["status"], ["watch"]):
        from actors.cli import commands

        parsed = commands.quick(argv)
        if parsed is not None:
            name, args = parsed
            return commands.run_status(args) if name == "status" else commands.run_watch(args)
    from actors.cli.main import main as cli

    return cli(argv)
