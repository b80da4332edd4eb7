"""``paneward watch``: transitions as they happen (a summary line each, JSON lines with
``--json``, the fleet follower's stream with ``--fleet``).

Short-lived to start: its top level imports only what it uses (the standard library).
"""

from __future__ import annotations

import sys

from actors.cli.common import (
    EXIT_NO_DAEMON,
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

__all__ = ["add_watch", "run_watch", "summary_line"]


def add_watch(parser: argparse.ArgumentParser) -> None:
    add_socket(parser)
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
    add_hosts(parser)


def run_watch(args: argparse.Namespace) -> int:
    if args.nats:
        from actors.cli.nats_view import run_watch_nats

        return run_watch_nats(args)
    from actors.cli.control_client import request_chunks

    _exit_when_the_reader_leaves()
    since = b"null" if args.since is None else str(args.since).encode()
    fleet = bool(getattr(args, "fleet", False))
    request = b'{"op": "watch", "since": %s, "fleet": %s%s}\n' % (
        since, b"true" if fleet else b"false", hosts_fields(args)
    )
    try:
        # One write and one flush per read of the socket: a watcher of a busy daemon keeps up.
        for chunk in request_chunks(control_path(args), request):
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
                    "".join(summary_line(json.loads(line)) + "\n" for line in chunk.splitlines())
                )
            sys.stdout.flush()
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        no_daemon(args, "watch", exc)
        return EXIT_NO_DAEMON
    except (KeyboardInterrupt, BrokenPipeError):
        return EXIT_OK
    return EXIT_OK


def _exit_when_the_reader_leaves() -> None:
    """End the watch as soon as whoever reads its stdout is gone, not at the next write.

    A quiet daemon writes nothing for hours; a fleet follower whose ssh link dropped would
    otherwise leave one more idle ``paneward watch`` on its host at every reconnect. A pipe
    whose reader closed reports ``POLLERR``, a socket or terminal whose peer left ``POLLHUP``:
    a daemon thread waits for either (poll reports both whatever is asked) and interrupts
    the main thread's blocking read with ``SIGINT``, which ends the watch like Ctrl-C
    (exit 0).
    """
    import select
    import signal
    import threading

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # no real stdout (embedded): nothing to watch
    main = threading.main_thread().ident

    def wait() -> None:
        poller = select.poll()
        poller.register(fd, 0)
        while True:
            for _, events in poller.poll():
                if events & (select.POLLERR | select.POLLHUP | select.POLLNVAL) and main:
                    signal.pthread_kill(main, signal.SIGINT)
                    return

    threading.Thread(target=wait, name="paneward-watch-reader", daemon=True).start()


def summary_line(item: dict[str, Any]) -> str:
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
