"""The command line: ``paneward`` and everything it runs.

- :mod:`.main` -- the argument parser and the table of subcommands;
- :mod:`.hook_client` -- ``paneward hook``, stdlib only;
- the subcommands that talk to a daemon or to tmux, one module each (or per pair): :mod:`.run`
  (``paneward run``; :mod:`.daemon` is its wiring of every actor), :mod:`.status`,
  :mod:`.watch`, :mod:`.wait`, :mod:`.jump` (``next`` and ``pick``), :mod:`.dismiss` (``ack``
  and ``forget``), :mod:`.top_command` (``top``'s options and start; :mod:`.top` is its Textual
  shell), :mod:`.tmux_config`; what they share (exit codes, options, one-line requests, the
  tmux runner) is :mod:`.common`, and :mod:`.control_client` is their blocking client of the
  daemon's control socket;
- :mod:`.quick` -- ``status`` and ``watch`` parsed without argparse;
- :mod:`.wrap` -- ``paneward wrap``, the PTY wrapper;
- :mod:`.install` -- ``paneward install-hooks``; :mod:`.service` -- ``paneward install-service``;
- :mod:`.fleet` -- ``paneward fleet add|remove|list|check`` (the hosts file, over the user's ssh);
- :mod:`.nats_view` -- the NATS settings and ``status``/``watch --nats``, read with no daemon.

This ``__init__`` is the console script's entry point and imports nothing but :mod:`sys`:
``paneward hook`` runs on every hook event of every agent, so it is handed to the stdlib-only
:mod:`actors.cli.hook_client` before anything else is imported (not even
:mod:`actors.cli.main` and its table of subcommands), and the process ends as soon as it is
done (:func:`_exit_now`); plain ``status`` and ``watch`` go to their
commands without argparse (:func:`actors.cli.quick.quick`); everything else goes to
:func:`actors.cli.main.main`.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing itself is not imported on the hook's path
if TYPE_CHECKING:
    from typing import NoReturn


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
    if argv[:1] == ["hook"]:
        from actors.cli.hook_client import main as hook

        _exit_now(hook(argv[1:]))
    if argv[:1] in (["status"], ["watch"]):
        from actors.cli.quick import quick

        parsed = quick(argv)
        if parsed is not None:
            name, args = parsed
            if name == "status":
                from actors.cli.status import run_status

                return run_status(args)
            from actors.cli.watch import run_watch

            return run_watch(args)
    from actors.cli.main import main as cli

    return cli(argv)


def _exit_now(code: int) -> NoReturn:
    """End the process with ``code`` once stdout and stderr are flushed, skipping the
    interpreter's finalization.

    Why: tearing the interpreter down (freeing every module and object the process is about
    to lose anyway) is a noticeable share of ``paneward hook``'s run, paid on every hook event
    of every agent (``bench/bench_hook.py`` measures it); the hook client registers no ``atexit``
    work and holds no other buffer, so nothing is lost. A flush that fails (a reader that went away)
    changes nothing: the hook exits 0 whatever happened.
    """
    import os

    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 -- contextlib would cost the hook its import
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
