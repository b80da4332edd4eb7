"""What the subcommands that talk to a daemon or to tmux share: exit codes, the socket and
fleet-host options, the one "no daemon" message, one-line status requests, frames to the hook
socket, and the tmux runner.

Imported by ``status`` and ``watch`` on their start-up path: its top level imports only
:mod:`sys`; each function imports what it uses.
"""

from __future__ import annotations

import sys

# Typing only (typing, argparse and pathlib would cost every status/watch start milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = [
    "EXIT_FAILED",
    "EXIT_INVALID",
    "EXIT_NO_DAEMON",
    "EXIT_NO_TARGET",
    "EXIT_OK",
    "START_HINT",
    "TmuxFailed",
    "add_hosts",
    "add_socket",
    "add_tmux_target",
    "control_path",
    "hosts_fields",
    "inside_tmux",
    "kinds",
    "no_daemon",
    "send_frames",
    "status_line",
    "tmux",
]

EXIT_OK, EXIT_INVALID, EXIT_NO_DAEMON, EXIT_FAILED = 0, 1, 2, 3
#: ``wait``, ``ack``, ``forget``: the session or pane named does not exist (or a prefix names
#: several sessions).
EXIT_NO_TARGET = 4
#: How every "no daemon" message ends: what to run.
START_HINT = "start one with `paneward run` (or `paneward install-service`)"


def control_path(args: argparse.Namespace) -> str:
    """The daemon's control socket, next to the hook socket ``--socket`` names (else the
    environment's)."""
    from actors.core import paths

    return paths.control_path(getattr(args, "socket", None))


def no_daemon(args: argparse.Namespace, prog: str, exc: object) -> None:
    """The one "no daemon" message: where it was looked for, why, and how to start one."""
    print(f"paneward {prog}: no daemon at {control_path(args)} ({exc}); {START_HINT}",
          file=sys.stderr)


def add_socket(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--socket", help="the daemon's hook socket (default: from the environment)")


def add_hosts(parser: argparse.ArgumentParser) -> None:
    """``--host NAME`` / ``--local`` (one of them): which side of the fleet a command is about."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--host", metavar="NAME", help="only the sessions of this fleet host")
    which.add_argument("--local", action="store_true", help="only this machine's sessions")


def hosts_fields(args: argparse.Namespace) -> bytes:
    """A control request's ``host`` / ``local`` fields (``--host`` / ``--local``), as the
    bytes to put after its other fields; empty for every session."""
    host = getattr(args, "host", None)
    if getattr(args, "local", False):
        return b', "local": true'
    if host is not None:
        import json

        return b', "host": ' + json.dumps(host).encode()
    return b""


def kinds(text: str) -> tuple[str, ...]:
    """An argparse type: attention kinds (``needs_input,failed,turn_done``, ``all``, ``none``)."""
    from actors.core.views.attention import parse_kinds

    try:
        return parse_kinds(text)
    except ValueError as exc:
        import argparse

        raise argparse.ArgumentTypeError(str(exc)) from None


def status_line(args: argparse.Namespace, form: bytes, fields: bytes = b"") -> bytes:
    """One status request (in ``form``, with ``fields``: :func:`hosts_fields`) on a plain
    socket, its one answer line: ``next`` sits on a key, so it does not import the control
    server (and anyio with it) to read one line.

    :raises OSError: no daemon, or it closed without answering.
    """
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5.0)
        sock.connect(str(control_path(args)))
        sock.sendall(b'{"op": "status", "format": "%s"%s}\n' % (form, fields))
        with sock.makefile("rb") as reader:
            line = reader.readline()
    if not line.endswith(b"\n"):
        raise OSError("the daemon closed the connection without an answer")
    return line


def send_frames(args: argparse.Namespace, frames: Sequence[bytes]) -> None:
    """Inbound messages to the daemon's hook socket, in order, over one connection.

    :raises OSError: no daemon.
    """
    from actors.cli.hook_client import send_frame
    from actors.core import paths

    path = getattr(args, "socket", None) or paths.socket_path()
    send_frame(b"".join(frames), path, timeout=5.0)


# ---------------------------------------------------------------------------- tmux


def add_tmux_target(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-L", dest="tmux_socket_name", metavar="NAME", help="tmux socket name")
    group.add_argument("-S", dest="tmux_socket_path", metavar="PATH", help="tmux socket path")


class TmuxFailed(Exception):
    """A tmux command failed (or tmux could not be run): its words. Raised by :func:`tmux`."""


def tmux(args: argparse.Namespace, *commands: Sequence[str]) -> str:
    """Run tmux commands (``;``-separated, one process) on the server ``args`` name (``-L`` /
    ``-S``); their stdout.

    Every word reaches tmux as one word of its command, whatever it ends with
    (:func:`actors.core.tmux.protocol.commands_argv`). Never starts a server (``-N``; none of
    these commands would anyway).

    :raises TmuxFailed: tmux refused, could not be run, or its server is not there.
    """
    import os
    import subprocess

    from actors.core.tmux.protocol import TmuxTarget, commands_argv

    argv = TmuxTarget(args.tmux_socket_name, args.tmux_socket_path).argv()
    argv.append("-N")
    argv += commands_argv(commands)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ))
    except OSError as exc:
        raise TmuxFailed(f"cannot run tmux: {exc}") from None
    if done.returncode != 0:
        said = done.stderr.strip()
        if said.startswith(("error connecting to", "no server running on")):
            # tmux's words for a server that is not there (-N: none is ever started).
            where = TmuxTarget(args.tmux_socket_name, args.tmux_socket_path).describe()
            raise TmuxFailed(
                f"the tmux server does not exist ({where}: {said}); "
                "start tmux, or name another server with -L NAME / -S PATH"
            )
        raise TmuxFailed(said or f"tmux exited {done.returncode}")
    return done.stdout


def inside_tmux(args: argparse.Namespace) -> bool:
    """Whether this command runs inside the tmux server it talks to (``$TMUX``, no ``-L`` /
    ``-S``)."""
    import os

    return bool(os.environ.get("TMUX")) and not (args.tmux_socket_name or args.tmux_socket_path)
