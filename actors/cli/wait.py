"""``paneward wait``: block until a session (or a pane's, or any) matches every predicate.

It reads the control socket's watch stream, snapshot first (a fleet host's sessions in it too:
``--host`` / ``--local`` keep one side; a pane is this machine's unless ``--host`` names its
host).
"""

from __future__ import annotations

import sys

from actors.cli.common import (
    EXIT_INVALID,
    EXIT_NO_DAEMON,
    EXIT_NO_TARGET,
    EXIT_OK,
    add_hosts,
    add_socket,
    control_path,
    hosts_fields,
    no_daemon,
)

# Typing only (typing and argparse would cost the command's start milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

__all__ = ["add_wait", "run_wait"]


def add_wait(parser: argparse.ArgumentParser) -> None:
    from actors.core.views.attention import PREDICATE_HELP

    add_socket(parser)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--session", metavar="ID",
        help="a session: its id, harness:id, HOST/harness:id (a fleet host's), or a unique prefix",
    )
    group.add_argument("--pane", metavar="%N", help="a pane (judged by the session it shows; "
                       "this machine's, or with --host that host's)")
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
    add_hosts(parser)


def _predicate(text: str) -> Any:
    from actors.core.views.attention import parse_predicate

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
    from actors.core.views.attention import AmbiguousSession, NoSuchTarget, WaitTarget
    from messages.activity import Overflow, Snapshot, Transition

    deadline: float | None = None
    if args.timeout is not None:
        deadline = time.monotonic() + float(args.timeout)
    target = WaitTarget(
        args.until, session=args.session, pane=args.pane, for_new=args.for_new
    )

    # a pane id names a pane of one tmux server: this machine's unless --host names another
    pane_local = args.pane is not None and args.host is None
    fields = b', "local": true' if pane_local else hosts_fields(args)

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
                    sock.connect(str(control_path(args)))
                except OSError as exc:
                    no_daemon(args, "wait", exc)
                    return EXIT_NO_DAEMON
                sock.sendall(b'{"op": "watch", "snapshot": true%s}\n' % fields)
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
