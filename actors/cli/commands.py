"""The daemon-side subcommands of ``paneward``: run, status, watch, tmux-config.

Registered in :data:`actors.cli.main.COMMANDS`. ``status`` and ``watch`` talk to the
running daemon over its control socket (:mod:`actors.sources.control_server`); they
exit 2 when no daemon is listening.

``status`` and ``watch`` are short-lived: this module's top level imports only what they use
(the standard library; the daemon renders the status table), and ``run`` imports the daemon
inside its own function.
"""

from __future__ import annotations

import sys

# Typing only (typing, argparse and pathlib would cost every status/watch start milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

__all__ = [
    "add_run",
    "add_status",
    "add_tmux_config",
    "add_watch",
    "run_run",
    "run_status",
    "run_tmux_config",
    "run_watch",
]

EXIT_OK, EXIT_INVALID, EXIT_NO_DAEMON = 0, 1, 2


class _Args:
    """Arguments parsed by :func:`quick` (the attribute names argparse gives them)."""

    def __init__(self, **values: object) -> None:
        self.__dict__.update(values)


#: What :func:`quick` understands: per command, its flags (-> True) and its valued options.
_QUICK: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "status": (
        {"--json": "json", "--counters": "counters", "--all": "all"},
        {"--socket": "socket"},
    ),
    "watch": ({"--json": "json"}, {"--socket": "socket", "--since": "since"}),
}


def quick(argv: list[str]) -> tuple[str, argparse.Namespace] | None:
    """``status`` / ``watch`` arguments parsed without argparse, when they are plain (flags and
    ``--opt VALUE`` / ``--opt=VALUE`` it knows, a non-negative ``--since``): the commands a user
    types often start without importing argparse. Anything else (help, a typo, a bad value)
    returns None, and the full parser handles it, errors included."""
    if not argv or argv[0] not in _QUICK:
        return None
    flags, valued = _QUICK[argv[0]]
    values: dict[str, object] = dict.fromkeys(flags.values(), False)
    values.update(dict.fromkeys(valued.values()))
    rest = argv[1:]
    while rest:
        word = rest.pop(0)
        name, eq, value = word.partition("=")
        if not eq and word in flags:
            values[flags[word]] = True
        elif name in valued:
            if not eq:
                if not rest:
                    return None
                value = rest.pop(0)
            values[valued[name]] = value
        else:
            return None
    since = values.get("since")
    if isinstance(since, str):
        if not since.isdigit():
            return None
        values["since"] = int(since)
    return argv[0], _Args(**values)  # type: ignore[return-value]  # the same attributes


def _control_path(args: argparse.Namespace) -> str:
    from actors.core import paths

    return paths.control_path(getattr(args, "socket", None))


def _add_socket(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--socket", help="the daemon's hook socket (default: from the environment)")


# ---------------------------------------------------------------------------- run


def add_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", help="state directory (default $XDG_STATE_HOME/paneward)")
    _add_socket(parser)
    parser.add_argument(
        "--http-port",
        type=int,
        default=None,
        help="also accept Claude Code http hooks on 127.0.0.1:PORT (token header required)",
    )
    parser.add_argument("--tmux", action="store_true", help="drive tmux per-pane badges")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-L", dest="tmux_socket_name", metavar="NAME", help="tmux socket name")
    group.add_argument("-S", dest="tmux_socket_path", metavar="PATH", help="tmux socket path")
    parser.add_argument(
        "--no-discovery",
        action="store_true",
        help="do not watch Claude/Codex/Hermes files (hooks and injected messages only)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")


def run_run(args: argparse.Namespace) -> int:
    import logging
    from pathlib import Path

    import anyio

    from actors.cli.daemon import DaemonAlreadyRunning, DaemonConfig, run_daemon
    from actors.core import paths
    from messages.errors import PanewardError

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    state_dir = Path(args.state_dir or paths.state_dir())
    # The socket does not move with --state-dir: agents' hooks and `paneward status` find
    # it from the environment alone ($PANEWARD_SOCKET, $XDG_RUNTIME_DIR, the state dir).
    socket_path = Path(args.socket or paths.socket_path())
    config = DaemonConfig(
        state_dir=state_dir,
        socket_path=socket_path,
        http_port=args.http_port,
        tmux=args.tmux or bool(args.tmux_socket_name or args.tmux_socket_path),
        tmux_socket_name=args.tmux_socket_name,
        tmux_socket_path=args.tmux_socket_path,
        discovery=not args.no_discovery,
    )

    def ready(sup: object) -> None:
        print(f"paneward: listening on {config.socket_path}", file=sys.stderr, flush=True)

    try:
        anyio.run(lambda: run_daemon(config, ready=ready))
    except DaemonAlreadyRunning as exc:
        print(f"paneward run: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except PanewardError as exc:
        print(f"paneward run: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        pass
    return EXIT_OK


# ---------------------------------------------------------------------------- status


def add_status(parser: argparse.ArgumentParser) -> None:
    _add_socket(parser)
    parser.add_argument("--json", action="store_true", help="a JSON list of Activity objects")
    parser.add_argument(
        "--counters",
        action="store_true",
        help="print every actor's counters (rejected, unmapped, drops, ...) as JSON",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="also list sessions that ended more than a day ago (the table hides them)",
    )


def run_status(args: argparse.Namespace) -> int:
    from actors.sources.control_client import request_chunks

    # The daemon answers in the form asked (the table it renders, the activities, the
    # counters): printed as received, so this command needs no JSON module at all.
    form = "counters" if args.counters else "activities" if args.json else "table"
    request = b'{"op": "status", "format": "%s", "all": %s}\n' % (
        form.encode(), b"true" if args.all else b"false"
    )
    try:
        reply = b"".join(request_chunks(_control_path(args), request))
    except OSError as exc:
        print(f"paneward status: no daemon at {_control_path(args)} ({exc})", file=sys.stderr)
        return EXIT_NO_DAEMON
    if not reply:
        print(f"paneward status: no answer from {_control_path(args)}", file=sys.stderr)
        return EXIT_NO_DAEMON
    if reply.startswith((b'{"error"', b'{"seq"')):
        import json

        body = json.loads(reply)
        if "error" in body:
            print(f"paneward status: {body['error']}", file=sys.stderr)
            return EXIT_INVALID
        reply = _render_here(body, form, show_all=args.all).encode() + b"\n"  # older daemon
    sys.stdout.buffer.write(reply)
    sys.stdout.flush()
    return EXIT_OK


def _render_here(body: dict[str, Any], form: str, *, show_all: bool) -> str:
    """What a daemon that answers only with the whole status body (an older one) left to
    render here."""
    import json

    if form == "counters":
        return json.dumps(body["statistics"], indent=2, sort_keys=True)
    if form == "activities":
        return json.dumps(body["activities"])
    import msgspec

    from actors.core.clock import now_ms
    from actors.core.status_table import counter_line, format_table
    from messages import Activity

    activities = msgspec.convert(body["activities"], list[Activity])
    table = format_table(activities, now_ms(), show_all=show_all)
    return table + "\n" + counter_line(body["statistics"])


# ---------------------------------------------------------------------------- watch


def add_watch(parser: argparse.ArgumentParser) -> None:
    _add_socket(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print each transition as its JSON line (the default is a summary)",
    )
    parser.add_argument(
        "--since",
        type=int,
        metavar="SEQ",
        default=None,
        help="first replay the journal's transitions after SEQ",
    )


def run_watch(args: argparse.Namespace) -> int:
    from actors.sources.control_client import request_chunks

    since = b"null" if args.since is None else str(args.since).encode()
    request = b'{"op": "watch", "since": %s}\n' % since
    try:
        # One write and one flush per read of the socket: a watcher of a busy daemon keeps up.
        for chunk in request_chunks(_control_path(args), request):
            if args.json:
                sys.stdout.buffer.write(chunk)
            else:
                import json

                sys.stdout.write(
                    "".join(_summary(json.loads(line)) + "\n" for line in chunk.splitlines())
                )
            sys.stdout.flush()
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        print(f"paneward watch: no daemon at {_control_path(args)} ({exc})", file=sys.stderr)
        return EXIT_NO_DAEMON
    except (KeyboardInterrupt, BrokenPipeError):
        return EXIT_OK
    return EXIT_OK


def _summary(item: dict[str, Any]) -> str:
    if item.get("type") != "Transition":
        import json

        return json.dumps(item)
    a = item["after"]
    att = a.get("attention")
    attention = f" [{att['kind']}: {att['reason']}]" if att else ""
    pane = f" {a['pane']}" if a.get("pane") else ""
    return (
        f"#{item['seq']} {a['key']['harness']}:{a['key']['session_id'][:13]}{pane} "
        f"{a['presence']}/{a['turn']}{attention} <- {item['cause']}"
    )


# ---------------------------------------------------------------------------- tmux-config


def add_tmux_config(parser: argparse.ArgumentParser) -> None:
    del parser


def run_tmux_config(args: argparse.Namespace) -> int:
    from actors.sinks.tmux import tmux_config_snippet

    print(tmux_config_snippet(), end="")
    return EXIT_OK
