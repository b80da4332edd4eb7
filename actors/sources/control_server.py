"""The daemon's control socket: ``paneward status`` and ``paneward watch`` read through it.

A Unix socket next to the hook socket (same 0700 directory, socket 0600). A client
sends one JSON request line and reads JSON lines back:

* ``{"op": "status", "all": false}`` -> one line ``{"seq": N, "activities": [Activity...],
  "panes": [PaneView...], "statistics": {...}, "table": "..."}`` (every counter of every
  actor; ``panes``: which session each pane shows, :func:`actors.core.session.reducer.pane_views`;
  the ``paneward status`` table rendered with :func:`actors.core.views.status_table.format_table`,
  each pane's note below it; ``all`` also lists the sessions it hides). With ``"format"``:
  ``"table"`` answers the table's text lines, ``"activities"`` the JSON list of activities,
  ``"panes"`` the JSON list of pane views, ``"counters"`` the counters as indented JSON (what
  ``paneward status``, ``--json``, ``--json --panes`` and ``--counters`` print as they are),
  ``"queue"`` the attention queue's items that have a pane, in order, as
  ``[{"pane", "key", "kind", "label"}]`` (what ``paneward next`` jumps to; a fleet host's
  item also has ``host`` and ``attach``, the local command that shows its pane), ``"hosts"``
  the fleet hosts' health as ``status --json``'s ``hosts`` has it, ``null`` without a fleet
  (what ``paneward top`` asks to know whether it has a HOST column, and shows).
* ``{"op": "watch", "since": SEQ | null}`` -> :class:`~messages.Transition` lines
  (``messages.encode``), first from the journal (``seq > SEQ``) when ``since`` is
  given -- with a :class:`~messages.Gap` line where the journal misses transitions (the
  store dropped them, or retention pruned them) -- then live, with no gap and no duplicate; a
  client that cannot keep up gets one :class:`~messages.Overflow` line and is disconnected.
  With ``"snapshot": true`` the first line is the subscription's :class:`~messages.Snapshot`
  (every session's activity as of its ``seq``), then the live transitions after it: the
  stream ``paneward wait`` reads, so an edge just before it started is in the snapshot and
  one just after is a transition. With ``"since_ms": MS`` in place of ``since``, the replay
  starts at the journal's first transition whose evidence time is at or after ``MS`` (epoch
  milliseconds): ``paneward top`` reads its last hour this way, snapshot first.
  With ``"fleet": true`` (``paneward watch --fleet``, what a fleet follower runs over ssh)
  the lines are a :class:`~messages.Daemon` (this daemon's identity and the snapshot's seq),
  the journal after ``since`` up to that seq, the :class:`~messages.Snapshot` at that seq,
  then live: a follower applies the replay in order and then settles on the snapshot.

Requests are parsed by the total, pure :mod:`actors.core.ingress.control_requests`: anything
malformed (deep nesting included) is answered ``{"error": ...}``, counted by reason, and changes
nothing. Connections go through the same admission as the hook socket
(:mod:`actors.sources.admission`): at most ``cap`` at once, a request line within 2 s; the socket is
created, and removed, only through its verified directory (:mod:`actors.sources.files`), and only a
stale *socket* is ever replaced. A watch request moves its connection out of the ``cap`` into the
subscribers', much higher, ``watch_cap`` (:func:`actors.core.ingress.limits.watch_cap`): however
many ``paneward wait`` and ``watch`` clients are held open, ``status`` (``next``, ``pick``) finds a
slot. Beyond ``watch_cap`` a watch is answered ``{"error": ...}`` and counted (``watches_refused``).
A subscriber whose peer hangs up (closed, killed) is closed at once
(:class:`~actors.sources.admission.HangupWatch`, counted in ``hangups``), not at the next
transition written to it.

Sent by the CLI (:mod:`actors.cli.control_client` and the commands that read one line,
:func:`actors.cli.common.status_line`); served by :class:`ControlServer`, an actor the
daemon starts under the supervisor.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.abc
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream

import messages
from actors.core.clock import now_ms
from actors.core.ingress.control_requests import (
    BadRequest,
    StatusRequest,
    parse_request,
    take_request,
)
from actors.core.ingress.limits import HEAD_DEADLINE_S, connection_caps, watch_cap
from actors.core.session.reducer import pane_views
from actors.core.text import printable
from actors.core.views.attention import attention_label, attention_queue
from actors.core.views.status_table import actor_line, counter_line, format_table, host_line
from actors.sources.admission import Admission, AdmissionStatistics, Connection, HangupWatch
from actors.sources.files import (
    UnsafePath,
    bind_socket,
    open_private_dir,
    prepare_socket,
    remove_socket,
)
from actors.sources.watch_fanout import WatchFanout, WatchFanoutStatistics, WatchHost
from messages.activity import Gap, Snapshot, Transition
from messages.errors import PanewardError

__all__ = ["ControlServer", "ControlServerError", "ControlServerStatistics"]

#: Transitions a watcher may lag behind before it is overflowed (and disconnected): 1.6 s of a
#: daemon taking 10,000 events a second, for a watcher process the machine descheduled.
WATCH_BUFFER = 16384
#: Transitions taken from the hub per run (one write to each watcher) at most.
WATCH_BATCH = 512
#: A watcher's socket send buffer (bytes; the kernel caps it at ``net.core.wmem_max``). A full
#: run is ~900 bytes a transition: with the default ~208 KiB each write of a busy daemon took
#: several sends, each waiting for the watcher process to read.
WATCH_SNDBUF = 1 << 20


class ControlServerError(PanewardError):
    """The control socket cannot be served: unsafe directory, a file in its place, or another
    daemon answering on it."""


class _Host(WatchHost, Protocol):
    def snapshot(self) -> tuple[messages.Activity, ...]: ...


class ControlServerStatistics(msgspec.Struct, kw_only=True):
    """Counters of the control socket: one record it keeps, copied by ``statistics()``.

    ``bad_requests`` refused requests, by reason in ``rejected``
    (:data:`~actors.core.ingress.control_requests.BadRequestReason`); ``admission`` the socket's
    caps, timeouts and accept errors (subscribers are not in its ``open``: ``subscribers`` holds
    them, at most ``watch_cap``); ``watches_refused`` watch requests beyond ``watch_cap``;
    ``hangups`` subscribers closed because their peer hung up.
    """

    requests: int = 0
    status: int = 0
    watches: int = 0
    subscribers: int = 0
    watch_cap: int = 0
    watches_refused: int = 0
    hangups: int = 0
    bad_requests: int = 0
    rejected: dict[str, int] = msgspec.field(default_factory=dict)
    refused_peers: int = 0  # connections from another uid (only if the 0700 dir was opened)
    watch: WatchFanoutStatistics | None = None  # the watchers' shared subscription
    admission: AdmissionStatistics | None = None


Journal = Callable[[int, int], Awaitable[Sequence[Transition | Gap]]]


class _Local:
    """``--local``: this machine's sessions only."""

    def __repr__(self) -> str:
        return "LOCAL"


LOCAL = _Local()
#: Which sessions a request is about: all (``None``), this machine's (:data:`LOCAL`), or one
#: fleet host's (its name).
Only = str | _Local | None


def _only(host: str | None, local: bool) -> Only:
    return LOCAL if local else host


def _lines_of(data: bytes, host: str) -> bytes:
    """The lines of ``data`` (a batch of remote transitions) that are ``host``'s: its key's
    ``"host":NAME`` (raw quotes never occur inside a JSON string, so no text field can fake
    it)."""
    mark = b'"host":' + msgspec.json.encode(host)
    return b"".join(line + b"\n" for line in data.splitlines() if mark in line)


class _Locked:
    """A connection whose sends hold ``lock``: two writers, each write whole."""

    def __init__(self, connection: Connection, lock: anyio.Lock) -> None:
        self.sock = connection.sock
        self._connection = connection
        self._lock = lock

    async def send(self, data: bytes) -> None:
        async with self._lock:
            await self._connection.send(data)


class RemoteView(Protocol):
    """The fleet's part of the merged view (:class:`actors.sources.fleet.FleetView`)."""

    @property
    def configured(self) -> bool:
        """Whether any host is followed: ``status`` shows the fleet (a HOST column, the
        hosts) only then; the hosts file may give it hosts at any time."""
        ...

    def activities(self, host: str | None = None) -> list[messages.Activity]: ...

    def hosts(self) -> list[dict[str, Any]]: ...

    def subscribe(self) -> MemoryObjectReceiveStream[bytes]: ...

    def attach(self, activity: messages.Activity) -> list[str] | None: ...

    def file_line(self) -> str | None:
        """Why the hosts file cannot be used, while it cannot (a line for ``status``)."""
        ...
Reserved = Callable[[int], Awaitable[None]]
SeqBefore = Callable[[int], Awaitable[int]]


async def _always_reserved(seq: int) -> None:
    """Without a store nothing outlives the process: every seq may be shown."""


class ControlServer:
    """Actor serving status and watch requests on ``socket_path``.

    :param host: the supervisor (snapshot, seq, subscribe).
    :param statistics: returns every actor's counters as plain data.
    :param journal: ``await journal(since, until)`` returns the stored transitions
        with ``since < seq <= until`` and the gaps among them, in seq order (the store,
        flushed first).
    :param pane_note: why a pane showing an activity shows less than it could (the harness
        catalog's words, passed in by the daemon's wiring: this server knows no harness).
    :param reserved: ``await reserved(seq)`` returns once ``seq`` may be shown -- no restart
        will number another transition with it (the store's
        :meth:`~actors.sinks.store.Store.wait_reserved`); awaited before every live write,
        snapshot, overflow marker and status that names a seq.
    :param seq_before: ``await seq_before(ms)`` returns the seq after which the journal's
        transitions at or after ``ms`` start (the store, flushed first): a watch's
        ``since_ms``. Without it, ``since_ms`` replays nothing.
    :param cap: the most connections open at once, subscribers aside (default: from the
        file-descriptor limit).
    :param watch_cap: the most subscribers at once (default: from the file-descriptor limit).
    :param remote: the fleet's sessions and health, merged into ``status`` and ``watch``
        (docs/fleet.md); ``None`` without a fleet.
    :param identity: ``(id, run, version)`` of this daemon for the ``Daemon`` line of a fleet
        watch (:class:`messages.Daemon`); without one a fleet watch is refused.
    """

    def __init__(
        self,
        socket_path: Path,
        host: _Host,
        statistics: Callable[[], dict[str, Any]],
        journal: Journal,
        pane_note: Callable[[messages.Activity], str | None] | None = None,
        reserved: Reserved = _always_reserved,
        *,
        seq_before: SeqBefore | None = None,
        cap: int | None = None,
        watch_cap: int | None = None,
        head_deadline: float = HEAD_DEADLINE_S,
        watch_buffer: int = WATCH_BUFFER,
        identity: tuple[str, str, str] | None = None,
        remote: RemoteView | None = None,
    ) -> None:
        self._identity = identity
        self._remote = remote
        self._pane_note = pane_note
        self._path = socket_path
        self._host = host
        self._statistics = statistics
        self._journal = journal
        self._reserved = reserved
        self._seq_before = seq_before
        self._cap = cap
        self._watch_cap = watch_cap
        self._hangups = HangupWatch()
        self._head_deadline = head_deadline
        self._listening = anyio.Event()
        self._stats = ControlServerStatistics()
        self._fanout = WatchFanout(host, watch_buffer, WATCH_BATCH)
        self._admission: Admission | None = None

    def statistics(self) -> ControlServerStatistics:
        """A point-in-time copy of the counters."""
        return msgspec.structs.replace(
            self._stats,
            hangups=self._hangups.hangups,
            rejected=dict(self._stats.rejected),
            watch=self._fanout.statistics(),
            admission=None if self._admission is None else self._admission.statistics(),
        )

    async def wait_listening(self) -> None:
        await self._listening.wait()

    async def run(self, sink: object) -> None:
        """Listen until cancelled (``sink`` is unused: the control socket injects nothing).

        :raises ControlServerError: see the class.
        """
        del sink
        fd_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        cap = self._cap or connection_caps(fd_limit).control
        self._stats.watch_cap = self._watch_cap or watch_cap(fd_limit)
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
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._fanout.run)
                tg.start_soon(self._hangups.run)
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
                await self._status(connection, request.format, show_all=request.all,
                                   only=_only(request.host, request.local))
            else:
                since = request.since
                if since is None and request.since_ms is not None and self._seq_before:
                    since = await self._seq_before(request.since_ms)
                await self._subscribe(
                    connection, since, snapshot=request.snapshot, fleet=request.fleet,
                    only=_only(request.host, request.local),
                )

    def _activities(self, only: Only) -> list[messages.Activity]:
        """The local activities, then the fleet's (``only``: :func:`_only`)."""
        local = list(self._host.snapshot()) if only in (None, LOCAL) else []
        if self._remote is None or isinstance(only, _Local):
            return local
        return local + self._remote.activities(only)

    async def _status(
        self, connection: Connection, form: str, *, show_all: bool, only: Only = None
    ) -> None:
        if form == "hosts":
            # null while no host is followed: the views show no HOST column then
            remote = self._remote
            hosts_only = remote.hosts() if remote is not None and remote.configured else None
            await connection.send(msgspec.json.encode(hosts_only) + b"\n")
            return
        activities = self._activities(only)
        local = [a for a in activities if a.key.host is None]
        if form == "activities":
            await connection.send(msgspec.json.encode(activities) + b"\n")
            return
        if form == "queue":
            # What `paneward next` needs, decided here: it then imports neither msgspec nor
            # the reducer to jump.
            now = now_ms()
            items: list[dict[str, Any]] = []
            for a in attention_queue(activities):
                if a.pane is None or a.attention is None:
                    continue
                item: dict[str, Any] = {"pane": a.pane, "key": str(a.key),
                                        "kind": a.attention.kind,
                                        "label": attention_label(a, now)}
                if a.key.host is not None:
                    # a remote pane is on its host: reached through ssh, never as a local pane
                    attach = None if self._remote is None else self._remote.attach(a)
                    if attach is None:
                        continue
                    item.update(host=a.key.host, attach=attach)
                items.append(item)
            await connection.send(json.dumps(items).encode() + b"\n")
            return
        views = pane_views(local, self._pane_note)
        if form == "panes":
            await connection.send(msgspec.json.encode(views) + b"\n")
            return
        statistics = self._statistics()
        if form == "counters":
            text = json.dumps(statistics, indent=2, sort_keys=True)
            await connection.send(text.encode() + b"\n")
            return
        # Rendered here, where the reducer is loaded: `paneward status` then only prints it.
        now = now_ms()
        fleet = self._remote is not None and self._remote.configured
        table = format_table(activities, now, show_all=show_all, fleet=fleet)
        notes = "".join(f"\n{printable(view.pane)}: {printable(view.note)}"
                        for view in views if view.note)
        hosts = self._remote.hosts() if self._remote is not None and fleet else []
        if hosts:
            notes += "\n" + host_line(hosts, now)
        problem = None if self._remote is None else self._remote.file_line()
        if problem is not None:
            notes += "\n" + printable(problem)
        table += notes + "\n" + counter_line(statistics) + "\n" + actor_line(statistics)
        if form == "table":
            await connection.send(table.encode() + b"\n")
            return
        seq = self._host.seq
        await self._reserved(seq)
        body = {
            "seq": seq,
            "activities": msgspec.to_builtins(activities),
            "panes": msgspec.to_builtins(views),
            "statistics": statistics,
            "table": table,
        }
        if fleet:
            body["hosts"] = hosts
        await connection.send(msgspec.json.encode(body) + b"\n")

    async def _subscribe(
        self, connection: Connection, since: int | None, *, snapshot: bool, fleet: bool = False,
        only: Only = None,
    ) -> None:
        """A watch request: the connection leaves the request slots for the subscribers' (or
        is refused, beyond ``watch_cap``), and is closed as soon as its peer hangs up."""
        stats = self._stats
        if stats.subscribers >= stats.watch_cap:
            stats.watches_refused += 1
            error = f"too many watchers: {stats.subscribers} (the cap); try again later"
            await connection.send(json.dumps({"error": error}).encode() + b"\n")
            return
        if fleet and self._identity is None:
            error = "this daemon has no identity to follow (it runs without a store)"
            await connection.send(json.dumps({"error": error}).encode() + b"\n")
            return
        assert self._admission is not None  # set before the first connection is served
        self._admission.release(connection)
        stats.subscribers += 1
        self._hangups.add(connection, connection.scope.cancel)
        try:
            stats.watches += 1
            if fleet or self._remote is None or only is LOCAL:
                # a fleet stream carries this machine's sessions only (so does --local's
                # snapshot)
                await self._watch(connection, since, snapshot=snapshot, fleet=fleet,
                                  only=LOCAL if only is LOCAL else None)
            else:
                await self._watch_merged(connection, since, snapshot=snapshot, only=only)
        finally:
            self._hangups.remove(connection)
            stats.subscribers -= 1

    async def _watch_merged(
        self, connection: Connection, since: int | None, *, snapshot: bool, only: Only
    ) -> None:
        """A watch with the fleet's lines: the remote transitions (their ``seq`` their host's,
        their key's ``host`` set) are written between the local ones, each write whole."""
        assert self._remote is not None
        remote = self._remote.subscribe()
        lock = anyio.Lock()
        guarded = _Locked(connection, lock)

        async def forward() -> None:
            async with remote:
                async for data in remote:
                    if isinstance(only, str):
                        data = _lines_of(data, only)
                        if not data:
                            continue
                    async with lock:
                        await connection.send(data)
            # cut off behind (or the fleet closed): end the watch, the client resubscribes
            tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(forward)
            await self._watch(guarded, since, snapshot=snapshot, only=only)  # type: ignore[arg-type]  # the two attributes _watch uses
            tg.cancel_scope.cancel()

    async def _watch(
        self, connection: Connection, since: int | None, *, snapshot: bool = False,
        fleet: bool = False, only: Only = None,
    ) -> None:
        watcher = self._fanout.join()
        with contextlib.suppress(OSError):  # a smaller buffer only costs more sends
            connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, WATCH_SNDBUF)
        # Taken in the step that joined (as the plain snapshot below): exactly the state at
        # watcher.seq, the live lines are those after it.
        settled = Snapshot(seq=watcher.seq, activities=self._host.snapshot()) if fleet else None
        # --host NAME: none of this machine's lines
        local_lines = only is None or only is LOCAL
        try:
            if fleet:
                assert self._identity is not None  # refused in _subscribe otherwise
                ident, run, version = self._identity
                hello = messages.Daemon(id=ident, run=run, seq=watcher.seq, version=version)
                await self._reserved(watcher.seq)
                await connection.send(messages.encode(hello) + b"\n")
                snapshot = False  # after the replay, below
            if snapshot:
                # Taken in the step that joined: the live lines are exactly those after it
                # (the fleet's sessions in it too, as the merged view shows them now).
                first = Snapshot(seq=watcher.seq, activities=tuple(self._activities(only)))
                await self._reserved(first.seq)
                await connection.send(messages.encode(first) + b"\n")
            if since is not None and since < watcher.seq and local_lines:
                # Replay what happened before we joined: journal rows (and the gaps among
                # them) up to the join, then the live ones.
                replay = await self._journal(since, watcher.seq)
                for start in range(0, len(replay), WATCH_BATCH):
                    chunk = replay[start : start + WATCH_BATCH]
                    await connection.send(messages.encode_lines(chunk))
            if settled is not None:
                await connection.send(messages.encode(settled) + b"\n")
            # Everything queued goes out in one write: one system call per wake-up, not per
            # transition.
            while (write := await watcher.next_write()) is not None:
                data, _lines, last_seq = write
                if not local_lines:
                    continue
                await self._reserved(last_seq)  # at once but at a block's end
                await connection.send(data)
            marker = watcher.overflow()
            if marker is not None:
                await self._reserved(marker.next_seq)
                await connection.send(messages.encode(marker) + b"\n")
        finally:
            self._fanout.leave(watcher)
