"""The daemon's control socket: ``paneward status`` and ``paneward watch`` read through it.

A Unix socket next to the hook socket (same 0700 directory, socket 0600). A client
sends one JSON request line and reads JSON lines back:

* ``{"op": "status"}`` -> one line ``{"seq": N, "activities": [Activity...],
  "statistics": {...}}`` (every counter of every actor).
* ``{"op": "watch", "since": SEQ | null}`` -> :class:`~messages.Transition` lines
  (``messages.encode``), first from the journal (``seq > SEQ``) when ``since`` is
  given -- with a :class:`~messages.Gap` line where the journal misses transitions (the
  store dropped them, or retention pruned them) -- then live, with no gap and no duplicate; a
  client that cannot keep up gets one :class:`~messages.Overflow` line and is disconnected.

Requests are parsed by the total, pure :mod:`actors.core.control_requests`: anything malformed
(deep nesting included) is answered ``{"error": ...}``, counted by reason, and changes nothing.
Connections go through the same admission as the hook socket (:mod:`actors.sources.admission`):
at most ``cap`` at once, a request line within 2 s; the socket is created, and removed, only
through its verified directory (:mod:`actors.runtime.files`), and only a stale *socket* is ever
replaced.

Sent by the CLI (:mod:`actors.cli.commands`); served by :class:`ControlServer`, an actor the
daemon starts under the supervisor.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.abc
import msgspec

import messages
from actors.core.control_requests import (
    BadRequest,
    StatusRequest,
    parse_request,
    take_request,
)
from actors.core.limits import HEAD_DEADLINE_S, connection_caps
from actors.runtime.files import (
    UnsafePath,
    bind_socket,
    open_private_dir,
    prepare_socket,
    remove_socket,
)
from actors.sources.admission import Admission, AdmissionStatistics, Connection
from messages.activity import Gap, Snapshot, Transition
from messages.errors import PanewardError

__all__ = ["ControlServer", "ControlServerError", "ControlStatistics", "request_lines"]


class ControlServerError(PanewardError):
    """The control socket cannot be served: unsafe directory, a file in its place, or another
    daemon answering on it."""


class _Host(Protocol):
    def subscribe(self, mode: Any = ..., snapshot: bool = ..., *, buffer: int = ...) -> Any: ...

    def snapshot(self) -> tuple[messages.Activity, ...]: ...

    @property
    def seq(self) -> int: ...


class ControlStatistics(msgspec.Struct, kw_only=True):
    """Counters of the control socket: one record it keeps, copied by ``statistics()``.

    ``bad_requests`` refused requests, by reason in ``rejected``
    (:data:`~actors.core.control_requests.BadRequestReason`); ``admission`` the socket's caps,
    timeouts and accept errors.
    """

    requests: int = 0
    status: int = 0
    watches: int = 0
    bad_requests: int = 0
    rejected: dict[str, int] = msgspec.field(default_factory=dict)
    refused_peers: int = 0  # connections from another uid (only if the 0700 dir was opened)
    admission: AdmissionStatistics | None = None


Journal = Callable[[int, int], Awaitable[Sequence[Transition | Gap]]]


class ControlServer:
    """Actor serving status and watch requests on ``socket_path``.

    :param host: the supervisor (snapshot, seq, subscribe).
    :param statistics: returns every actor's counters as plain data.
    :param journal: ``await journal(since, until)`` returns the stored transitions
        with ``since < seq <= until`` and the gaps among them, in seq order (the store,
        flushed first).
    :param cap: the most connections open at once (default: from the file-descriptor limit).
    """

    def __init__(
        self,
        socket_path: Path,
        host: _Host,
        statistics: Callable[[], dict[str, Any]],
        journal: Journal,
        *,
        cap: int | None = None,
        head_deadline: float = HEAD_DEADLINE_S,
    ) -> None:
        self._path = socket_path
        self._host = host
        self._statistics = statistics
        self._journal = journal
        self._cap = cap
        self._head_deadline = head_deadline
        self._listening = anyio.Event()
        self._stats = ControlStatistics()
        self._admission: Admission | None = None

    def statistics(self) -> ControlStatistics:
        """A point-in-time copy of the counters."""
        return msgspec.structs.replace(
            self._stats,
            rejected=dict(self._stats.rejected),
            admission=None if self._admission is None else self._admission.statistics(),
        )

    async def wait_listening(self) -> None:
        await self._listening.wait()

    async def run(self, sink: object) -> None:
        """Listen until cancelled (``sink`` is unused: the control socket injects nothing).

        :raises ControlServerError: see the class.
        """
        del sink
        cap = self._cap or connection_caps(resource.getrlimit(resource.RLIMIT_NOFILE)[0]).control
        shown = os.fspath(self._path)
        try:
            dir_fd = await anyio.to_thread.run_sync(open_private_dir, os.fspath(self._path.parent))
        except UnsafePath as exc:
            raise ControlServerError(str(exc)) from None
        sock = None
        inode = 0
        try:
            try:
                await anyio.to_thread.run_sync(prepare_socket, dir_fd, self._path.name, shown)
                sock, inode = bind_socket(dir_fd, self._path.name)
            except UnsafePath as exc:
                raise ControlServerError(str(exc)) from None
            self._admission = Admission(cap, head_deadline=self._head_deadline)
            self._listening.set()
            await self._admission.serve(sock, self._serve)
        finally:
            if sock is not None:
                sock.close()
                remove_socket(dir_fd, self._path.name, inode)
            os.close(dir_fd)

    def _bad(self, problem: BadRequest) -> dict[str, Any]:
        self._stats.bad_requests += 1
        rejected = self._stats.rejected
        rejected[problem.reason] = rejected.get(problem.reason, 0) + 1
        return {"error": f"bad request: {problem.detail}"}

    async def _serve(self, connection: Connection) -> None:
        self._stats.requests += 1
        # Status and watch reveal every session: only our own uid may ask (SO_PEERCRED),
        # even if someone loosened the directory or socket modes.
        try:
            _, uid = connection.peer_credentials()
        except OSError:
            uid = -1
        if uid != os.getuid():
            self._stats.refused_peers += 1
            return
        buffer = b""
        line: bytes | BadRequest | None = None
        while line is None:
            data = await connection.receive(4096, connection.deadline())
            if data is None:
                line = BadRequest("truncated", "no request line within the deadline")
                break
            buffer += data
            line = take_request(buffer, eof=not data)
        request = parse_request(line) if isinstance(line, bytes) else line
        if isinstance(request, BadRequest):
            with contextlib.suppress(OSError):
                await connection.send(json.dumps(self._bad(request)).encode() + b"\n")
            return
        connection.prove()
        with contextlib.suppress(OSError):  # the client went away
            if isinstance(request, StatusRequest):
                self._stats.status += 1
                await self._status(connection)
            else:
                self._stats.watches += 1
                await self._watch(connection, request.since)

    async def _status(self, connection: Connection) -> None:
        body = {
            "seq": self._host.seq,
            "activities": msgspec.to_builtins(self._host.snapshot()),
            "statistics": self._statistics(),
        }
        await connection.send(msgspec.json.encode(body) + b"\n")

    async def _watch(self, connection: Connection, since: int | None) -> None:
        subscription = self._host.subscribe("all", snapshot=True, buffer=4096)
        with subscription:
            async for item in subscription:
                if isinstance(item, Snapshot):
                    if since is not None and since < item.seq:
                        # Replay what happened before we subscribed: journal rows (and the
                        # gaps among them) up to the snapshot, then the live ones.
                        for stored in await self._journal(since, item.seq):
                            await connection.send(messages.encode(stored) + b"\n")
                    continue
                await connection.send(messages.encode(item) + b"\n")


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
