"""The daemon's control socket: ``paneward status`` and ``paneward watch`` read through it.

A Unix socket next to the hook socket (same 0700 directory, socket 0600). A client
sends one JSON request line and reads JSON lines back:

* ``{"op": "status"}`` -> one line ``{"seq": N, "activities": [Activity...],
  "panes": [PaneView...], "statistics": {...}}`` (every counter of every actor; ``panes``:
  which session each pane shows, :func:`actors.core.reducer.pane_views`).
* ``{"op": "watch", "since": SEQ | null}`` -> :class:`~messages.Transition` lines
  (``messages.encode``), first from the journal (``seq > SEQ``) when ``since`` is
  given, then live, with no gap and no duplicate; a client that cannot keep up
  gets one :class:`~messages.Overflow` line and is disconnected. With
  ``"snapshot": true`` the first line is the subscription's :class:`~messages.Snapshot`
  (every session's activity as of its ``seq``), then the live transitions after it: the
  stream ``paneward wait`` reads, so an edge just before it started is in the snapshot and
  one just after is a transition.

Sent by the CLI (:mod:`actors.cli.main`); served by :class:`ControlServer`, an actor the
daemon starts under the supervisor.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.abc
import msgspec

import messages
from actors.core.reducer import pane_views
from messages.activity import Snapshot, Transition

__all__ = ["ControlServer", "ControlStatistics", "request_lines"]

MAX_REQUEST = 64 * 1024


class _Host(Protocol):
    def subscribe(self, mode: Any = ..., snapshot: bool = ..., *, buffer: int = ...) -> Any: ...

    def snapshot(self) -> tuple[messages.Activity, ...]: ...

    @property
    def seq(self) -> int: ...


class ControlStatistics(msgspec.Struct, kw_only=True):
    """Counters of the control socket: one record it keeps, copied by ``statistics()``."""

    requests: int = 0
    status: int = 0
    watches: int = 0
    bad_requests: int = 0
    refused_peers: int = 0  # connections from another uid (only if the 0700 dir was opened)


class ControlServer:
    """Actor serving status and watch requests on ``socket_path``.

    :param host: the supervisor (snapshot, seq, subscribe).
    :param statistics: returns every actor's counters as plain data.
    :param journal: ``await journal(since, until)`` returns the stored transitions
        with ``since < seq <= until`` (the store, flushed first).
    :param pane_note: why a pane showing an activity shows less than it could (the harness
        catalog's words, passed in by the daemon's wiring: this server knows no harness).
    """

    def __init__(
        self,
        socket_path: Path,
        host: _Host,
        statistics: Callable[[], dict[str, Any]],
        journal: Callable[[int, int], Awaitable[list[Transition]]],
        pane_note: Callable[[messages.Activity], str | None] | None = None,
    ) -> None:
        self._pane_note = pane_note
        self._path = socket_path
        self._host = host
        self._statistics = statistics
        self._journal = journal
        self._listening = anyio.Event()
        self._stats = ControlStatistics()

    def statistics(self) -> ControlStatistics:
        """A point-in-time copy of the counters."""
        return msgspec.structs.replace(self._stats)

    async def wait_listening(self) -> None:
        await self._listening.wait()

    async def run(self, sink: object) -> None:
        """Listen until cancelled (``sink`` is unused: the control socket injects nothing)."""
        del sink
        self._path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()
        listener = await anyio.create_unix_listener(self._path)
        os.chmod(self._path, 0o600)
        try:
            async with listener:
                self._listening.set()
                await listener.serve(self._serve)
        finally:
            with contextlib.suppress(FileNotFoundError):
                self._path.unlink()

    async def _serve(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            self._stats.requests += 1
            # Status and watch reveal every session: only our own uid may ask (SO_PEERCRED),
            # even if someone loosened the directory or socket modes.
            if _peer_uid(stream) != os.getuid():
                self._stats.refused_peers += 1
                return
            try:
                request = await _read_request(stream)
            except (ValueError, anyio.EndOfStream, anyio.BrokenResourceError) as exc:
                self._stats.bad_requests += 1
                await _send_json(stream, {"error": f"bad request: {exc}"})
                return
            op = request.get("op")
            try:
                if op == "status":
                    self._stats.status += 1
                    await self._status(stream)
                elif op == "watch":
                    self._stats.watches += 1
                    since = request.get("since")
                    if since is not None and (not isinstance(since, int) or since < 0):
                        raise ValueError("since must be a non-negative integer or null")
                    snapshot = request.get("snapshot", False)
                    if not isinstance(snapshot, bool):
                        raise ValueError("snapshot must be true or false")
                    await self._watch(stream, since, snapshot=snapshot)
                else:
                    self._stats.bad_requests += 1
                    await _send_json(stream, {"error": f"unknown op {op!r}"})
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
                return  # the client went away
            except ValueError as exc:
                self._stats.bad_requests += 1
                await _send_json(stream, {"error": str(exc)})

    async def _status(self, stream: anyio.abc.SocketStream) -> None:
        snapshot = self._host.snapshot()
        body = {
            "seq": self._host.seq,
            "activities": msgspec.to_builtins(snapshot),
            "panes": msgspec.to_builtins(pane_views(snapshot, self._pane_note)),
            "statistics": self._statistics(),
        }
        await stream.send(msgspec.json.encode(body) + b"\n")

    async def _watch(
        self, stream: anyio.abc.SocketStream, since: int | None, *, snapshot: bool = False
    ) -> None:
        subscription = self._host.subscribe("all", snapshot=True, buffer=4096)
        with subscription:
            async for item in subscription:
                if isinstance(item, Snapshot):
                    if snapshot:
                        await stream.send(messages.encode(item) + b"\n")
                    if since is not None and since < item.seq:
                        # Replay what happened before we subscribed: journal rows up to
                        # the snapshot, then the live ones (all > snapshot.seq).
                        for transition in await self._journal(since, item.seq):
                            await stream.send(messages.encode(transition) + b"\n")
                    continue
                await stream.send(messages.encode(item) + b"\n")


def _peer_uid(stream: anyio.abc.SocketStream) -> int:
    import socket
    import struct

    sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", raw)[1]
    return uid


async def _read_request(stream: anyio.abc.SocketStream) -> dict[str, Any]:
    buffer = b""
    while b"\n" not in buffer:
        chunk = await stream.receive(4096)
        buffer += chunk
        if len(buffer) > MAX_REQUEST:
            raise ValueError("request line too long")
    line = buffer.split(b"\n", 1)[0]
    value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError("request must be a JSON object")
    return value


async def _send_json(stream: anyio.abc.SocketStream, body: dict[str, Any]) -> None:
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await stream.send(json.dumps(body).encode() + b"\n")


def request_lines(socket_path: Path, request: dict[str, Any], timeout: float | None = 5.0):  # type: ignore[no-untyped-def]
    """Blocking client: send ``request``, yield each response line (bytes, no newline).

    :raises OSError: no daemon is listening (``FileNotFoundError``/``ConnectionRefusedError``).
    """
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(socket_path))
        sock.sendall(json.dumps(request).encode() + b"\n")
        sock.settimeout(None if request.get("op") == "watch" else timeout)
        with sock.makefile("rb") as reader:
            for line in reader:
                yield line.rstrip(b"\n")
