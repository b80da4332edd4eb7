"""``paneward top``'s options and start: the daemon is asked first, and a missing Textual (the
``top`` extra) is said with how to install it. The view itself is :mod:`actors.cli.top`.
"""

from __future__ import annotations

import sys

from actors.cli.common import (
    EXIT_INVALID,
    EXIT_NO_DAEMON,
    add_hosts,
    add_socket,
    add_tmux_target,
    no_daemon,
    status_line,
)

# Typing only (typing and argparse would cost the command's start milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

__all__ = ["add_top", "run_top"]


def add_top(parser: argparse.ArgumentParser) -> None:
    add_socket(parser)
    add_tmux_target(parser)
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
    add_hosts(parser)


def run_top(args: argparse.Namespace) -> int:
    """The live view (:mod:`actors.cli.top`): 0 when the user quits, 1 without Textual (the
    ``top`` extra), 2 without a daemon. The daemon is asked for its fleet hosts first: with a
    fleet the view has a HOST column and their health."""
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
    import json

    try:
        hosts = json.loads(status_line(args, b"hosts"))
    except OSError as exc:
        no_daemon(args, "top", exc)
        return EXIT_NO_DAEMON
    return top.run(args, fleet=isinstance(hosts, list))
