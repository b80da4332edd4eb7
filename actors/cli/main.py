"""The ``paneward`` command line.

``paneward hook`` runs inside the agents on every hook event, so it is dispatched BEFORE anything
outside the standard library is imported: this module's top level imports only ``sys``. Every
subcommand imports what it needs inside its own function, and only the arguments of the
subcommand being run are set up, so ``status``, ``watch`` and ``inject`` import only what they
use.

Subcommands are registered in :data:`COMMANDS` (name -> (help, add_arguments, run)), each
with the module that holds it (:mod:`actors.cli` lists them).
Exit codes: 0 success, 1 invalid input / refused operation, 2 no daemon / usage error (a
subcommand's usage error prints that subcommand's usage). ``paneward`` alone prints the help,
``paneward --version`` the version.
"""

from __future__ import annotations

import sys

# No typing/collections imports at run time: they would slow down `paneward hook`; and the
# hook client itself is imported by the commands that use it only (`status` and `watch` start
# fast too).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    AddArguments = Callable[[argparse.ArgumentParser], None]
    Run = Callable[[argparse.Namespace], int]

__all__ = ["COMMANDS", "main"]

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_NO_DAEMON = 2



def _add_hook(parser: argparse.ArgumentParser) -> None:
    # `hook` never reaches argparse (see main()): it must never exit 2, and its --help is the
    # hook client's own (actors.cli.hook_client.HELP).
    del parser


def _run_hook(args: argparse.Namespace) -> int:  # pragma: no cover - dispatched in main()
    from actors.cli import hook_client

    return hook_client.main(sys.argv[2:])


def _add_version(parser: argparse.ArgumentParser) -> None:
    del parser


def version_text() -> str:
    """``paneward <version>`` (``version`` and ``--version`` print it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version("paneward")
    except PackageNotFoundError:
        text = "unknown (not installed)"
    return f"paneward {text}"


def _run_version(args: argparse.Namespace) -> int:
    print(version_text())
    return EXIT_OK


def _add_inject(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "message", metavar="MESSAGE_JSON", help="one inbound message as JSON ('-' reads stdin)"
    )


def _run_inject(args: argparse.Namespace) -> int:
    import messages
    from actors.cli import hook_client
    from actors.core.paths import socket_path

    text: str = sys.stdin.read() if args.message == "-" else args.message
    try:
        message = messages.decode_inbound(text.strip())
    except messages.MessageError as exc:
        print(f"paneward inject: {exc}", file=sys.stderr)
        return EXIT_INVALID
    frame = messages.encode(message) + b"\n"
    path = socket_path()
    try:
        hook_client.send_frame(frame, path, timeout=5.0)
    except OSError as exc:
        print(
            f"paneward inject: no daemon listening on {path} ({exc.strerror or exc}); "
            "start one with `paneward run` (or `paneward install-service`)",
            file=sys.stderr,
        )
        return EXIT_NO_DAEMON
    return EXIT_OK


def _add_install_hooks(parser: argparse.ArgumentParser) -> None:
    import actors.cli.install as install_hooks

    install_hooks.add_arguments(parser)


def _run_install_hooks(args: argparse.Namespace) -> int:
    import actors.cli.install as install_hooks

    return install_hooks.run(args)


def _add_install_service(parser: argparse.ArgumentParser) -> None:
    import actors.cli.service as service

    service.add_arguments(parser)


def _run_install_service(args: argparse.Namespace) -> int:
    import actors.cli.service as service

    return service.run(args)


def _lazy(module: str, name: str) -> tuple[AddArguments, Run]:
    """``add_NAME`` and ``run_NAME`` of ``actors.cli.MODULE``, imported when called: only the
    subcommand being run is imported."""

    def add(parser: argparse.ArgumentParser) -> None:
        getattr(__import__(f"actors.cli.{module}", fromlist=["_"]), f"add_{name}")(parser)

    def run(args: argparse.Namespace) -> int:
        result: int = getattr(__import__(f"actors.cli.{module}", fromlist=["_"]),
                              f"run_{name}")(args)
        return result

    return add, run


def _add_fleet(parser: argparse.ArgumentParser) -> None:
    from actors.cli.fleet import add_fleet

    add_fleet(parser)


def _run_fleet(args: argparse.Namespace) -> int:
    from actors.cli.fleet import run_fleet

    return run_fleet(args)


def _add_wrap(parser: argparse.ArgumentParser) -> None:
    # Documentation only: `wrap` is dispatched before argparse (see main()).
    from actors.harnesses.catalog import wrap_choices

    parser.add_argument("--harness", help=", ".join(wrap_choices()))
    parser.add_argument("--pass-status", action="store_true",
                        help="keep OSC 7501 records in the output the terminal sees")
    parser.add_argument("--aliases", action="store_true", help="print shell aliases")
    parser.add_argument("command", nargs="*", help="-- COMMAND [ARGS...]")


def _run_wrap(args: argparse.Namespace) -> int:  # pragma: no cover - dispatched in main()
    from actors.cli.wrap import wrap_main

    return wrap_main(sys.argv[2:])


COMMANDS: dict[str, tuple[str, AddArguments, Run]] = {  # name -> (help, add_arguments, run)
    "hook": ("forward one hook payload to the daemon (always exits 0)", _add_hook, _run_hook),
    "install-hooks": (
        "merge paneward's hooks into a harness's configuration",
        _add_install_hooks,
        _run_install_hooks,
    ),
    "install-service": (
        "run the daemon as a systemd user service (or print the tmux autostart line)",
        _add_install_service,
        _run_install_service,
    ),
    "inject": ("send one inbound message to the daemon", _add_inject, _run_inject),
    "version": ("print the version", _add_version, _run_version),
    "run": ("run the daemon (discovery, hook socket, store, optional tmux badges)",
            *_lazy("run", "run")),
    "status": ("show every session: pane, harness, presence, turn, attention",
               *_lazy("status", "status")),
    "watch": ("print transitions as they happen (JSON lines with --json)",
              *_lazy("watch", "watch")),
    "wrap": ("run a program in a transparent PTY that reports its OSC 7501 status",
             _add_wrap, _run_wrap),
    "tmux-config": ("print the tmux snippet that shows paneward badges",
                    *_lazy("tmux_config", "tmux_config")),
    "next": ("focus the tmux pane of the agent that needs you first (the attention queue)",
             *_lazy("jump", "next")),
    "pick": ("choose from the attention queue in a tmux menu", *_lazy("jump", "pick")),
    "top": ("a full-screen live view of every session (needs the top extra: Textual)",
            *_lazy("top_command", "top")),
    "wait": ("block until a session matches a predicate; print its Activity as JSON",
             *_lazy("wait", "wait")),
    "ack": ("acknowledge a done or failed (of a pane or a session)", *_lazy("dismiss", "ack")),
    "forget": ("drop an ended session from every view and the store", *_lazy("dismiss", "forget")),
    "fleet": ("the hosts this daemon follows over ssh: add, remove, list, check",
              _add_fleet, _run_fleet),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only`` (the subcommand being run), the arguments of that
    subcommand alone are added: the others' may import what this run never uses (the
    install-hooks editors, the daemon), which ``paneward status`` must not pay for."""
    import argparse

    class VersionAction(argparse.Action):
        # argparse's own "version" action wants the text up front: importlib.metadata would
        # then be imported by every command that builds the parser (`next` sits on a key).
        def __call__(self, parser: argparse.ArgumentParser, *args: object, **kw: object) -> None:
            print(version_text())
            parser.exit()

    parser = argparse.ArgumentParser(
        prog="paneward",
        description="Per-pane presence, turn and attention for coding agents, from proof only: "
        "it observes the agents you run (it starts none).",
        epilog="Every option, exit code and file: docs/cli.md.",
    )
    parser.add_argument(
        "--version", action=VersionAction, nargs=0, default=argparse.SUPPRESS,
        help="print the version",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_arguments, _) in COMMANDS.items():
        subparser = sub.add_parser(name, help=help_text, description=help_text)
        # main() reports a stray argument with the usage of the subcommand it was given to.
        subparser.set_defaults(subparser=subparser)
        if only is None or name == only:
            add_arguments(subparser)
    return parser


def _check(namespace: argparse.Namespace) -> str | None:
    """A combination of options argparse cannot express, as the usage error to print."""
    if namespace.command == "status" and namespace.panes and not namespace.json:
        return "--panes prints the pane views as JSON: give --json --panes"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``paneward`` console script; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "hook":
        # Fast path: stdlib only, never raises, always 0 (its --help included).
        from actors.cli import hook_client

        return hook_client.main(args[1:])
    if args and args[0] == "wrap" and not ({"-h", "--help"} & set(args[1:])):
        # Everything after `wrap` belongs to the wrapper (and to the wrapped command).
        from actors.cli.wrap import wrap_main

        return wrap_main(args[1:])
    parser = build_parser(args[0] if args and args[0] in COMMANDS else None)
    if not args:
        parser.print_help()
        return EXIT_OK
    namespace, extra = parser.parse_known_args(args)
    subparser: argparse.ArgumentParser = namespace.subparser
    if extra:
        subparser.error(f"unrecognized arguments: {' '.join(extra)}")
    problem = _check(namespace)
    if problem is not None:
        subparser.error(problem)
    del namespace.subparser
    _, _, run = COMMANDS[namespace.command]
    return run(namespace)


if __name__ == "__main__":
    sys.exit(main())
