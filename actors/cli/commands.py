"""The daemon-side subcommands of ``paneward``: run, status, watch, tmux-config.

Registered in :data:`actors.cli.main.COMMANDS`. ``status`` and ``watch`` talk to the
running daemon over its control socket (:mod:`actors.sources.control_server`); they
exit 2 when no daemon is listening.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from messages import Activity

__all__ = [
    "add_run",
    "add_status",
    "add_tmux_config",
    "add_watch",
    "format_table",
    "run_run",
    "run_status",
    "run_tmux_config",
    "run_watch",
]

EXIT_OK, EXIT_INVALID, EXIT_NO_DAEMON, EXIT_FAILED = 0, 1, 2, 3


def _control_path(args: argparse.Namespace) -> Path:
    from actors.core import paths

    return Path(paths.control_path(getattr(args, "socket", None)))


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

    import anyio

    from actors.cli.daemon import (
        DaemonAlreadyRunning,
        DaemonConfig,
        EssentialActorStopped,
        run_daemon,
    )
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
        "--counters",
        action="store_true",
        help="print every actor's counters (rejected, unmapped, drops, ...) as JSON",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="also list sessions that ended more than a day ago (the table hides them)",
    )


def _request(args: argparse.Namespace, request: dict[str, Any]) -> Any:
    from actors.sources.control_server import request_lines

    return request_lines(_control_path(args), request)


def run_status(args: argparse.Namespace) -> int:
    from actors.core.text import printable

    try:
        line = next(iter(_request(args, {"op": "status"})), None)
    except OSError as exc:
        print(f"paneward status: no daemon at {_control_path(args)} ({exc})", file=sys.stderr)
        return EXIT_NO_DAEMON
    if line is None:
        print(
            f"paneward status: the daemon at {_control_path(args)} closed the connection "
            "without answering",
            file=sys.stderr,
        )
        return EXIT_NO_DAEMON
    body = json.loads(line)
    if "error" in body:
        print(f"paneward status: {printable(str(body['error']))}", file=sys.stderr)
        return EXIT_INVALID
    if args.counters:
        print(json.dumps(body["statistics"], indent=2, sort_keys=True))
    elif args.json:
        print(json.dumps(body["activities"]))
    else:
        import msgspec

        from actors.core.clock import now_ms
        from messages import Activity

        activities = msgspec.convert(body["activities"], list[Activity])
        print(format_table(activities, now_ms(), show_all=args.all))
        print(_counter_line(body["statistics"]))
        print(_actor_line(body["statistics"]))
    return EXIT_OK


def _age(now_ms: int, at_ms: int | None) -> str:
    if not at_ms:
        return "-"
    seconds = max(0, (now_ms - at_ms) // 1000)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def format_table(
    activities: Sequence[Activity], now_ms: int, *, show_all: bool = False
) -> str:
    """The ``paneward status`` table: pane, harness, session, presence, turn, attention,
    source, age (of the evidence), most urgent first (:func:`actors.core.reducer.attention_order`).

    Sessions settled for more than a day (:func:`actors.core.reducer.hidden_after`) are left out
    (and counted in a last line) unless ``show_all``. A session bound to a pane that shows
    another one (:func:`actors.core.reducer.pane_winners`) has its pane in parentheses.
    """
    from actors.core.reducer import attention_order, hidden_after, pane_winners
    from actors.core.text import clip, printable

    hidden = 0
    if not show_all:
        kept = [a for a in activities if not hidden_after(a, now_ms)]
        hidden = len(activities) - len(kept)
        activities = kept
    shown = pane_winners(activities)
    header = ("PANE", "HARNESS", "SESSION", "PRESENCE", "TURN", "ATTENTION", "SOURCE", "AGE")
    rows = [header]
    # Ids, panes and reasons come from payloads: escaped (never raw control characters), and
    # cut after escaping, so a cut cannot leave an escape sequence open.
    for a in sorted(activities, key=attention_order):
        att = a.attention
        attention = f"{att.kind}: {att.reason}" if att else "-"
        pane = printable(a.pane) if a.pane is not None else "-"
        if a.pane is not None and shown[a.pane].key != a.key:
            pane = f"({pane})"
        evidence = a.evidence
        rows.append(
            (
                pane,
                a.key.harness,
                clip(a.key.session_id, 13),
                a.presence,
                a.turn,
                clip(attention, 40),
                evidence.source,
                _age(now_ms, evidence.at_ms or evidence.observed_at_ms),
            )
        )
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    if len(rows) == 1 and not hidden:
        lines.append("(no sessions yet)")
    if hidden:
        lines.append(f"({hidden} more ended more than a day ago: paneward status --all)")
    return "\n".join(lines)


def _counter_line(stats: dict[str, Any]) -> str:
    """The summary line: ``drops`` counts every message or row paneward lost on purpose --
    the supervisor's (crashing or refused messages) and the store's (rows it could not keep)."""
    sup = stats.get("supervisor", {})
    hook = stats.get("hook_listener", {})
    store = stats.get("store", {})
    control = stats.get("control", {})
    rejected_frames = sum((hook.get("rejected") or {}).values())
    rejected = sup.get("rejected", 0) + rejected_frames + control.get("bad_requests", 0)
    drops = sup.get("drops", 0) + store.get("dropped", 0) + store.get("gap_transitions", 0)
    return (
        f"messages {sup.get('messages', 0)} · transitions {sup.get('transitions', 0)} · "
        f"rejected {rejected} · unmapped {sup.get('unmapped', 0)}"
        f" · drops {drops} · overflows {sup.get('overflows', 0)}"
        f" · restarts {sup.get('restarts', 0)}"
    )


def _actor_line(stats: dict[str, Any]) -> str:
    """Every long-running actor's state (``running``, ``restarting``, ``stopped``, ``done``),
    a stopped one first and in capitals so it cannot be missed."""
    states: dict[str, str] = stats.get("supervisor", {}).get("actor_states") or {}
    if not states:
        return "actors: none"
    order = {"stopped": 0, "restarting": 1, "running": 2, "done": 3}
    parts = [
        f"{name} {state.upper() if state == 'stopped' else state}"
        for name, state in sorted(states.items(), key=lambda kv: (order.get(kv[1], 9), kv[0]))
    ]
    return "actors: " + " · ".join(parts)


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
    try:
        lines = _request(args, {"op": "watch", "since": args.since})
        for line in lines:
            if args.json:
                sys.stdout.buffer.write(line + b"\n")
            else:
                print(_summary(json.loads(line)))
            sys.stdout.flush()
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        print(f"paneward watch: no daemon at {_control_path(args)} ({exc})", file=sys.stderr)
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
    from actors.sinks.tmux import tmux_config_snippet

    print(tmux_config_snippet(), end="")
    return EXIT_OK
