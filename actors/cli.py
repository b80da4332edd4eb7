"""The ``paneward`` command line.

``paneward hook`` runs inside the agents on every hook event, so it is dispatched BEFORE anything
outside the standard library is imported: this module's top level imports only ``sys`` and the
stdlib-only :mod:`actors.hook_client` / :mod:`actors.paths`. Every other subcommand imports what
it needs inside its own function.

Subcommands are registered in :data:`COMMANDS` (name -> (help, add_arguments, run)); the daemon
side (``run``, ``status``, ``watch``, ``wrap``, ``tmux-config``) is added there by its owner.
Exit codes: 0 success, 1 invalid input / refused operation, 2 no daemon / usage error.
"""

from __future__ import annotations

import sys

from actors import hook_client

# No typing/collections imports at run time: they would slow down `paneward hook`.
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
    # Documentation only: `hook` never reaches argparse (see main()), it must never exit 2.
    parser.add_argument("--harness", required=True, choices=("claude-code", "codex", "cursor"))
    parser.add_argument(
        "--forward-json",
        metavar="JSON_ARGV",
        help="after sending, exec this command with the payload appended (Codex notify chain)",
    )
    parser.add_argument("payload", nargs="?", help="the hook JSON (default: read stdin)")


def _run_hook(args: argparse.Namespace) -> int:  # pragma: no cover - dispatched in main()
    return hook_client.main(sys.argv[2:])


def _add_version(parser: argparse.ArgumentParser) -> None:
    del parser


def _run_version(args: argparse.Namespace) -> int:
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version("paneward")
    except PackageNotFoundError:
        text = "unknown (not installed)"
    print(f"paneward {text}")
    return EXIT_OK


def _add_inject(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "message", metavar="MESSAGE_JSON", help="one inbound message as JSON ('-' reads stdin)"
    )


def _run_inject(args: argparse.Namespace) -> int:
    import messages
    from actors.paths import socket_path

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
            "start one with `paneward run`",
            file=sys.stderr,
        )
        return EXIT_NO_DAEMON
    return EXIT_OK


def _add_install_hooks(parser: argparse.ArgumentParser) -> None:
    import actors.install_hooks as install_hooks

    install_hooks.add_arguments(parser)


def _run_install_hooks(args: argparse.Namespace) -> int:
    import actors.install_hooks as install_hooks

    return install_hooks.run(args)


COMMANDS: dict[str, tuple[str, AddArguments, Run]] = {  # name -> (help, add_arguments, run)
    "hook": ("forward one hook payload to the daemon (always exits 0)", _add_hook, _run_hook),
    "install-hooks": (
        "merge paneward's hooks into a harness's configuration",
        _add_install_hooks,
        _run_install_hooks,
    ),
    "inject": ("send one inbound message to the daemon", _add_inject, _run_inject),
    "version": ("print the version", _add_version, _run_version),
}


def build_parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(
        prog="paneward",
        description="Per-pane presence, turn and attention for coding agents, from proof only.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_arguments, _) in COMMANDS.items():
        add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``paneward`` console script; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "hook" and not ({"-h", "--help"} & set(args[1:])):
        # Fast path: stdlib only, never raises, always 0.
        return hook_client.main(args[1:])
    parser = build_parser()
    namespace = parser.parse_args(args)
    _, _, run = COMMANDS[namespace.command]
    return run(namespace)


if __name__ == "__main__":
    sys.exit(main())
