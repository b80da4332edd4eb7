"""The blocking client of the daemon's control socket (:mod:`actors.sources.control_server`).

Used by the short-lived commands (``paneward status``, ``paneward watch``), so it imports the
standard library only: a command that starts, asks and exits pays for nothing it does not use.
"""

from __future__ import annotations

import _socket  # the C module: ``socket`` costs milliseconds of enum and selectors setup

# Typing only: importing typing would cost the short-lived commands a few milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from os import PathLike
    from typing import Any

__all__ = ["request_chunks", "request_lines"]

#: Bytes asked of the socket per read.
READ_SIZE = 1 << 16


def _encode(request: dict[str, Any] | bytes) -> bytes:
    if isinstance(request, bytes):
        return request  # one JSON line, encoded by the caller (a constant: no json import)
    import json

    return json.dumps(request).encode() + b"\n"


def _connect(
    path: str | PathLike[str], request: dict[str, Any] | bytes, timeout: float | None
) -> _socket.socket:
    data = _encode(request)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(str(path))
        view = memoryview(data)
        while view:
            view = view[sock.send(view) :]
        # A watch waits for transitions however long; anything else answers at once.
        sock.settimeout(None if b'"watch"' in data else timeout)
    except BaseException:
        sock.close()
        raise
    return sock


def request_chunks(
    socket_path: str | PathLike[str], request: dict[str, Any] | bytes, timeout: float | None = 5.0
) -> Iterator[bytes]:
    """Send ``request`` (a dict, or its JSON line as bytes); yield the response as runs of
    complete lines (each chunk ends with a newline), as many as one read brought: a client
    that follows a busy daemon writes and flushes once per read, not once per line. An
    unfinished last line is dropped.

    :raises OSError: no daemon is listening (``FileNotFoundError``/``ConnectionRefusedError``).
    """
    sock = _connect(socket_path, request, timeout)
    try:
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
    finally:
        sock.close()
        # A line the daemon did not finish (it died in the middle of a write) is no message.


def request_lines(
    socket_path: str | PathLike[str], request: dict[str, Any] | bytes, timeout: float | None = 5.0
) -> Iterator[bytes]:
    """Send ``request``; yield each response line (bytes, no newline).

    :raises OSError: no daemon is listening (``FileNotFoundError``/``ConnectionRefusedError``).
    """
    for chunk in request_chunks(socket_path, request, timeout):
        yield from chunk.splitlines()
