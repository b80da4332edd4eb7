"""The subcommands of ``paneward`` that talk to a daemon or to tmux: run, status, watch,
next, pick, wait, top, ack, forget, tmux-config.

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
    from collections.abc import Sequence
    from typing import Any

    from messages import Activity

__all__ = [
    "add_ack",
    "add_forget",
    "add_next",
    "add_top",
    "add_pick",
    "add_run",
    "add_status",
    "add_tmux_config",
    "add_wait",
    "add_watch",
    "jump_to",
    "run_ack",
    "run_forget",
    "run_next",
    "run_pick",
    "run_run",
    "run_status",
    "run_tmux_config",
    "run_top",
    "run_wait",
    "run_watch",
]

EXIT_OK, EXIT_INVALID, EXIT_NO_DAEMON, EXIT_FAILED = 0, 1, 2, 3
#: ``wait``: the session or pane named does not exist (or a prefix names several sessions).
EXIT_NO_TARGET = 4
#: How every "no daemon" message ends: what to run.
START_HINT = "start one with `paneward run` (or `paneward install-service`)"


class _Args:
    """Arguments parsed by :func:`quick` (the attribute names argparse gives them)."""

    def __init__(self, **values: object) -> None:
        self.__dict__.update(values)


#: The direct NATS reader's options (actors.cli.nats_view.add_reader_arguments).
_NATS: dict[str, str] = {
    "--nats": "nats", "--nats-creds": "nats_creds", "--nats-nkey": "nats_nkey",
}
#: What :func:`quick` understands: per command, its flags (-> True) and its valued options.
_QUICK: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "status": (
        {
            "--json": "json",
            "--panes": "panes",
            "--counters": "counters",
            "--all": "all",
            "--proofs": "proofs",
            "--local": "local",
        },
        {"--socket": "socket", "--host": "host", **_NATS},
    ),
    "watch": (
        {"--json": "json", "--fleet": "fleet", "--local": "local"},
        {"--socket": "socket", "--since": "since", "--host": "host", **_NATS},
    ),
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
    if values.get("local") and values.get("host") is not None:
        return None  # a usage error: argparse prints it
    if values.get("panes") and not values["json"]:
        return None  # a usage error: argparse prints it (actors.cli.main)
    since = values.get("since")
    if isinstance(since, str):
        if not since.isdigit():
            return None
        values["since"] = int(since)
    return argv[0], _Args(**values)  # type: ignore[return-value]  # the same attributes


def _control_path(args: argparse.Namespace) -> str:
    from actors.core import paths

    return paths.control_path(getattr(args, "socket", None))


def _no_daemon(args: argparse.Namespace, prog: str, exc: object) -> None:
    """The one "no daemon" message: where it was looked for, why, and how to start one."""
    print(f"paneward {prog}: no daemon at {_control_path(args)} ({exc}); {START_HINT}",
          file=sys.stderr)


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
    parser.add_argument(
        "--notify",
        metavar="KINDS",
        default="all",
        type=_kinds,
        help="notify when these attention kinds open for a pane you are not looking at: "
        "needs_input,failed,turn_done (default all; none: off)",
    )
    parser.add_argument(
        "--notify-via",
        metavar="CHANNELS",
        default="tmux,osc9,desktop",
        type=_channels,
        help="where: tmux (display-message), osc9 / osc777 (outer terminal, through tmux "
        "passthrough), desktop (freedesktop notifications over D-Bus); default "
        "tmux,osc9,desktop; none: off",
    )
    parser.add_argument(
        "--notify-interval",
        metavar="SECONDS",
        type=float,
        default=30.0,
        help="at most one notification per session within this many seconds (default 30)",
    )
    parser.add_argument(
        "--full-text",
        action="store_true",
        help="show attention reasons in full in tmux options and notifications too "
        "(default: the tool and a shortened command; status and watch always show all)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    from actors.cli.nats_view import add_run_arguments

    add_run_arguments(parser)


def _kinds(text: str) -> tuple[str, ...]:
    from actors.core.attention import parse_kinds

    try:
        return parse_kinds(text)
    except ValueError as exc:
        import argparse

        raise argparse.ArgumentTypeError(str(exc)) from None


def _channels(text: str) -> tuple[str, ...]:
    from actors.core.notify import parse_channels

    try:
        return parse_channels(text)
    except ValueError as exc:
        import argparse

        raise argparse.ArgumentTypeError(str(exc)) from None


def run_run(args: argparse.Namespace) -> int:
    import logging
    import os
    from pathlib import Path

    import anyio

    from actors.cli.daemon import (
        DaemonAlreadyRunning,
        DaemonConfig,
        EssentialActorStopped,
        run_daemon,
    )
    from actors.cli.nats_view import settings_from_args
    from actors.core import paths
    from actors.core.nats import SettingsError
    from actors.core.notify import NotifySettings
    from messages.errors import PanewardError

    try:
        nats = settings_from_args(args)
    except SettingsError as exc:
        print(f"paneward run: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if nats is not None:
        try:
            import nats as nats_py  # the daemon would import it at start anyway

            del nats_py
            installed = True
        except ImportError:
            installed = False
        if not installed:
            if args.nats is None and os.environ.get("NATS_URL"):
                # $NATS_URL may be meant for other NATS tools: the daemon runs, and says so.
                print("paneward run: $NATS_URL is set but nats-py is not installed "
                      "(pip install 'paneward[nats]'): not publishing", file=sys.stderr)
                nats = None
            else:
                print("paneward run: NATS needs nats-py: pip install 'paneward[nats]'",
                      file=sys.stderr)
                return EXIT_INVALID

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
        notify=NotifySettings(
            kinds=args.notify,
            channels=args.notify_via,
            min_interval_ms=max(0, int(args.notify_interval * 1000)),
            full_text=args.full_text,
        ),
        full_text=args.full_text,
        nats=nats,
    )

    def ready(sup: object) -> None:
        print(f"paneward: listening on {config.socket_path}", file=sys.stderr, flush=True)

    try:
        anyio.run(lambda: run_daemon(config, ready=ready))
    except DaemonAlreadyRunning as exc:
        print(f"paneward run: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except EssentialActorStopped as exc:
        # Loud and non-zero, so that a service manager (systemd Restart=on-failure) restarts
        # the daemon instead of leaving one that runs but hears nothing.
        print(f"paneward run: {exc}; exiting so that the daemon is restarted", file=sys.stderr)
        return EXIT_FAILED
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
        "--panes",
        action="store_true",
        help="with --json: a JSON list of PaneView objects (which session each pane shows)",
    )
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
    parser.add_argument(
        "--proofs",
        action="store_true",
        help="what each harness can prove, and from which evidence (no daemon needed; "
        "with --json as JSON)",
    )
    from actors.cli.nats_view import add_reader_arguments

    add_reader_arguments(parser)
    _add_hosts(parser)


def _add_hosts(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--host", metavar="NAME", help="only the sessions of this fleet host")
    which.add_argument("--local", action="store_true", help="only this machine's sessions")


def _hosts_fields(args: argparse.Namespace) -> bytes:
    """The request's ``host`` / ``local`` fields (``--host`` / ``--local``)."""
    host = getattr(args, "host", None)
    if getattr(args, "local", False):
        return b', "local": true'
    if host is not None:
        import json

        return b', "host": ' + json.dumps(host).encode()
    return b""


def proofs_json() -> dict[str, Any]:
    """``status --proofs --json``: per harness, its summary and, per axis value, the sources that
    prove it (``[]``: it cannot, and that value is never shown as proven for it) and how."""
    from actors.core.harness import axis_of
    from actors.harnesses.catalog import SPECS

    return {
        spec.id: {
            "summary": spec.summary,
            "proves": [
                {
                    "axis": axis_of(proof.value),
                    "value": proof.value,
                    "sources": list(proof.sources),
                    "how": proof.how,
                }
                for proof in spec.proofs
            ],
        }
        for spec in SPECS.values()
    }


def format_proofs(table: dict[str, Any]) -> str:
    """``status --proofs``: one line per harness and value; ``-`` where it cannot prove it."""
    lines = []
    for harness, entry in table.items():
        lines.append(f"{harness}: {entry['summary']}")
        for proof in entry["proves"]:
            sources = ", ".join(proof["sources"]) or "cannot prove"
            lines.append(f"  {proof['axis']:<9} {proof['value']:<11} {sources}: {proof['how']}")
    return "\n".join(lines)


def run_status(args: argparse.Namespace) -> int:
    if args.nats:
        from actors.cli.nats_view import run_status_nats

        return run_status_nats(args)
    if args.proofs:
        import json

        table = proofs_json()
        print(json.dumps(table, indent=2) if args.json else format_proofs(table))
        return EXIT_OK
    from actors.sources.control_client import request_chunks

    # The daemon answers in the form asked (the table it renders, the activities, the pane
    # views, the counters): printed as received, so this command needs no JSON module at all.
    form = (
        "counters" if args.counters
        else ("panes" if args.panes else "activities") if args.json
        else "table"
    )
    request = b'{"op": "status", "format": "%s", "all": %s%s}\n' % (
        form.encode(), b"true" if args.all else b"false", _hosts_fields(args)
    )
    try:
        reply = b"".join(request_chunks(_control_path(args), request))
    except OSError as exc:
        _no_daemon(args, "status", exc)
        return EXIT_NO_DAEMON
    if not reply:
        print(f"paneward status: no answer from {_control_path(args)}", file=sys.stderr)
        return EXIT_NO_DAEMON
    if reply.startswith(b'{"error"'):
        import json

        from actors.core.text import printable

        message = json.loads(reply)["error"]
        print(f"paneward status: {printable(str(message))}", file=sys.stderr)
        return EXIT_INVALID
    from actors.core.text import json_without_c1

    # The table is escaped by the daemon already; the JSON forms carry C1 controls raw.
    sys.stdout.buffer.write(json_without_c1(reply))
    sys.stdout.flush()
    return EXIT_OK


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
        help="first replay the journal's transitions after SEQ (with --nats: the stream's "
        "messages after stream sequence SEQ)",
    )
    from actors.cli.nats_view import add_reader_arguments

    add_reader_arguments(parser)
    parser.add_argument(
        "--fleet",
        action="store_true",
        help="the stream a fleet follower reads (JSON): this daemon's identity, the journal "
        "after SEQ, a snapshot, then live (docs/fleet.md)",
    )
    _add_hosts(parser)


def run_watch(args: argparse.Namespace) -> int:
    if args.nats:
        from actors.cli.nats_view import run_watch_nats

        return run_watch_nats(args)
    from actors.sources.control_client import request_chunks

    since = b"null" if args.since is None else str(args.since).encode()
    fleet = bool(getattr(args, "fleet", False))
    request = b'{"op": "watch", "since": %s, "fleet": %s%s}\n' % (
        since, b"true" if fleet else b"false", _hosts_fields(args)
    )
    try:
        # One write and one flush per read of the socket: a watcher of a busy daemon keeps up.
        for chunk in request_chunks(_control_path(args), request):
            if chunk.startswith(b'{"error"'):  # refused, e.g. too many watchers
                import json

                from actors.core.text import printable

                error = printable(str(json.loads(chunk.splitlines()[0])["error"]))
                print(f"paneward watch: {error}", file=sys.stderr)
                return EXIT_NO_DAEMON
            if args.json or fleet:
                from actors.core.text import json_without_c1

                sys.stdout.buffer.write(json_without_c1(chunk))  # chunks are whole lines
            else:
                import json

                sys.stdout.write(
                    "".join(_summary(json.loads(line)) + "\n" for line in chunk.splitlines())
                )
            sys.stdout.flush()
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        _no_daemon(args, "watch", exc)
        return EXIT_NO_DAEMON
    except (KeyboardInterrupt, BrokenPipeError):
        return EXIT_OK
    return EXIT_OK


def _summary(item: dict[str, Any]) -> str:
    from actors.core.text import clip, printable

    if item.get("type") == "Gap":
        return (
            f"# gap: {item['dropped']} transitions from #{item['next_seq']} are not in the "
            f"journal ({printable(str(item['reason']))})"
        )
    if item.get("type") != "Transition":
        import json

        return json.dumps(item)  # ASCII only: every control character is escaped
    a = item["after"]
    att = a.get("attention")
    attention = f" [{att['kind']}: {printable(att['reason'])}]" if att else ""
    pane = f" {printable(a['pane'])}" if a.get("pane") else ""
    return (
        f"#{item['seq']} {a['key']['harness']}:{clip(a['key']['session_id'], 13)}{pane} "
        f"{a['presence']}/{a['turn']}{attention} <- {printable(item['cause'])}"
    )


# ---------------------------------------------------------------------------- tmux-config


def add_tmux_config(parser: argparse.ArgumentParser) -> None:
    del parser


def run_tmux_config(args: argparse.Namespace) -> int:
    import os
    import shlex

    from actors.sinks.tmux import tmux_config_snippet

    # The key bindings run this paneward: tmux's run-shell may not have its venv on $PATH.
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    program = None
    if os.path.basename(script) == "paneward" and os.access(script, os.X_OK):
        program = shlex.quote(script)
    print(tmux_config_snippet(program), end="")
    return EXIT_OK


# ---------------------------------------------------------------------------- next, pick


def _add_tmux_target(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-L", dest="tmux_socket_name", metavar="NAME", help="tmux socket name")
    group.add_argument("-S", dest="tmux_socket_path", metavar="PATH", help="tmux socket path")


def _add_jump(parser: argparse.ArgumentParser) -> None:
    _add_socket(parser)
    _add_tmux_target(parser)
    parser.add_argument(
        "--kind",
        metavar="KINDS",
        type=_kinds,
        default=None,
        help="only these attention kinds (needs_input,failed,turn_done; default all)",
    )
    parser.add_argument(
        "--client",
        metavar="NAME",
        help="the tmux client to move (default: the one you are in, else the attached client "
        "used last); the key bindings pass #{client_name}",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="print nothing (tell the client instead)"
    )
    parser.add_argument(
        "--full-text", action="store_true", help="show reasons unredacted (pick's menu)"
    )


def add_next(parser: argparse.ArgumentParser) -> None:
    _add_jump(parser)
    parser.add_argument(
        "--pane", metavar="%N", help="jump to this pane's attention item (what pick's menu runs)"
    )


def add_pick(parser: argparse.ArgumentParser) -> None:
    _add_jump(parser)


class _TmuxFailed(Exception):
    """A tmux command failed (or tmux could not be run): its words."""


def _tmux(args: argparse.Namespace, *commands: Sequence[str]) -> str:
    """Run tmux commands (``;``-separated, one process) on the chosen server; their stdout.

    Every word reaches tmux as one word of its command, whatever it ends with
    (:func:`actors.core.tmux_protocol.commands_argv`). Never starts a server (``-N``; none of
    these commands would anyway).
    """
    import os
    import subprocess

    from actors.core.tmux_protocol import TmuxTarget, commands_argv

    argv = TmuxTarget(args.tmux_socket_name, args.tmux_socket_path).argv()
    argv.append("-N")
    argv += commands_argv(commands)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ))
    except OSError as exc:
        raise _TmuxFailed(f"cannot run tmux: {exc}") from None
    if done.returncode != 0:
        said = done.stderr.strip()
        if said.startswith(("error connecting to", "no server running on")):
            # tmux's words for a server that is not there (-N: none is ever started).
            where = TmuxTarget(args.tmux_socket_name, args.tmux_socket_path).describe()
            raise _TmuxFailed(
                f"the tmux server does not exist ({where}: {said}); "
                "start tmux, or name another server with -L NAME / -S PATH"
            )
        raise _TmuxFailed(said or f"tmux exited {done.returncode}")
    return done.stdout


def _inside_tmux(args: argparse.Namespace) -> bool:
    import os

    return bool(os.environ.get("TMUX")) and not (args.tmux_socket_name or args.tmux_socket_path)


def _queue(args: argparse.Namespace, prog: str) -> tuple[int, list[Activity]]:
    """(exit code, the attention queue's items that have a pane)."""
    import msgspec

    from actors.core.attention import attention_queue
    from messages import Activity

    try:
        line = _status_line(args, b"json")
    except OSError as exc:
        _tell(args, prog, args.client, f"no daemon at {_control_path(args)} ({exc}); {START_HINT}")
        return EXIT_NO_DAEMON, []
    import json

    body = json.loads(line)
    if "error" in body:
        _tell(args, prog, args.client, str(body["error"]))
        return EXIT_INVALID, []
    activities = msgspec.convert(body["activities"], list[Activity])
    # a fleet host's pane is not a local pane: the menu lists this machine's (next jumps there)
    queue = [a for a in attention_queue(activities, args.kind)
             if a.pane is not None and a.key.host is None]
    return EXIT_OK, queue


def _queue_items(args: argparse.Namespace, prog: str) -> tuple[int, list[dict[str, str]]]:
    """(exit code, the attention queue's items that have a pane, as the daemon decided them:
    ``{"pane", "key", "kind", "label"}``, in order, only ``args.kind``'s kinds)."""
    try:
        line = _status_line(args, b"queue")
    except OSError as exc:
        _tell(args, prog, args.client, f"no daemon at {_control_path(args)} ({exc}); {START_HINT}")
        return EXIT_NO_DAEMON, []
    import json

    body = json.loads(line)
    if isinstance(body, dict):
        _tell(args, prog, args.client, str(body.get("error", body)))
        return EXIT_INVALID, []
    kinds = args.kind
    return EXIT_OK, [item for item in body if kinds is None or item["kind"] in kinds]


def _status_line(args: argparse.Namespace, form: bytes) -> bytes:
    """One status request (in ``form``) on a plain socket: ``next`` sits on a key, so it does
    not import the control server (and anyio with it) to read one line.

    :raises OSError: no daemon, or it closed without answering.
    """
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5.0)
        sock.connect(str(_control_path(args)))
        sock.sendall(b'{"op": "status", "format": "%s"}\n' % form)
        with sock.makefile("rb") as reader:
            line = reader.readline()
    if not line.endswith(b"\n"):
        raise OSError("the daemon closed the connection without an answer")
    return line


def _tell(args: argparse.Namespace, prog: str, client: str | None, text: str) -> None:
    """An error or a note: on stderr, and on the client when one is named."""
    from actors.core.jump import message_command

    if not args.quiet or client is None:
        print(f"paneward {prog}: {text}", file=sys.stderr)
    if client is not None:
        import contextlib

        with contextlib.suppress(_TmuxFailed):
            _tmux(args, message_command(client, f"paneward: {text}"))


def _user_client(args: argparse.Namespace) -> tuple[str | None, bool]:
    """(the client named or the one to move, whether tmux's current client is meant)."""
    from actors.core.jump import CLIENTS_COMMAND, choose_client, parse_jump_clients

    if args.client:
        return args.client, False
    if _inside_tmux(args):
        return None, True
    return choose_client(parse_jump_clients(_tmux(args, CLIENTS_COMMAND))), False


def _acknowledge(args: argparse.Namespace, pane: str) -> None:
    """A jump to a ``turn_done`` closes it, as looking at the pane does."""
    import messages
    from actors.cli.hook_client import send_frame
    from actors.core import paths
    from actors.core.clock import now_ms

    frame = messages.encode(messages.Acknowledge(at_ms=now_ms(), pane=pane)) + b"\n"
    send_frame(frame, getattr(args, "socket", None) or paths.socket_path(), timeout=5.0)


def jump_to(args: argparse.Namespace, pane: str) -> str | None:
    """Bring ``pane`` in front of the user's client (``args``: ``-L``/``-S``, ``--client``, as
    ``paneward next`` takes them); the client moved (``None``: tmux's current one, or none
    attached and the pane selected in its window). Used by ``next`` and ``paneward top``.

    :raises _TmuxFailed: tmux refused or is not there (its words).
    """
    from actors.core.jump import jump_commands

    client, current = _user_client(args)
    _tmux(args, *jump_commands(pane, client, current=current))
    return client


def _remote_window(args: argparse.Namespace, item: dict[str, Any]) -> str:
    """The local pane showing a fleet host's pane: the window opened for that remote session
    before (its ``@paneward_remote`` option names it), else a new one running the item's
    ``attach`` command (``ssh -t HOST tmux attach ...``, docs/fleet.md)."""
    import shlex

    key = str(item["key"])
    listed = _tmux(args, ["list-windows", "-a", "-F", "#{pane_id} #{@paneward_remote}"])
    for line in listed.splitlines():
        pane, _, named = line.partition(" ")
        if named == key:
            return pane
    name = f"{item['host']}:{item['pane']}"
    pane = _tmux(args, ["new-window", "-d", "-P", "-F", "#{pane_id}", "-n", name,
                        shlex.join(item["attach"])]).strip()
    _tmux(args, ["set-option", "-w", "-t", pane, "@paneward_remote", key])
    return pane


def run_next(args: argparse.Namespace) -> int:
    code, queue = _queue_items(args, "next")
    if code != EXIT_OK:
        return code
    if args.pane is not None:
        queue = [item for item in queue if item["pane"] == args.pane and "host" not in item]
    try:
        if not queue:
            if args.pane is not None:
                # pick's menu named a pane whose item closed meanwhile: still go there.
                jump_to(args, args.pane)
            else:
                # "nothing needs you" from a server that is not there would mislead.
                _tmux(args, ["list-clients", "-F", "#{client_name}"])
            _tell(args, "next", args.client, "nothing needs you")
            return EXIT_INVALID
        item = queue[0]
        if "attach" in item:
            client = jump_to(args, _remote_window(args, item))
        else:
            client = jump_to(args, item["pane"])
    except _TmuxFailed as exc:
        _tell(args, "next", args.client, f"tmux: {exc}")
        return EXIT_INVALID
    if item["kind"] == "turn_done" and "host" not in item:
        try:
            _acknowledge(args, item["pane"])
        except OSError as exc:
            print(f"paneward next: could not acknowledge: {exc}", file=sys.stderr)
    if not args.quiet:
        from actors.core.text import printable

        where = f" on {client}" if client else ""
        print(f"{printable(item['pane'])}{where}: {printable(item['key'])} {item['label']}")
    return EXIT_OK


def _self_argv(args: argparse.Namespace) -> list[str]:
    """How tmux's ``run-shell`` runs this paneward again, with the same daemon and server."""
    import os

    from actors.core import paths

    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(script) == "paneward" and os.access(script, os.X_OK):
        argv = [script]
    else:
        argv = [sys.executable, "-m", "actors.cli.main"]
    argv += ["next", "-q", "--socket", getattr(args, "socket", None) or paths.socket_path()]
    if args.tmux_socket_name:
        argv += ["-L", args.tmux_socket_name]
    elif args.tmux_socket_path:
        argv += ["-S", args.tmux_socket_path]
    elif _inside_tmux(args):
        import os

        argv += ["-S", os.environ["TMUX"].split(",", 1)[0]]
    return argv


def run_pick(args: argparse.Namespace) -> int:
    from actors.core.clock import now_ms
    from actors.core.jump import LOCATIONS_COMMAND, menu_command, parse_locations

    code, queue = _queue(args, "pick")
    if code != EXIT_OK:
        return code
    try:
        client, current = _user_client(args)
        if client is None and current:
            client = _tmux(args, ["display-message", "-p", "#{client_name}"]).strip() or None
        if client is None:
            print("paneward pick: no attached tmux client to show the menu on", file=sys.stderr)
            return EXIT_INVALID
        if not queue:
            _tell(args, "pick", client, "nothing needs you")
            return EXIT_INVALID
        locations = parse_locations(_tmux(args, LOCATIONS_COMMAND))
        jump = [*_self_argv(args), "--client", client]
        _tmux(args, menu_command(client, queue, locations, jump, now_ms(),
                                 full_text=args.full_text))
    except _TmuxFailed as exc:
        _tell(args, "pick", args.client, f"tmux: {exc}")
        return EXIT_INVALID
    return EXIT_OK


# ---------------------------------------------------------------------------- top


def add_top(parser: argparse.ArgumentParser) -> None:
    _add_socket(parser)
    _add_tmux_target(parser)
    parser.add_argument(
        "--client",
        metavar="NAME",
        help="the tmux client Enter moves (default: the one you are in, else the attached "
        "client used last)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="also list sessions that ended more than a day ago",
    )


def run_top(args: argparse.Namespace) -> int:
    """The live view (:mod:`actors.cli.top`): 0 when the user quits, 1 without Textual (the
    ``top`` extra), 2 without a daemon."""
    try:
        from actors.cli import top
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] not in ("textual", "rich"):
            raise
        print(
            f"paneward top: needs Textual, an optional extra ({exc}): "
            "pip install 'paneward[top]'",
            file=sys.stderr,
        )
        return EXIT_INVALID
    try:
        _status_line(args, b"queue")
    except OSError as exc:
        _no_daemon(args, "top", exc)
        return EXIT_NO_DAEMON
    return top.run(args)


# ---------------------------------------------------------------------------- wait


def add_wait(parser: argparse.ArgumentParser) -> None:
    from actors.core.attention import PREDICATE_HELP

    _add_socket(parser)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--session", metavar="ID", help="a session: its id, harness:id, or a unique prefix"
    )
    group.add_argument("--pane", metavar="%N", help="a pane (judged by the session it shows)")
    group.add_argument("--any", action="store_true", help="the first session that matches")
    parser.add_argument(
        "--for-new",
        action="store_true",
        help="the session (or a session on the pane) may not exist yet: wait for it "
        f"(without it, one that does not exist is an error, exit {EXIT_NO_TARGET})",
    )
    parser.add_argument(
        "--until",
        metavar="PREDICATE",
        action="append",
        required=True,
        type=_predicate,
        help=f"what must hold (repeat: all of them): {PREDICATE_HELP}",
    )
    parser.add_argument(
        "--timeout", metavar="S", type=float, default=None, help="give up after S seconds (exit 1)"
    )


def _predicate(text: str) -> Any:
    from actors.core.attention import parse_predicate

    try:
        return parse_predicate(text)
    except ValueError as exc:
        import argparse

        raise argparse.ArgumentTypeError(str(exc)) from None


def run_wait(args: argparse.Namespace) -> int:
    """Exit 0 with the matching Activity as JSON, 1 on timeout, 2 without a daemon, 4 when
    the session or pane named does not exist (without ``--for-new``) or a prefix is ambiguous."""
    import socket
    import time

    import messages
    from actors.core.attention import AmbiguousSession, NoSuchTarget, WaitTarget
    from messages.activity import Overflow, Snapshot, Transition

    deadline: float | None = None
    if args.timeout is not None:
        deadline = time.monotonic() + float(args.timeout)
    target = WaitTarget(
        args.until, session=args.session, pane=args.pane, for_new=args.for_new
    )

    def remaining() -> float | None:
        if deadline is None:
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return left

    try:
        while True:  # a new subscription (snapshot first) after an overflow
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(5.0 if deadline is None else min(5.0, remaining() or 5.0))
                try:
                    sock.connect(str(_control_path(args)))
                except OSError as exc:
                    _no_daemon(args, "wait", exc)
                    return EXIT_NO_DAEMON
                sock.sendall(b'{"op": "watch", "snapshot": true}\n')
                with sock.makefile("rb") as reader:
                    while True:
                        sock.settimeout(remaining())
                        line = reader.readline()
                        if not line:
                            print("paneward wait: the daemon went away", file=sys.stderr)
                            return EXIT_NO_DAEMON
                        if line.startswith(b'{"error"'):  # e.g. too many watchers
                            import json

                            from actors.core.text import printable

                            error = printable(str(json.loads(line)["error"]))
                            print(f"paneward wait: {error}", file=sys.stderr)
                            return EXIT_NO_DAEMON
                        item = messages.decode_outbound(line)
                        found = None
                        if isinstance(item, Snapshot):
                            try:
                                found = target.snapshot(item.activities)
                            except (NoSuchTarget, AmbiguousSession) as exc:
                                from actors.core.text import printable

                                hint = "" if isinstance(exc, AmbiguousSession) else (
                                    "; give --for-new to wait for it to appear"
                                )
                                print(f"paneward wait: {printable(str(exc))}{hint}",
                                      file=sys.stderr)
                                return EXIT_NO_TARGET
                        elif isinstance(item, Transition):
                            found = target.update(item.after)
                        elif isinstance(item, Overflow):
                            break
                        if found is not None:
                            from actors.core.text import json_without_c1

                            sys.stdout.buffer.write(json_without_c1(messages.encode(found)) + b"\n")
                            sys.stdout.flush()
                            return EXIT_OK
    except TimeoutError:
        print("paneward wait: timed out", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        return EXIT_INVALID


# ---------------------------------------------------------------------------- ack, forget


def add_ack(parser: argparse.ArgumentParser) -> None:
    _add_socket(parser)
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="PANE|SESSION",
        help="a pane (%%N: the sessions it shows) or a session (its id, harness:id or a unique "
        "prefix); default: the pane you are in ($TMUX_PANE)",
    )
    parser.add_argument(
        "--all", action="store_true", help="every session with a done or failed open"
    )


def add_forget(parser: argparse.ArgumentParser) -> None:
    _add_socket(parser)
    parser.add_argument(
        "sessions",
        nargs="+",
        metavar="SESSION",
        help="an ended session: its id, harness:id or a unique prefix",
    )


def _send_frames(args: argparse.Namespace, frames: Sequence[bytes]) -> None:
    """Inbound messages to the daemon's hook socket, in order, over one connection.

    :raises OSError: no daemon.
    """
    from actors.cli.hook_client import send_frame
    from actors.core import paths

    path = getattr(args, "socket", None) or paths.socket_path()
    send_frame(b"".join(frames), path, timeout=5.0)


def run_ack(args: argparse.Namespace) -> int:
    """Close the ``turn_done`` / ``failed`` of each pane or session named (an ended session in
    its pane with nothing open: it leaves the pane): exit 0 (each one named is said, with what
    was closed or why nothing was), 2 no daemon / usage, 4 a target
    that does not exist or an ambiguous prefix (then nothing is sent)."""
    import os

    import msgspec

    import messages
    from actors.core.attention import (
        ATTENTION_WORDS,
        AmbiguousSession,
        NoSuchTarget,
        resolve_session,
    )
    from actors.core.clock import now_ms
    from actors.core.reducer import pane_winners
    from actors.core.text import printable

    targets: list[str] = list(args.targets)
    if args.all and targets:
        print("paneward ack: give targets or --all, not both", file=sys.stderr)
        return EXIT_NO_DAEMON
    if not targets and not args.all:
        pane = os.environ.get("TMUX_PANE")
        if not pane:
            print("paneward ack: name a pane or a session (or --all, or run it in a tmux pane)",
                  file=sys.stderr)
            return EXIT_NO_DAEMON
        targets = [pane]
    try:
        line = _status_line(args, b"activities")
    except OSError as exc:
        _no_daemon(args, "ack", exc)
        return EXIT_NO_DAEMON
    activities = msgspec.json.decode(line, type=list[messages.Activity])
    if args.all:
        chosen = [a for a in activities
                  if a.attention is not None and a.attention.kind != "needs_input"]
        targets = [str(a.key) for a in chosen]
        if not targets:
            print("nothing to acknowledge")
            return EXIT_OK
    by_key = {a.key: a for a in activities}
    shown = pane_winners(activities)
    resolved: list[tuple[str, messages.Activity, messages.Acknowledge]] = []
    problems: list[str] = []
    at = now_ms()
    for target in targets:
        try:
            if target.startswith("%"):
                if target not in shown:
                    raise NoSuchTarget(f"no session shows pane {target!r}")
                ack = messages.Acknowledge(at_ms=at, pane=target)
                resolved.append((target, shown[target], ack))
            else:
                key = resolve_session(by_key, target)
                resolved.append((str(key), by_key[key], messages.Acknowledge(at_ms=at, key=key)))
        except (NoSuchTarget, AmbiguousSession) as exc:
            problems.append(printable(str(exc)))
    if problems:
        for problem in problems:
            print(f"paneward ack: {problem}", file=sys.stderr)
        return EXIT_NO_TARGET
    frames = []
    lines = []
    for name, activity, ack in resolved:
        attention = activity.attention
        if attention is None and activity.presence == "persisted" and activity.pane is not None:
            # An ended session seen: it leaves its pane (docs/tmux.md).
            frames.append(messages.encode(ack) + b"\n")
            lines.append(f"{printable(name)}: exited acknowledged")
        elif attention is None:
            lines.append(f"{printable(name)}: nothing to acknowledge")
        elif attention.kind == "needs_input":
            lines.append(f"{printable(name)}: needs you (answer it in its pane: acknowledge "
                         "closes done and failed)")
        else:
            frames.append(messages.encode(ack) + b"\n")
            lines.append(f"{printable(name)}: {ATTENTION_WORDS[attention.kind]} acknowledged")
    if frames:
        try:
            _send_frames(args, frames)
        except OSError as exc:
            _no_daemon(args, "ack", exc)
            return EXIT_NO_DAEMON
    print("\n".join(lines))
    return EXIT_OK


#: How long ``forget`` waits for the daemon to publish each session's last transition.
FORGET_TIMEOUT_S = 5.0


def run_forget(args: argparse.Namespace) -> int:
    """Drop each ended session named from every view and the store: exit 0 forgotten, 1
    refused (a session still live: nothing is sent) or not confirmed in time, 2 no daemon /
    usage, 4 a session that does not exist or an ambiguous prefix (nothing is sent)."""
    import socket
    import time

    import messages
    from actors.core.attention import AmbiguousSession, NoSuchTarget, resolve_session
    from actors.core.clock import now_ms
    from actors.core.text import printable
    from messages.activity import Snapshot, Transition

    deadline = time.monotonic() + FORGET_TIMEOUT_S
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(FORGET_TIMEOUT_S)
        try:
            sock.connect(str(_control_path(args)))
        except OSError as exc:
            _no_daemon(args, "forget", exc)
            return EXIT_NO_DAEMON
        # Subscribed before anything is sent: the last transition of each cannot be missed.
        sock.sendall(b'{"op": "watch", "snapshot": true}\n')
        with sock.makefile("rb") as reader:
            first = messages.decode_outbound(reader.readline() or b"null")
            if not isinstance(first, Snapshot):
                print("paneward forget: the daemon went away", file=sys.stderr)
                return EXIT_NO_DAEMON
            by_key = {a.key: a for a in first.activities}
            keys: dict[messages.SessionKey, None] = {}
            problems: list[str] = []
            refused: list[str] = []
            for text in args.sessions:
                try:
                    key = resolve_session(by_key, text)
                except (NoSuchTarget, AmbiguousSession) as exc:
                    problems.append(printable(str(exc)))
                    continue
                if by_key[key].presence != "persisted":
                    refused.append(
                        f"{printable(str(key))} is {by_key[key].presence}: only an ended "
                        "session can be forgotten"
                    )
                keys[key] = None
            for problem in problems or refused:
                print(f"paneward forget: {problem}", file=sys.stderr)
            if problems:
                return EXIT_NO_TARGET
            if refused:
                return EXIT_INVALID
            at = now_ms()
            try:
                _send_frames(args, [messages.encode(messages.Forget(key, at)) + b"\n"
                                    for key in keys])
            except OSError as exc:
                _no_daemon(args, "forget", exc)
                return EXIT_NO_DAEMON
            waiting = dict(keys)
            try:
                while waiting:
                    sock.settimeout(max(deadline - time.monotonic(), 0.001))
                    line = reader.readline()
                    if not line:
                        break
                    item = messages.decode_outbound(line)
                    if isinstance(item, Transition) and item.key in waiting:
                        if item.forgets:
                            del waiting[item.key]
                            print(f"forgot {printable(str(item.key))}")
                        elif item.after.presence != "persisted":
                            break  # it runs again: the daemon keeps it
            except TimeoutError:
                pass
    for key in waiting:
        print(f"paneward forget: the daemon did not forget {printable(str(key))} (it may run "
              "again)", file=sys.stderr)
    return EXIT_INVALID if waiting else EXIT_OK
