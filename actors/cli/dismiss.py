"""``paneward ack`` and ``paneward forget``: close a pane's or a session's ``turn_done`` /
``failed``; drop an ended session from every view and the store.
"""

from __future__ import annotations

import sys

from actors.cli.common import (
    EXIT_INVALID,
    EXIT_NO_DAEMON,
    EXIT_NO_TARGET,
    EXIT_OK,
    add_socket,
    control_path,
    no_daemon,
    send_frames,
    status_line,
)

# Typing only (typing and argparse would cost the command's start milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

__all__ = ["FORGET_TIMEOUT_S", "add_ack", "add_forget", "run_ack", "run_forget"]


def add_ack(parser: argparse.ArgumentParser) -> None:
    add_socket(parser)
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
    add_socket(parser)
    parser.add_argument(
        "sessions",
        nargs="+",
        metavar="SESSION",
        help="an ended session: its id, harness:id or a unique prefix",
    )




def run_ack(args: argparse.Namespace) -> int:
    """Close the ``turn_done`` / ``failed`` of each pane or session named (an ended session in
    its pane with nothing open: it leaves the pane): exit 0 (each one named is said, with what
    was closed or why nothing was), 2 no daemon / usage, 4 a target
    that does not exist or an ambiguous prefix (then nothing is sent)."""
    import os

    import msgspec

    import messages
    from actors.core.clock import now_ms
    from actors.core.session.reducer import pane_winners
    from actors.core.text import printable
    from actors.core.views.attention import (
        ATTENTION_WORDS,
        AmbiguousSession,
        NoSuchTarget,
        resolve_here,
    )

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
        line = status_line(args, b"activities")
    except OSError as exc:
        no_daemon(args, "ack", exc)
        return EXIT_NO_DAEMON
    every = msgspec.json.decode(line, type=list[messages.Activity])
    # this machine's: a fleet host's session is acknowledged on its host (its daemon's state)
    activities = [a for a in every if a.key.host is None]
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
                key = resolve_here((a.key for a in every), target, "ack")
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
            send_frames(args, frames)
        except OSError as exc:
            no_daemon(args, "ack", exc)
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
    from actors.core.clock import now_ms
    from actors.core.text import printable
    from actors.core.views.attention import AmbiguousSession, NoSuchTarget, resolve_here
    from messages.activity import Snapshot, Transition

    deadline = time.monotonic() + FORGET_TIMEOUT_S
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(FORGET_TIMEOUT_S)
        try:
            sock.connect(str(control_path(args)))
        except OSError as exc:
            no_daemon(args, "forget", exc)
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
                    key = resolve_here(by_key, text, "forget")
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
                send_frames(args, [messages.encode(messages.Forget(key, at)) + b"\n"
                                    for key in keys])
            except OSError as exc:
                no_daemon(args, "forget", exc)
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
