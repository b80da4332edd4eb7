"""The Codex app-server daemon as a source: thread status, and which TUI shows which thread.

Facts (checked with the real Codex 0.171.0; docs/discovery.md): in daemon mode
(the default) every TUI is a client of one shared ``codex app-server`` daemon, which runs the
threads. Its control socket ``$CODEX_HOME/app-server-control/app-server-control.sock`` speaks
JSON-RPC over a WebSocket over the unix socket. Any client, without subscribing to a thread,
receives the broadcasts ``thread/started``, ``thread/status/changed`` (``idle``; ``active``
with ``activeFlags`` ``waitingOnApproval`` / ``waitingOnUserInput``; ``systemError``;
``notLoaded``) and ``thread/closed``.

The proof that ties a TUI process to its thread: each TUI runs its own MCP server
``codex_tui`` on a loopback TCP listener, and the daemon connects to it for every thread the
TUI starts or resumes. ``mcpServerStatus/list {threadId, serverName: "codex_tui"}`` answers
``httpOrigin: "http://127.0.0.1:<port>"``, and the process holding the socket that LISTENs on
that port (``/proc/net/tcp`` inode, ``/proc/<pid>/fd``) is that TUI. A thread resumed in
another pane (``codex resume <id>`` after the first TUI left) is reloaded
(``notLoaded`` -> ``idle``) and its MCP server moves to the new TUI. A TUI keeps every thread
it opened loaded (``/new``, ``/resume``) with its MCP server pointing at it, so a TUI shows the
thread attached to it LAST (``thread/started``, or a reload): this source announces each
attachment as it happens (:class:`~messages.ClientAttached`), and the pane mapper binds the
newest. Not provable, so not claimed: after paneward (re)connects, which of several threads
attached to one TUI it shows (until the next attachment), and a thread a TUI picks in its
``/resume`` list while another TUI still shows it (the daemon keeps its MCP connection to the
first: nothing moves).

An approval wait (``waitingOnApproval``) names the call it waits on as the
``PermissionRequest`` hook does (``permission: Bash: echo hi > hi.txt``): the status does not
say, but the thread's rollout (``thread/read`` ``path``) already ends with that call, without
its output, when the status is broadcast (:mod:`actors.harnesses.codex.approvals`; checked
with Codex 0.171.0). Not found (the call is not in the tail, several are pending, a tool the
hook names otherwise): the reason stays ``permission`` and ``unnamed_waits`` counts it.

Functional core: :func:`parse_origin`, :class:`DaemonView` (what each notification means),
and the JSON-RPC-over-WebSocket protocol (:mod:`actors.harnesses.codex.jsonrpc`, sans-IO);
imperative shell: :class:`RpcStream` (that protocol on one anyio byte stream) and
:class:`CodexDaemonSource` (the connection: it never starts a daemon, and reconnects when one
appears).
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import anyio
import anyio.abc
import msgspec
from anyio.streams.memory import MemoryObjectSendStream

import messages
from actors.core.backoff import Backoff
from actors.core.clock import now_ms
from actors.core.session.hints import permission_reason
from actors.harnesses.codex import approvals, paths
from actors.harnesses.codex.jsonrpc import (
    Answer,
    Opened,
    RpcClient,
    RpcClosed,
    RpcEvent,
    RpcNotification,
    RpcProtocolError,
    result_of,
)
from actors.harnesses.codex.rollouts import thread_id_from_path
from actors.harnesses.codex.tui import is_codex_tui
from actors.runtime.mailbox import EvidenceSink
from actors.sources import fswatch, procfs
from messages.common import SessionKey
from messages.errors import MessageError
from messages.evidence import ThreadState

__all__ = [
    "APPROVAL",
    "MCP_PROOF",
    "TUI_SERVER",
    "CodexDaemonSource",
    "DaemonStatistics",
    "DaemonView",
    "RpcStream",
    "Thread",
    "control_socket",
    "parse_origin",
]

#: The MCP server every Codex TUI runs for the threads it shows.
TUI_SERVER: Final = "codex_tui"
#: ``ClientAttached.proof`` / ``PaneBound.proof`` of a pane bound this way.
MCP_PROOF: Final = "codex_daemon_mcp"
#: The ``activeFlags`` word of an approval dialog.
APPROVAL: Final = "waitingOnApproval"
#: Broadcasts this source never uses (asked not to be sent: less traffic while idle).
_OPT_OUT: Final = (
    "thread/name/updated",
    "thread/goal/updated",
    "thread/goal/cleared",
    "thread/tokenUsage/updated",
    "thread/settings/updated",
    "remoteControl/status/changed",
    "configWarning",
    "skills/changed",
    "app/list/updated",
    "account/updated",
    "account/rateLimits/updated",
)
_READ: Final = 65536
_REQUEST_TIMEOUT_S: Final = 10.0
_MAX_PAGES: Final = 100
_RETRY_MIN_S: Final = 0.25
_RETRY_MAX_S: Final = 30.0
#: What may bring the control socket back: an entry created, moved in, removed or moved away.
_DIR_CHANGES: Final = fswatch.CREATE | fswatch.MOVED_TO | fswatch.DELETE | fswatch.MOVED_FROM
_STATES: Final[frozenset[str]] = frozenset({"idle", "active", "systemError", "notLoaded"})


def control_socket(codex_home: Path | None = None) -> Path:
    """Where the daemon's control socket is (a link into ``/tmp/codex-daemon-<uid>/``)."""
    home = codex_home if codex_home is not None else paths.home()
    return home / "app-server-control" / "app-server-control.sock"


def parse_origin(origin: object) -> int | None:
    """The loopback port of an MCP ``httpOrigin`` (``http://127.0.0.1:35175``), else ``None``.

    Only ``127.0.0.1``, ``::1`` and ``localhost`` count: a TUI's own listener is loopback.
    """
    if not isinstance(origin, str) or len(origin) > 200:
        return None
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or port is None:
        return None
    if parts.hostname not in ("127.0.0.1", "::1", "localhost"):
        return None
    return port


# --------------------------------------------------------------------------- the pure view


class _Status(msgspec.Struct, rename="camel"):
    type: str
    active_flags: list[str] = msgspec.field(default_factory=list)


class _ThreadWire(msgspec.Struct, rename="camel"):
    id: str
    ephemeral: bool = False
    thread_source: str | None = None
    parent_thread_id: str | None = None
    cli_version: str | None = None
    path: str | None = None


@dataclass
class Thread:
    """What this source knows of one loaded thread."""

    id: str
    root: str | None  # the parent thread, for a child (subagent) thread
    hidden: bool  # an ephemeral thread (the TUI's title thread): never reported
    version: str | None
    status: ThreadState = "notLoaded"
    flags: tuple[str, ...] = ()
    path: str | None = None  # its rollout (``thread/read``), once it has one


@dataclass
class DaemonView:
    """Pure: the threads of one daemon connection, and what each notification means.

    ``daemon`` is ``(pid, start token)`` of the daemon (the peer of the control socket), the
    owner of every thread it runs.
    """

    daemon: tuple[int, str] | None = None
    threads: dict[str, Thread] = field(default_factory=dict)
    #: ``ThreadStatus`` records made so far (each gets the next number: its ``serial``, see
    #: :class:`messages.evidence.Numbered`).
    made: int = 0

    def learn(self, raw: object) -> Thread | None:
        """Remember a thread object (``thread/started``, ``thread/read``); ``None`` if it is
        not a usable thread."""
        try:
            wire = msgspec.convert(raw, _ThreadWire)
        except msgspec.ValidationError:
            return None
        if not wire.id or len(wire.id) > messages.common.MAX_ID_LEN:
            return None
        hidden = wire.ephemeral or wire.thread_source == "thread_title"
        known = self.threads.get(wire.id)
        path = wire.path if wire.path and thread_id_from_path(wire.path) == wire.id else None
        thread = Thread(
            wire.id,
            wire.parent_thread_id or None,
            hidden,
            wire.cli_version,
            known.status if known is not None else "notLoaded",
            path=path or (known.path if known is not None else None),
        )
        self.threads[wire.id] = thread
        return thread

    def status(
        self,
        thread_id: str,
        raw: object,
        at_ms: int,
        observed_at_ms: int,
        summary: str | None = None,
    ) -> tuple[messages.ThreadStatus | None, bool]:
        """``thread/status/changed``: the evidence to send, and whether the thread was just
        (re)attached (``notLoaded`` -> loaded: a reload, e.g. ``codex resume``). ``summary``
        is the reason of an approval wait's call, if the source found it."""
        thread = self.threads.get(thread_id)
        try:
            status = msgspec.convert(raw, _Status)
        except msgspec.ValidationError:
            return None, False
        if thread is None or status.type not in _STATES:
            return None, False
        word: ThreadState = status.type  # type: ignore[assignment]  # checked just above
        reloaded = thread.status == "notLoaded" and word != "notLoaded"
        thread.status, thread.flags = word, tuple(status.active_flags)
        evidence = self.evidence(thread, word, thread.flags, at_ms, observed_at_ms, summary)
        return evidence, reloaded and thread.root is None and not thread.hidden

    def closed(
        self, thread_id: str, at_ms: int, observed_at_ms: int
    ) -> messages.ThreadStatus | None:
        """``thread/closed``: the thread was unloaded (its last client left 60 s ago)."""
        thread = self.threads.pop(thread_id, None)
        if thread is None:
            return None
        return self.evidence(thread, "closed", (), at_ms, observed_at_ms)

    def evidence(
        self,
        thread: Thread,
        status: ThreadState,
        flags: tuple[str, ...],
        at_ms: int,
        observed_at_ms: int,
        summary: str | None = None,
    ) -> messages.ThreadStatus | None:
        """The :class:`~messages.ThreadStatus` for ``thread`` (``None`` for a hidden one);
        ``summary`` only goes with an approval wait."""
        if thread.hidden:
            return None
        waits = status == "active" and APPROVAL in flags
        pid, token = self.daemon if self.daemon is not None else (None, None)
        self.made += 1
        return messages.ThreadStatus(
            serial=self.made,
            key=SessionKey("codex", thread.id),
            status=status,
            at_ms=at_ms,
            observed_at_ms=observed_at_ms,
            flags=tuple(f for f in flags if isinstance(f, str))[:8],
            pid=pid,
            start_token=token,
            root_key=SessionKey("codex", thread.root) if thread.root else None,
            version=thread.version,
            summary=summary if waits else None,
        )


# --------------------------------------------------------------------------- the connection


class RpcStream:
    """The I/O shell of a :class:`~actors.harnesses.codex.jsonrpc.RpcClient` (JSON-RPC 2.0
    over a client WebSocket) on one anyio byte stream.

    :meth:`open` does the handshake (or :meth:`send_open`, then :meth:`wait_open`, to do
    something else while the peer answers); then one task runs :meth:`serve` (reads until the
    peer hangs up: answers wake their callers, notifications go to ``notify``) while others
    :meth:`call` and :meth:`send`. ``bytes_in`` counts what was read.
    """

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self._stream = stream
        self._rpc = RpcClient()
        self._waiting: dict[int, anyio.Event] = {}
        self._answers: dict[int, Answer] = {}
        # Events read with the handshake's answer, served first by serve().
        self._early: list[RpcEvent] = []
        self.bytes_in = 0

    async def open(self) -> None:
        """The WebSocket handshake.

        :raises RpcProtocolError: refused, or broken.
        """
        await self.send_open()
        await self.wait_open()

    async def send_open(self) -> None:
        """Send the WebSocket handshake's request."""
        await self._stream.send(self._rpc.connect())

    async def wait_open(self) -> None:
        """Wait for the answer to :meth:`send_open`.

        :raises RpcProtocolError: refused, or broken.
        """
        while True:
            events = await self._receive()
            for index, event in enumerate(events):
                if isinstance(event, Opened):
                    self._early = events[index + 1 :]
                    return

    async def _receive(self) -> list[RpcEvent]:
        data = await self._stream.receive(_READ)  # EndOfStream when the daemon hangs up
        self.bytes_in += len(data)
        events = self._rpc.receive_data(data)
        owed = self._rpc.data_to_send()
        if owed:
            await self._stream.send(owed)
        return events

    async def send(self, body: dict[str, Any]) -> None:
        """Send ``body`` (a notification) as one message."""
        await self._stream.send(self._rpc.message(body))

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and wait for its answer (read by :meth:`serve` meanwhile).

        :raises RpcProtocolError: an error answer, or none within the timeout.
        """
        request_id, data = self._rpc.request(method, params)
        done = self._waiting[request_id] = anyio.Event()
        try:
            await self._stream.send(data)
            with anyio.fail_after(_REQUEST_TIMEOUT_S):
                await done.wait()
        except TimeoutError:
            raise RpcProtocolError(f"{method}: no answer") from None
        finally:
            self._waiting.pop(request_id, None)
            self._rpc.forget(request_id)
        return result_of(method, self._answers.pop(request_id))

    async def serve(self, notify: Callable[[dict[str, Any]], None]) -> None:
        """Read until the peer hangs up: answers wake their callers, notifications go to
        ``notify`` (which must not block).

        :raises RpcProtocolError: the peer broke the protocol.
        """
        events, self._early = self._early, []
        while True:
            for event in events:
                if isinstance(event, Answer):
                    waiter = self._waiting.get(event.request_id)
                    if waiter is not None:
                        self._answers[event.request_id] = event
                        waiter.set()
                elif isinstance(event, RpcNotification):
                    notify(event.body)
                elif isinstance(event, RpcClosed):
                    return
            events = await self._receive()


def _waits_for_approval(raw: object) -> bool:
    """Whether a raw ``status`` object is an approval wait."""
    if not isinstance(raw, dict) or raw.get("type") != "active":
        return False
    flags = raw.get("activeFlags")
    return isinstance(flags, list) and APPROVAL in flags


#: What a new daemon changes at the control socket: the link's target, and the identity of
#: what it names (device, inode, ctime). ``None`` where there is no link or nothing there.
SocketState = tuple[str | None, tuple[int, int, int] | None]


def socket_state(link: Path) -> SocketState:
    """The control socket's :data:`SocketState` now (blocking: a readlink and a stat)."""
    try:
        target: str | None = os.readlink(link)
    except OSError:  # no link, or a socket there itself
        target = None
    try:
        st = os.stat(link)
    except OSError:
        return target, None
    return target, (st.st_dev, st.st_ino, st.st_ctime_ns)


def _peer(sock: socket.socket) -> tuple[int, int]:
    """``(pid, uid)`` of the unix socket's peer (``SO_PEERCRED``)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _ = struct.unpack("3i", raw)
    return pid, uid


def _resolve_client(port: int) -> tuple[int, str] | None:
    """Worker thread: the Codex TUI process listening on loopback ``port`` (pid, start token).

    Only processes named ``codex`` that are TUIs (not the daemon, not ``codex exec``) count.
    """
    inodes = procfs.listening_inodes(port)
    if not inodes:
        return None
    candidates: list[tuple[int, str]] = []
    for name in os.listdir("/proc") if procfs.HAVE_PROCFS else ():
        if not name.isdigit():
            continue
        pid = int(name)
        if procfs.read_comm(pid) != "codex":
            continue
        argv = procfs.read_cmdline(pid)
        stat = procfs.read_stat(pid)
        if argv is None or stat is None or not is_codex_tui("codex", argv):
            continue
        candidates.append((pid, stat.start_token))
    holders = procfs.socket_holders([pid for pid, _ in candidates], inodes)
    if len(holders) != 1:
        return None
    return next(c for c in candidates if c[0] == holders[0])


# --------------------------------------------------------------------------- the actor


class DaemonStatistics(msgspec.Struct, kw_only=True):
    """Counters of :class:`CodexDaemonSource`: one record it keeps, copied by
    ``statistics()`` (``connected`` and ``threads`` are filled in then)."""

    connected: bool = False
    threads: int = 0
    connects: int = 0
    connect_failures: int = 0
    disconnects: int = 0
    protocol_errors: int = 0
    refused_peers: int = 0
    notifications: int = 0
    ignored_notifications: int = 0
    statuses_sent: int = 0
    attached_sent: int = 0
    #: Approval waits whose call was found in the rollout's tail (the reason names it), and
    #: those whose call was not (no path, unreadable, not in the tail, ambiguous, unnamed tool).
    named_waits: int = 0
    unnamed_waits: int = 0
    unresolved_clients: int = 0
    ambiguous_clients: int = 0
    rejected: int = 0
    bytes_in: int = 0
    #: The wait before the next try after the last try or connection ended (seconds; 0 before
    #: the first): it grows until a connection works for a while (:mod:`actors.core.backoff`).
    retry_delay: float = 0.0
    #: Waits for the socket that could not use inotify (the retry delay alone decides).
    watch_errors: int = 0
    #: Epoch ms at which the current connection was up (handshake answered); 0 while none is.
    connected_at_ms: int = 0


class CodexDaemonSource:
    """Actor: follows the Codex app-server daemon's control socket; sends
    :class:`~messages.ThreadStatus` for every thread status it broadcasts and
    :class:`~messages.ClientAttached` when a thread is attached to a TUI (see the module
    docstring for the proof). While no daemon listens it waits for one to appear (file
    notifications on the control directory, else a slow retry); it never starts one.
    """

    def __init__(
        self,
        codex_home: str | os.PathLike[str] | None = None,
        *,
        clock: Callable[[], int] = now_ms,
        retry_min: float = _RETRY_MIN_S,
        retry_max: float = _RETRY_MAX_S,
        resolve: Callable[[int], tuple[int, str] | None] = _resolve_client,
    ) -> None:
        self._home = Path(codex_home) if codex_home is not None else paths.home()
        self._clock = clock
        self._backoff = Backoff(retry_min, retry_max)
        self._resolve = resolve
        self._view = DaemonView()
        self._stats = DaemonStatistics()
        self._connected = anyio.Event()
        self._rpc: RpcStream | None = None

    @property
    def socket_path(self) -> Path:
        return control_socket(self._home)

    def statistics(self) -> DaemonStatistics:
        """A point-in-time copy of the counters (see :class:`DaemonStatistics`)."""
        rpc = self._rpc
        return msgspec.structs.replace(
            self._stats,
            connected=rpc is not None,
            threads=len(self._view.threads) if rpc is not None else 0,
            bytes_in=self._stats.bytes_in + (rpc.bytes_in if rpc is not None else 0),
        )

    async def wait_connected(self) -> None:
        """Wait until a daemon connection is up and its loaded threads were reported."""
        await self._connected.wait()

    async def run(self, sink: EvidenceSink) -> None:
        """Connect, follow, reconnect, until cancelled."""
        # Taken before each try: whatever changes after it wakes the wait below, even a change
        # made before the wait's watches were in place. A wait that saw the socket change
        # returns the look it took after its watches, and that look serves the next try: no
        # worker-thread hop between the change and the connect.
        seen, target = await anyio.to_thread.run_sync(self._look)
        while True:
            try:
                await self._follow(sink, target)
            except OSError:
                self._stats.connect_failures += 1
            except (RpcProtocolError, anyio.EndOfStream, anyio.BrokenResourceError):
                self._stats.protocol_errors += 1
            # Only a connection that worked for a while resets the delay: a daemon that
            # answers the handshake and then sends a bad frame is retried ever more slowly.
            delay = self._backoff.ended(time.monotonic())
            self._stats.retry_delay = delay
            seen, target = await self._wait_for_daemon(delay, seen)

    def _look(self) -> tuple[SocketState, str]:
        """Worker thread: the control socket's state, and the path to connect to.

        The link's target (``/tmp/codex-daemon-<uid>/<hash>``) is what the TUIs connect to,
        and a deep ``CODEX_HOME`` can make the link's own path too long for a unix socket
        address."""
        return socket_state(self.socket_path), os.path.realpath(self.socket_path)

    async def _follow(self, sink: EvidenceSink, target: str) -> None:
        path = self.socket_path
        stream = await anyio.connect_unix(target)
        async with stream:
            raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
            pid, uid = _peer(raw)
            if uid != os.getuid():
                self._stats.refused_peers += 1
                raise RpcProtocolError(f"{path} belongs to uid {uid}")
            rpc = RpcStream(stream)
            # The request first: the daemon answers it while a worker reads its /proc entry.
            await rpc.send_open()
            stat = await anyio.to_thread.run_sync(procfs.read_stat, pid)
            self._view = DaemonView(daemon=(pid, stat.start_token) if stat else None)
            await rpc.wait_open()
            self._stats.connects += 1
            self._backoff.connected(time.monotonic())
            self._stats.connected_at_ms = self._clock()
            self._rpc = rpc
            queue_send, queue = anyio.create_memory_object_stream[dict[str, Any]](4096)
            try:
                async with anyio.create_task_group() as tg, queue, queue_send:
                    tg.start_soon(self._serve, rpc, queue_send, tg.cancel_scope)
                    try:
                        await self._start(rpc, sink)
                        self._connected.set()
                        async for body in queue:
                            await self._notification(rpc, sink, body)
                    except RpcProtocolError:
                        self._stats.protocol_errors += 1
                    finally:
                        tg.cancel_scope.cancel()
            finally:
                self._stats.bytes_in += rpc.bytes_in
                self._rpc = None
                self._stats.disconnects += 1
                self._stats.connected_at_ms = 0
                self._connected = anyio.Event()

    async def _serve(
        self,
        rpc: RpcStream,
        queue: MemoryObjectSendStream[dict[str, Any]],
        scope: anyio.CancelScope,
    ) -> None:
        """Read the connection until the daemon hangs up (or breaks the protocol), then end
        the whole connection: :meth:`run` reconnects."""
        try:
            await rpc.serve(lambda body: self._enqueue(queue, body))
        except RpcProtocolError:
            self._stats.protocol_errors += 1
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the daemon went away
        finally:
            scope.cancel()

    def _enqueue(self, queue: MemoryObjectSendStream[dict[str, Any]], body: Any) -> None:
        self._stats.notifications += 1
        try:
            queue.send_nowait(body)
        except anyio.WouldBlock:
            self._stats.ignored_notifications += 1

    async def _start(self, rpc: RpcStream, sink: EvidenceSink) -> None:
        """``initialize``, then every loaded thread: its status, and the TUIs it is attached
        to (a TUI with one loaded root thread shows it; with several, which one is unproven
        until the next attachment)."""
        await rpc.call("initialize", {
            "clientInfo": {"name": "paneward", "title": None, "version": "1"},
            "capabilities": {"experimentalApi": False, "requestAttestation": False,
                             "optOutNotificationMethods": list(_OPT_OUT)},
        })
        await rpc.send({"jsonrpc": "2.0", "method": "initialized"})
        loaded: list[str] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await rpc.call("thread/loaded/list", {"cursor": cursor})
            data = page.get("data")
            if isinstance(data, list):
                loaded.extend(t for t in data if isinstance(t, str))
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str):
                break
        now = self._clock()
        by_client: dict[tuple[int, str], list[str]] = {}
        for thread_id in loaded:
            thread = await self._read(rpc, thread_id)
            if thread is None:
                continue
            summary = None
            if thread.status == "active" and APPROVAL in thread.flags:
                summary = await self._approval_reason(rpc, thread_id)
            self._send(sink, self._view.evidence(thread, thread.status, thread.flags, now, now,
                                                 summary))
            if thread.root is None and not thread.hidden:
                client = await self._client_of(rpc, thread_id)
                if client is not None:
                    by_client.setdefault(client, []).append(thread_id)
        for client, threads in by_client.items():
            if len(threads) > 1:
                self._stats.ambiguous_clients += 1
                continue
            self._attach(sink, threads[0], client, now)

    async def _read(
        self, rpc: RpcStream, thread_id: str, *, with_status: bool = True
    ) -> Thread | None:
        try:
            result = await rpc.call("thread/read", {"threadId": thread_id})
        except RpcProtocolError:
            return None  # closed meanwhile
        raw = result.get("thread")
        thread = self._view.learn(raw)
        if thread is not None and with_status and isinstance(raw, dict):
            try:
                status = msgspec.convert(raw.get("status"), _Status)
            except msgspec.ValidationError:
                return thread
            if status.type in _STATES:
                thread.status = status.type  # type: ignore[assignment]  # checked just above
                thread.flags = tuple(status.active_flags)
        return thread

    async def _client_of(self, rpc: RpcStream, thread_id: str) -> tuple[int, str] | None:
        """The TUI process the daemon's ``codex_tui`` MCP server of ``thread_id`` is, if any."""
        try:
            result = await rpc.call("mcpServerStatus/list", {
                "threadId": thread_id, "serverName": TUI_SERVER, "detail": "toolsAndAuthOnly",
            })
        except RpcProtocolError:
            self._stats.unresolved_clients += 1
            return None
        data = result.get("data")
        servers = [s for s in data if isinstance(s, dict)] if isinstance(data, list) else []
        ports = {parse_origin(s.get("httpOrigin")) for s in servers if s.get("name") == TUI_SERVER}
        ports.discard(None)
        client = None
        if len(ports) == 1:
            port = ports.pop()
            assert port is not None
            client = await anyio.to_thread.run_sync(self._resolve, port)
        if client is None:
            self._stats.unresolved_clients += 1
        return client

    def _attach(self, sink: EvidenceSink, thread_id: str, client: tuple[int, str], at: int) -> None:
        pid, token = client
        message = messages.ClientAttached(
            key=SessionKey("codex", thread_id),
            pid=pid,
            start_token=token,
            proof=MCP_PROOF,
            at_ms=at,
            observed_at_ms=self._clock(),
        )
        if self._send(sink, message):
            self._stats.attached_sent += 1

    async def _notification(self, rpc: RpcStream, sink: EvidenceSink, body: dict[str, Any]) -> None:
        method = body.get("method")
        params = body.get("params")
        if not isinstance(params, dict):
            self._stats.ignored_notifications += 1
            return
        seen = self._clock()
        emitted = body.get("emittedAtMs")
        at = emitted if isinstance(emitted, int) and abs(emitted - seen) < 86_400_000 else seen
        if method == "thread/started":
            thread = self._view.learn(params.get("thread"))
            if thread is None:
                self._stats.ignored_notifications += 1
                return
            raw = params.get("thread")
            status = raw.get("status") if isinstance(raw, dict) else None
            word, _ = self._view.status(thread.id, status, at, seen)
            self._send(sink, word)
            if thread.root is None and not thread.hidden:
                await self._attach_now(rpc, sink, thread.id, at)
        elif method == "thread/status/changed":
            thread_id = params.get("threadId")
            if not isinstance(thread_id, str):
                self._stats.ignored_notifications += 1
                return
            if thread_id not in self._view.threads:
                # Loaded since we connected without a thread/started (a TUI that reconnected
                # to a new daemon reloads its thread): learn what it is; its first loaded
                # status is its attachment.
                await self._read(rpc, thread_id, with_status=False)
            raw = params.get("status")
            summary = None
            if _waits_for_approval(raw) and thread_id in self._view.threads:
                summary = await self._approval_reason(rpc, thread_id)
            word, attach = self._view.status(thread_id, raw, at, seen, summary)
            if word is None and thread_id not in self._view.threads:
                self._stats.ignored_notifications += 1
            self._send(sink, word)
            if attach:
                await self._attach_now(rpc, sink, thread_id, at)
        elif method == "thread/closed":
            thread_id = params.get("threadId")
            if isinstance(thread_id, str):
                self._send(sink, self._view.closed(thread_id, at, seen))
        else:
            self._stats.ignored_notifications += 1

    async def _approval_reason(self, rpc: RpcStream, thread_id: str) -> str | None:
        """The reason of the call ``thread_id``'s approval dialog is about (its rollout's
        tail, read in a worker thread), or ``None`` (counted) if it cannot be told."""
        thread = self._view.threads.get(thread_id)
        if thread is not None and thread.path is None:
            thread = await self._read(rpc, thread_id, with_status=False)
        found = None
        if thread is not None and thread.path is not None:
            found = await anyio.to_thread.run_sync(approvals.find_pending, thread.path)
        if found is None:
            self._stats.unnamed_waits += 1
            return None
        self._stats.named_waits += 1
        return permission_reason(*found)

    async def _attach_now(
        self, rpc: RpcStream, sink: EvidenceSink, thread_id: str, at: int
    ) -> None:
        client = await self._client_of(rpc, thread_id)
        if client is not None:
            self._attach(sink, thread_id, client, at)

    def _send(self, sink: EvidenceSink, message: messages.Inbound | None) -> bool:
        if message is None:
            return False
        try:
            sink.inject_nowait(message)
        except MessageError:
            self._stats.rejected += 1
            return False
        if isinstance(message, messages.ThreadStatus):
            self._stats.statuses_sent += 1
        return True

    async def _wait_for_daemon(
        self, delay: float, seen: SocketState
    ) -> tuple[SocketState, str]:
        """Until the control socket may be there again: a change in its directory (or the
        directory of the link's target) that leaves the socket other than ``seen``, or
        ``delay`` seconds, whichever comes first; returns a look (:meth:`_look`) taken after
        that. A directory that does not exist yet (a home that never ran a daemon) is watched
        through its nearest existing ancestor (:func:`~actors.sources.fswatch.watch_nearest`):
        the first daemon wakes this at once. Returns at once if the socket is no longer as
        ``seen`` (before the last try): what changed between that try and the watches (a
        daemon that makes its link, then binds while the try fails) would wake nothing else
        until ``delay``."""
        with anyio.move_on_after(delay):
            try:
                # inotify on the event loop: no thread and no timer while nothing changes.
                with fswatch.Inotify() as inotify:
                    while True:
                        look = await anyio.to_thread.run_sync(self._arm, inotify, seen)
                        if look[0] != seen:
                            return look
                        # Something else changed (an ancestor got an entry, a directory on
                        # the way appeared): watch one level deeper and wait again.
                        await inotify.wait()
            except OSError:
                self._stats.watch_errors += 1
                await anyio.sleep_forever()  # no watching here: the delay decides
        return await anyio.to_thread.run_sync(self._look)

    def _arm(self, inotify: fswatch.Inotify, seen: SocketState) -> tuple[SocketState, str]:
        """Worker thread: watch each directory the socket may appear in, or its nearest
        existing ancestor, and nothing else; then (watches first, so nothing is missed)
        :meth:`_look`. An ancestor watched while the control directory was missing is dropped
        once it exists: every file Codex makes in its home would wake the wait for nothing."""
        wanted = {
            os.fspath(fswatch.watch_nearest(inotify, directory, _DIR_CHANGES))
            for directory in self._watch_dirs(seen)
        }
        for directory in inotify.watched:
            if directory not in wanted:
                inotify.remove(directory)
        return self._look()

    def _watch_dirs(self, seen: SocketState) -> list[Path]:
        # The link's target as the last try saw it: a link changed since then is caught by
        # the comparison after the watches are in place.
        link = self.socket_path
        target = seen[0]
        return [link.parent] if target is None else [link.parent, (link.parent / target).parent]
