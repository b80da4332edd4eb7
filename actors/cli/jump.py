"""``paneward next`` and ``paneward pick``: to the attention queue's pane, or a menu of it.

Both sit on key bindings: the daemon decides the queue (``{"op": "status", "format":
"queue"}``), the tmux commands are :mod:`actors.core.views.jump`'s, so ``next`` loads neither
msgspec nor the reducer. A fleet host's item is reached through a local window attached to its pane
(:func:`_remote_window`, docs/fleet.md); a host followed through NATS has no route to its
terminal from here, so what needs you there is said instead of offered (:func:`_no_jump`).
"""

from __future__ import annotations

import sys

from actors.cli.common import (
    EXIT_INVALID,
    EXIT_NO_DAEMON,
    EXIT_OK,
    START_HINT,
    TmuxFailed,
    add_hosts,
    add_socket,
    add_tmux_target,
    control_path,
    hosts_fields,
    inside_tmux,
    kinds,
    status_line,
    tmux,
)

# Typing only (typing and argparse would cost the command's start milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from messages import Activity, SessionKey

__all__ = ["add_next", "add_pick", "jump_remote", "jump_to", "run_next", "run_pick"]


def _add_jump(parser: argparse.ArgumentParser) -> None:
    add_socket(parser)
    add_tmux_target(parser)
    parser.add_argument(
        "--kind",
        metavar="KINDS",
        type=kinds,
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
    add_hosts(parser)


def add_next(parser: argparse.ArgumentParser) -> None:
    _add_jump(parser)
    parser.add_argument(
        "--pane", metavar="%N",
        help="jump to this pane's attention item (with --host: that host's pane; what pick's "
        "menu runs)",
    )


def add_pick(parser: argparse.ArgumentParser) -> None:
    _add_jump(parser)


def _queue(args: argparse.Namespace, prog: str) -> tuple[int, list[Activity]]:
    """(exit code, the attention queue's items that have a pane: this machine's and the fleet
    hosts', as ``--host`` / ``--local`` keep them)."""
    import msgspec

    from actors.core.views.attention import attention_queue
    from messages import Activity

    try:
        line = status_line(args, b"activities", hosts_fields(args))
    except OSError as exc:
        _tell(args, prog, args.client, f"no daemon at {control_path(args)} ({exc}); {START_HINT}")
        return EXIT_NO_DAEMON, []
    if line.startswith(b'{"error"'):
        import json

        _tell(args, prog, args.client, str(json.loads(line)["error"]))
        return EXIT_INVALID, []
    activities = msgspec.json.decode(line, type=list[Activity])
    return EXIT_OK, [a for a in attention_queue(activities, args.kind) if a.pane is not None]


def _queue_items(args: argparse.Namespace, prog: str) -> tuple[int, list[dict[str, str]]]:
    """(exit code, the attention queue's items that have a pane, as the daemon decided them:
    ``{"pane", "key", "kind", "label"}`` and a fleet host's ``host`` and ``attach``, in order,
    only ``args.kind``'s kinds and ``--host`` / ``--local``'s side)."""
    try:
        line = status_line(args, b"queue", hosts_fields(args))
    except OSError as exc:
        _tell(args, prog, args.client, f"no daemon at {control_path(args)} ({exc}); {START_HINT}")
        return EXIT_NO_DAEMON, []
    import json

    body = json.loads(line)
    if isinstance(body, dict):
        _tell(args, prog, args.client, str(body.get("error", body)))
        return EXIT_INVALID, []
    wanted = args.kind
    return EXIT_OK, [item for item in body if wanted is None or item["kind"] in wanted]


def _no_jump(args: argparse.Namespace) -> dict[str, str]:
    """The fleet hosts whose panes cannot be reached from here (followed through NATS), each
    with why (its ``hosts`` row's ``no_jump``); none without a daemon or a fleet."""
    import json

    try:
        rows = json.loads(status_line(args, b"hosts"))
    except (OSError, ValueError):
        return {}
    if not isinstance(rows, list):
        return {}
    return {str(r["host"]): str(r["no_jump"]) for r in rows
            if isinstance(r, dict) and r.get("no_jump")}


def _unreached(counts: dict[str, int], why: dict[str, str]) -> str:
    """``1 on far (far is followed through NATS ...)``: the items left out, by host."""
    return "; ".join(f"{n} on {host} ({why[host]})" for host, n in sorted(counts.items()))


def _nothing_reached(args: argparse.Namespace, prog: str) -> str | None:
    """Why ``next`` found nothing to go to when something needs you all the same: ``--host``
    names a host whose panes cannot be reached from here, or only such hosts' items are
    queued. ``None`` when nothing needs you at all."""
    from actors.core.text import printable

    if args.local:
        return None
    why = _no_jump(args)
    if args.host is not None:
        return printable(why[args.host]) if args.host in why else None
    if not why:
        return None
    import json

    try:
        activities = json.loads(status_line(args, b"activities"))
    except (OSError, ValueError):
        return None
    counts: dict[str, int] = {}
    for a in activities if isinstance(activities, list) else []:
        host, attention = a.get("key", {}).get("host"), a.get("attention")
        if host in why and a.get("pane") and attention and (
                args.kind is None or attention.get("kind") in args.kind):
            counts[host] = counts.get(host, 0) + 1
    if not counts:
        return None
    return printable(f"nothing needs you that {prog} can reach: {_unreached(counts, why)}")


def _tell(args: argparse.Namespace, prog: str, client: str | None, text: str) -> None:
    """An error or a note: on stderr, and on the client when one is named."""
    from actors.core.views.jump import message_command

    if not args.quiet or client is None:
        print(f"paneward {prog}: {text}", file=sys.stderr)
    if client is not None:
        import contextlib

        with contextlib.suppress(TmuxFailed):
            tmux(args, message_command(client, f"paneward: {text}"))


def _user_client(args: argparse.Namespace) -> tuple[str | None, bool]:
    """(the client named or the one to move, whether tmux's current client is meant)."""
    from actors.core.views.jump import CLIENTS_COMMAND, choose_client, parse_jump_clients

    if args.client:
        return args.client, False
    if inside_tmux(args):
        return None, True
    return choose_client(parse_jump_clients(tmux(args, CLIENTS_COMMAND))), False


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

    :raises TmuxFailed: tmux refused or is not there (its words).
    """
    from actors.core.views.jump import jump_commands

    client, current = _user_client(args)
    tmux(args, *jump_commands(pane, client, current=current))
    return client


def _remote_window(args: argparse.Namespace, item: dict[str, Any]) -> str:
    """The local pane showing a fleet host's pane: the window opened for that remote session
    before (its ``@paneward_remote`` option names it), else a new one running the item's
    ``attach`` command (``ssh -t HOST tmux attach ...``, docs/fleet.md)."""
    import shlex

    key = str(item["key"])
    listed = tmux(args, ["list-windows", "-a", "-F", "#{pane_id} #{@paneward_remote}"])
    for line in listed.splitlines():
        pane, _, named = line.partition(" ")
        if named == key:
            return pane
    name = f"{item['host']}:{item['pane']}"
    pane = tmux(args, ["new-window", "-d", "-P", "-F", "#{pane_id}", "-n", name,
                        shlex.join(item["attach"])]).strip()
    tmux(args, ["set-option", "-w", "-t", pane, "@paneward_remote", key])
    return pane


def jump_remote(args: argparse.Namespace, key: SessionKey) -> str | None:
    """Bring a fleet host's session that needs you in front of the user's client, as ``next``
    does (:func:`_remote_window`); the client moved, as :func:`jump_to` says. Used by
    ``paneward top``.

    :raises OSError: no daemon.
    :raises LookupError: the session is not in the attention queue (any more), or its pane
        cannot be attached to (a host followed through NATS: the message says so).
    :raises TmuxFailed: tmux refused or is not there (its words).
    """
    import json

    fields = b', "host": ' + json.dumps(key.host).encode()
    items = json.loads(status_line(args, b"queue", fields))
    item = next((i for i in items if isinstance(i, dict) and i.get("key") == str(key)
                 and "attach" in i), None) if isinstance(items, list) else None
    if item is None:
        why = _no_jump(args).get(str(key.host))
        raise LookupError(why or "it does not need you (any more): nothing to reach")
    return jump_to(args, _remote_window(args, item))


def run_next(args: argparse.Namespace) -> int:
    code, queue = _queue_items(args, "next")
    if code != EXIT_OK:
        return code
    if args.pane is not None:
        # --pane %N is this machine's pane, --host NAME --pane %N that host's
        queue = [item for item in queue
                 if item["pane"] == args.pane and item.get("host") == args.host]
    try:
        if not queue:
            unreached = _nothing_reached(args, "next")
            if unreached is not None:
                _tell(args, "next", args.client, unreached)
                return EXIT_INVALID
            if args.pane is not None and args.host is not None:
                # a remote pane is reached through its item's attach command: gone with it
                from actors.core.text import printable

                _tell(args, "next", args.client,
                      f"nothing needs you on {printable(args.host)} {printable(args.pane)}")
                return EXIT_INVALID
            if args.pane is not None:
                # pick's menu named a pane whose item closed meanwhile: still go there.
                jump_to(args, args.pane)
            else:
                # "nothing needs you" from a server that is not there would mislead.
                tmux(args, ["list-clients", "-F", "#{client_name}"])
            _tell(args, "next", args.client, "nothing needs you")
            return EXIT_INVALID
        item = queue[0]
        if "attach" in item:
            client = jump_to(args, _remote_window(args, item))
        else:
            client = jump_to(args, item["pane"])
    except TmuxFailed as exc:
        _tell(args, "next", args.client, f"tmux: {exc}")
        return EXIT_INVALID
    if item["kind"] == "turn_done" and "host" not in item:
        try:
            _acknowledge(args, item["pane"])
        except OSError as exc:
            print(f"paneward next: could not acknowledge: {exc}", file=sys.stderr)
    if not args.quiet:
        from actors.core.text import printable

        on = f" on {client}" if client else ""
        pane = printable(item["pane"])
        where = f"{printable(item['host'])} {pane}" if "host" in item else pane
        print(f"{where}{on}: {printable(item['key'])} {item['label']}")
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
    elif inside_tmux(args):
        import os

        argv += ["-S", os.environ["TMUX"].split(",", 1)[0]]
    return argv


def run_pick(args: argparse.Namespace) -> int:
    from actors.core.clock import now_ms
    from actors.core.views.jump import LOCATIONS_COMMAND, menu_command, parse_locations

    code, queue = _queue(args, "pick")
    if code != EXIT_OK:
        return code
    try:
        client, current = _user_client(args)
        if client is None and current:
            client = tmux(args, ["display-message", "-p", "#{client_name}"]).strip() or None
        if client is None:
            print("paneward pick: no attached tmux client to show the menu on", file=sys.stderr)
            return EXIT_INVALID
        why = _no_jump(args) if any(a.key.host is not None for a in queue) else {}
        counts: dict[str, int] = {}
        for activity in queue:
            if activity.key.host in why:
                counts[activity.key.host] = counts.get(activity.key.host, 0) + 1
        queue = [a for a in queue if a.key.host not in why]
        if counts:
            from actors.core.text import printable

            left = printable(_unreached(counts, why))
            # a menu item that could not take you there is never offered: said instead
            _tell(args, "pick", client, f"nothing needs you that pick can reach: {left}"
                  if not queue else f"not in the menu: {left}")
        if not queue:
            if not counts:
                _tell(args, "pick", client, "nothing needs you")
            return EXIT_INVALID
        locations = parse_locations(tmux(args, LOCATIONS_COMMAND))
        jump = [*_self_argv(args), "--client", client]
        tmux(args, menu_command(client, queue, locations, jump, now_ms(),
                                 full_text=args.full_text))
    except TmuxFailed as exc:
        _tell(args, "pick", args.client, f"tmux: {exc}")
        return EXIT_INVALID
    return EXIT_OK
