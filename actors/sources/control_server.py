"""The daemon's control socket: ``paneward status`` and ``paneward watch`` read through it.

A Unix socket next to the hook socket (same 0700 directory, socket 0600). A client
sends one JSON request line and reads JSON lines back:

* ``{"op": "status", "all": false}`` -> one line ``{"seq": N, "activities": [Activity...],
  "panes": [PaneView...], "statistics": {...}, "table": "..."}`` (every counter of every
  actor; ``panes``: which session each pane shows, :func:`actors.core.reducer.pane_views`; the
  ``paneward status`` table rendered with :func:`actors.core.status_table.format_table`, each
  pane's note below it; ``all`` also lists the sessions it hides). With ``"format"``:
  ``"table"`` answers the table's text lines, ``"activities"`` the JSON list of activities,
  ``"panes"`` the JSON list of pane views, ``"counters"`` the counters as indented JSON (what
  ``paneward status``, ``--json``, ``--json --panes`` and ``--counters`` print as they are).
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
from actors.core.clock import now_ms
from actors.core.reducer import pane_views
from actors.core.status_table import counter_line, format_table
from actors.sources.control_client import request_lines
from messages.activity import Overflow, Snapshot, Transition

__all__ = ["ControlServer", "ControlStatistics", "request_lines"]

MAX_REQUEST = 64 * 1024
#: What ``{"op": "status", "format": ...}`` may ask for (``json``, the default: everything).
_STATUS_FORMS = frozenset({"json", "table", "activities", "panes", "counters"})
#: Transitions a watcher may lag behind before it is overflowed (and disconnected): 1.6 s of a
#: daemon taking 10,000 events a second, for a watcher process the machine descheduled.
WATCH_BUFFER = 16384
#: Transitions written to a watcher in one write at most.
WATCH_BATCH = 512
#: Watch lines kept encoded for the other watchers (they follow close to each other).
_SHARED_LINES = 2 * WATCH_BATCH


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
    watch_writes: int = 0  # writes to watchers (each carries every transition pending then)
    watch_lines: int = 0  # transitions written to watchers


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
        self._lines: dict[int, bytes] = {}  # seq -> its watch line, shared by the watchers

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
                    form = request.get("format", "json")
                    if form not in _STATUS_FORMS:
                        raise ValueError(f"unknown status format {form!r}")
                    await self._status(stream, form, show_all=request.get("all") is True)
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

    async def _status(
        self, stream: anyio.abc.SocketStream, form: str, *, show_all: bool
    ) -> None:
        activities = self._host.snapshot()
        if form == "activities":
            await stream.send(msgspec.json.encode(activities) + b"\n")
            return
        views = pane_views(activities, self._pane_note)
        if form == "panes":
            await stream.send(msgspec.json.encode(views) + b"\n")
            return
        statistics = self._statistics()
        if form == "counters":
            await stream.send(json.dumps(statistics, indent=2, sort_keys=True).encode() + b"\n")
            return
        # Rendered here, where the reducer is loaded: `paneward status` then only prints it.
        table = format_table(activities, now_ms(), show_all=show_all)
        notes = "".join(f"\n{view.pane}: {view.note}" for view in views if view.note)
        table += notes + "\n" + counter_line(statistics)
        if form == "table":
            await stream.send(table.encode() + b"\n")
            return
        body = {
            "seq": self._host.seq,
            "activities": msgspec.to_builtins(activities),
            "panes": msgspec.to_builtins(views),
            "statistics": statistics,
            "table": table,
        }
        await stream.send(msgspec.json.encode(body) + b"\n")

    def _line(self, item: Transition | Overflow) -> bytes:
        """One watch line. Every watcher gets the same Transition object: it is encoded once
        for all of them (the cache keeps the lines of the last seqs encoded)."""
        if not isinstance(item, Transition):
            return messages.encode(item) + b"\n"
        lines = self._lines
        line = lines.get(item.seq)
        if line is None:
            line = lines[item.seq] = messages.encode(item) + b"\n"
            if len(lines) > _SHARED_LINES:
                del lines[next(iter(lines))]  # the oldest (insertion order is seq order)
        return line

    async def _watch(
        self, stream: anyio.abc.SocketStream, since: int | None, *, snapshot: bool = False
    ) -> None:
        subscription = self._host.subscribe("all", snapshot=True, buffer=WATCH_BUFFER)
        encode = messages.encode
        line = self._line
        with subscription:
            async for item in subscription:
                if isinstance(item, Snapshot):
                    if snapshot:
                        await stream.send(messages.encode(item) + b"\n")
                    if since is not None and since < item.seq:
                        # Replay what happened before we subscribed: journal rows up to
                        # the snapshot, then the live ones (all > snapshot.seq).
                        replay = await self._journal(since, item.seq)
                        for start in range(0, len(replay), WATCH_BATCH):
                            chunk = replay[start : start + WATCH_BATCH]
                            await stream.send(b"".join(encode(t) + b"\n" for t in chunk))
                    continue
                # Everything pending goes out in one write: one system call and one scheduler
                # round per wake-up, not per transition (10 watchers of a busy daemon would
                # otherwise cost a send each per transition, and fall behind).
                lines = [line(item)]
                while len(lines) < WATCH_BATCH:
                    try:
                        lines.append(line(subscription.receive_nowait()))
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                self._stats.watch_writes += 1
                self._stats.watch_lines += len(lines)
                await stream.send(b"".join(lines))


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
