"""The blocking client of the daemon's control socket (:mod:`actors.sources.control_server`).

Used by the short-lived commands (``paneward status``, ``paneward watch``), so it imports the
standard library only: a command that starts, asks and exits pays for nothing it does not use.
"""

from __future__ import annotations

import json
import socket

# Typing only: importing typing would cost the short-lived commands a few milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from os import PathLike
    from typing import Any

__all__ = ["request_chunks", "request_lines"]

#: Bytes asked of the socket per read.
READ_SIZE = 1 << 16


def _connect(
    path: str | PathLike[str], request: dict[str, Any], timeout: float | None
) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(json.dumps(request).encode() + b"\n")
        sock.settimeout(None if request.get("op") == "watch" else timeout)
    except BaseException:
        sock.close()
        raise
    return sock


def request_chunks(
    socket_path: str | PathLike[str], request: dict[str, Any], timeout: float | None = 5.0
) -> Iterator[bytes]:
    """Send ``request``; yield the response as runs of complete lines (each chunk ends with a
    newline), as many as one read brought: a client that follows a busy daemon writes and
    flushes once per read, not once per line. An unfinished last line is dropped.

    :raises OSError: no daemon is listening (``FileNotFoundError``/``ConnectionRefusedError``).
    """
    with _connect(socket_path, request, timeout) as sock:
        partial = b""
        while True:
            data = sock.recv(READ_SIZE)
            if not data:
                break
            data = partial + data
            end = data.rfind(b"\n") + 1
            partial = data[end:]
            if end:
                yield data[:end]
        # A line the daemon did not finish (it died in the middle of a write) is no message.


def request_lines(
    socket_path: str | PathLike[str], request: dict[str, Any], timeout: float | None = 5.0
) -> Iterator[bytes]:
    """Send ``request``; yield each response line (bytes, no newline).

    :raises OSError: no daemon is listening (``FileNotFoundError``/``ConnectionRefusedError``).
    """
    for chunk in request_chunks(socket_path, request, timeout):
        yield from chunk.splitlines()
