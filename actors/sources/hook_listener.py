"""The hook listener: the daemon's end of ``paneward hook`` (Unix socket) and Claude ``http`` hooks.

Who sends what:

- ``paneward hook`` (one connection per hook event), ``paneward inject``, ``paneward wrap`` (one
  long-lived connection) and any local producer connect to the Unix socket (directory 0700,
  socket 0600) and write newline-delimited JSON frames, each ONE inbound message exactly as
  :func:`messages.encode` shapes it.
- Claude Code ``http`` hooks ``POST /hook/<harness>`` to the optional loopback listener with the
  per-install token in ``X-Paneward-Token``; the body (the hook JSON) becomes a ``NotifyHook``.

Every frame is decoded exactly once (:func:`actors.core.ingress.frames.check_frame`: decoding is the
validation), restamped with ``observed_at_ms`` (now) and handed to ``host.deliver_nowait``,
which routes it without validating it again; the supervisor owns normalization. Every refusal
-- a peer of another uid, an oversize frame, invalid UTF-8, a NUL byte, nesting deeper than
:data:`~actors.core.ingress.frames.MAX_DEPTH`, bad JSON, an unknown ``type``, wrong field types, a
message the host refuses, a bad http request or token, a request not finished by its deadline
-- is counted by reason and recorded (:meth:`HookListener.statistics`), and changes nothing
else: the connection carries on at the next newline and later valid frames still go through.

Admission (:mod:`actors.sources.admission`, rules in :mod:`actors.core.ingress.limits`): each socket
has a cap derived from the file-descriptor limit (http, unauthenticated, the lowest); a connection
must send a valid frame (an authorized request) within 2 s of being accepted or it is closed;
one that did (``paneward wrap``) may stay; at the cap the idlest unproven connection makes room,
otherwise new connections wait in the kernel's queue, never refused; ``accept()`` running out
of descriptors is counted and waited out, never a crash. So idle connections, of this uid or
(http) any other, cannot switch hook intake off.

The decisions are sans-IO in :mod:`actors.core.ingress.frames` and :mod:`actors.core.ingress.http`
(HTTP/1.1 is
:mod:`h11`'s); paths are opened through :mod:`actors.sources.files` (never through a link).
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import stat
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import anyio
import anyio.abc
import msgspec

import messages
from actors.core import paths
from actors.core.clock import now_ms
from actors.core.ingress.frames import (
    MAX_FRAME_BYTES,
    FrameSplitter,
    Oversize,
    Rejection,
    RejectReason,
    check_frame,
    restamp,
)
from actors.core.ingress.http import HttpHook, HttpHookProtocol, HttpRefusal, NeedData
from actors.core.ingress.limits import (
    HEAD_DEADLINE_S,
    KEEPALIVE_IDLE_S,
    ConnectionCaps,
    connection_caps,
)
from actors.core.session.harness import HookIngress
from actors.runtime.mailbox import EvidenceSink, IntakeGate
from actors.sources.admission import Admission, AdmissionStatistics, Connection, Handler
from actors.sources.files import (
    UnsafePath,
    bind_socket,
    open_evidence,
    open_private_dir,
    prepare_socket,
    remove_socket,
)

__all__ = [
    "HookListener",
    "HookListenerError",
    "HookListenerStatistics",
    "RejectionRecord",
    "load_http_token",
]

MAX_RECENT_REJECTIONS: Final = 64
#: Seconds the kernel holds an http connection that has sent nothing before accept() sees it
#: (Linux rounds it up to its SYN-ACK retransmission schedule: 10 -> ~15 s). Each such
#: connection costs the loop an accept and a close when it surfaces, and a flood re-opens it at
#: once, so the longer the hold, the fewer accept+close turns real http hooks queue behind
#: (``bench/bench_hardening.py`` measures their p99 under held connections).
HTTP_DEFER_ACCEPT_S: Final = 10
#: Connections the http port takes from the kernel's queue per wake-up. Most of a burst there
#: is silent connections surfacing together, each only accepted and closed (no task): a large
#: batch lets a real hook queued behind them reach accept() in fewer loop turns.
HTTP_ACCEPT_BATCH: Final = 256


class HookListenerError(messages.PanewardError):
    """The listener cannot start: socket in use, unsafe directory, missing/unsafe http token."""


@dataclass(frozen=True, slots=True)
class RejectionRecord:
    reason: RejectReason
    detail: str
    at_ms: int
    transport: Literal["unix", "http"]
    peer_pid: int | None


class HookListenerStatistics(msgspec.Struct, kw_only=True):
    """Counters of one :class:`HookListener`: one record it keeps, copied by ``statistics()``.

    ``rejected`` maps reason -> count; ``connections_open`` is the number open now;
    ``recent_rejections`` (the last :data:`MAX_RECENT_REJECTIONS`), ``socket_path``,
    ``http_port`` and the admission counters of each socket (``unix``, ``http``: caps,
    evictions, timeouts, accept errors; see :class:`~actors.sources.admission.AdmissionStatistics`)
    are filled in by :meth:`HookListener.statistics`; ``backpressure_waits`` counts the
    pauses for the store (the ``gate``); the rest monotonic.
    """

    connections_accepted: int = 0
    connections_open: int = 0
    frames_received: int = 0
    frames_delivered: int = 0
    blank_lines: int = 0
    http_requests: int = 0
    http_delivered: int = 0
    backpressure_waits: int = 0
    rejected: dict[str, int] = msgspec.field(default_factory=dict)
    recent_rejections: tuple[RejectionRecord, ...] = ()
    socket_path: str | None = None
    http_port: int | None = None
    unix: AdmissionStatistics | None = None
    http: AdmissionStatistics | None = None

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())


def load_http_token(path: Path) -> str:
    """Read the http hook token, refusing a file others could read (blocking: use a thread).

    :raises HookListenerError: missing, empty, not a regular file, not ours, or group/world
        accessible.
    """
    try:
        fd, st = open_evidence(path)
        try:
            text = os.read(fd, 4096).decode("utf-8").strip()
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise HookListenerError(
            f"http hooks enabled but no token at {path}: run "
            "`paneward install-hooks claude-code --http` first"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HookListenerError(f"cannot read http token {path}: {exc}") from None
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise HookListenerError(
            f"http token {path} must be owned by uid {os.getuid()} with mode 0600 "
            f"(found uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o})"
        )
    if not text:
        raise HookListenerError(f"http token {path} is empty")
    return text


# ---------------------------------------------------------------------------------------------
# The actor


class HookListener:
    """Actor: serve the hook socket (and optionally loopback http hooks) into a sink.

    ``socket_path`` defaults to :func:`actors.core.paths.socket_path`; ``http_port`` ``None`` leaves
    http off (``0`` picks a free port: see :attr:`http_port` once :meth:`wait_listening`
    returned); the token is read from ``token_path`` (default
    :func:`actors.core.paths.http_token_path`) at start. ``caps`` (default: from the process's
    file-descriptor limit, :func:`actors.core.ingress.limits.connection_caps`) bounds the
    connections open at once on each socket; ``head_deadline`` is how long a connection may take to
    send its first valid frame (request). ``gate`` (the daemon passes the store's backpressure)
    pauses reading while it is closed: frames wait in the kernel, nothing is refused.
    """

    def __init__(
        self,
        hooks: HookIngress,
        *,
        socket_path: Path | None = None,
        http_port: int | None = None,
        http_host: str = "127.0.0.1",
        token_path: Path | None = None,
        clock_ms: Callable[[], int] = now_ms,
        caps: ConnectionCaps | None = None,
        head_deadline: float = HEAD_DEADLINE_S,
        gate: IntakeGate | None = None,
    ) -> None:
        self._hooks = hooks
        self._gate = gate
        self._socket_path = socket_path
        self._http_requested_port = http_port
        self._http_host = http_host
        self._token_path = token_path
        self._clock_ms = clock_ms
        self._caps = caps
        self._head_deadline = head_deadline
        self._token = ""
        self._listening = anyio.Event()
        self._bound_socket: Path | None = None
        self._bound_port: int | None = None
        self._uid = os.getuid()
        self._stats = HookListenerStatistics()
        self._recent: deque[RejectionRecord] = deque(maxlen=MAX_RECENT_REJECTIONS)
        self._unix: Admission | None = None
        self._http: Admission | None = None

    # -- public --------------------------------------------------------------------------

    @property
    def socket_path(self) -> Path | None:
        """The bound socket path (``None`` until listening)."""
        return self._bound_socket

    @property
    def http_port(self) -> int | None:
        """The bound http port (``None`` until listening or when http is off)."""
        return self._bound_port

    async def wait_listening(self) -> None:
        """Return once the socket (and the http listener, if enabled) accept connections."""
        await self._listening.wait()

    def statistics(self) -> HookListenerStatistics:
        """A point-in-time copy of the counters (see :class:`HookListenerStatistics`)."""
        unix = None if self._unix is None else self._unix.statistics()
        return msgspec.structs.replace(
            self._stats,
            connections_open=0 if unix is None else unix.open,
            rejected=dict(self._stats.rejected),
            recent_rejections=tuple(self._recent),
            socket_path=None if self._bound_socket is None else os.fspath(self._bound_socket),
            http_port=self._bound_port,
            unix=unix,
            http=None if self._http is None else self._http.statistics(),
        )

    async def run(self, sink: EvidenceSink) -> None:
        """Serve until cancelled; removes its socket on the way out.

        :raises HookListenerError: when it cannot start (see the class docstring).
        """
        path = self._socket_path if self._socket_path is not None else Path(paths.socket_path())
        caps = self._caps or connection_caps(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        try:
            dir_fd = await anyio.to_thread.run_sync(open_private_dir, os.fspath(path.parent))
        except UnsafePath as exc:
            raise HookListenerError(str(exc)) from None
        unix_sock: socket.socket | None = None
        tcp: socket.socket | None = None
        inode = 0
        try:
            try:
                await anyio.to_thread.run_sync(prepare_socket, dir_fd, path.name, os.fspath(path))
                if self._http_requested_port is not None:
                    token_path = self._token_path or Path(paths.http_token_path())
                    self._token = await anyio.to_thread.run_sync(load_http_token, token_path)
                unix_sock, inode = bind_socket(dir_fd, path.name)
            except UnsafePath as exc:
                raise HookListenerError(str(exc)) from None
            self._unix = Admission(caps.hook, head_deadline=self._head_deadline)
            async with anyio.create_task_group() as tg:
                self._bound_socket = path
                tg.start_soon(self._unix.serve, unix_sock, self._unix_connection_for(sink))
                if self._http_requested_port is not None:
                    tcp = socket.create_server(
                        (self._http_host, self._http_requested_port), backlog=4096
                    )
                    # nginx's "deferred": accept() sees a connection only once its request
                    # has started to arrive, so connections that never send (any local user
                    # can open them) wait in the kernel instead of ahead of real hooks.
                    deferred = True
                    try:
                        tcp.setsockopt(
                            socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT, HTTP_DEFER_ACCEPT_S
                        )
                    except (OSError, AttributeError):
                        deferred = False  # not Linux: idle ones wait out the head deadline
                    tcp.setblocking(False)
                    self._bound_port = tcp.getsockname()[1]
                    self._http = Admission(
                        caps.http,
                        head_deadline=self._head_deadline,
                        close_silent=deferred,
                        accept_batch=HTTP_ACCEPT_BATCH,
                    )
                    tg.start_soon(self._http.serve, tcp, self._http_connection_for(sink))
                self._listening.set()
        finally:
            if unix_sock is not None:
                unix_sock.close()
                remove_socket(dir_fd, path.name, inode)
            if tcp is not None:
                tcp.close()
            os.close(dir_fd)

    # -- internals -----------------------------------------------------------------------

    def _reject(
        self,
        rejection: Rejection,
        transport: Literal["unix", "http"],
        peer_pid: int | None,
    ) -> None:
        rejected = self._stats.rejected
        rejected[rejection.reason] = rejected.get(rejection.reason, 0) + 1
        self._recent.append(
            RejectionRecord(
                reason=rejection.reason,
                detail=rejection.detail[:300],
                at_ms=self._clock_ms(),
                transport=transport,
                peer_pid=peer_pid,
            )
        )

    def _deliver(self, message: messages.Inbound, sink: EvidenceSink) -> Rejection | None:
        try:
            # Decoded once (check_frame / http_message): the sink routes it without re-validating.
            sink.deliver_nowait(restamp(message, self._clock_ms()))
        except messages.PanewardError as exc:
            return Rejection("refused_by_sink", str(exc))
        return None

    def _unix_connection_for(self, sink: EvidenceSink) -> Handler:
        async def handle(connection: Connection) -> None:
            await self._unix_connection(connection, sink)

        return handle

    async def _unix_connection(self, connection: Connection, sink: EvidenceSink) -> None:
        try:
            peer_pid, peer_uid = connection.peer_credentials()
        except OSError as exc:
            self._reject(Rejection("peer_uid", f"no peer credentials: {exc}"), "unix", None)
            return
        if peer_uid != self._uid:
            self._reject(
                Rejection("peer_uid", f"peer uid {peer_uid} is not {self._uid}"),
                "unix",
                peer_pid,
            )
            return
        self._stats.connections_accepted += 1
        splitter = FrameSplitter()
        while True:
            chunk = await connection.receive(1 << 18, connection.deadline())
            if chunk is None:  # not proven by its deadline
                if splitter.buffered:
                    self._stats.frames_received += 1
                    self._reject(
                        Rejection(
                            "timeout",
                            f"frame not finished within {self._head_deadline:g} s "
                            f"({splitter.buffered} bytes)",
                        ),
                        "unix",
                        peer_pid,
                    )
                return
            if not chunk:
                break
            for item in splitter.feed(chunk):
                if self._gate is not None and self._gate.closed():
                    self._stats.backpressure_waits += 1
                    await self._gate.wait()
                if self._frame(item, sink, peer_pid):
                    connection.prove()
        for item in splitter.close():
            self._frame(item, sink, peer_pid)

    def _frame(self, item: bytes | Oversize, sink: EvidenceSink, peer_pid: int) -> bool:
        """Handle one frame; True when it was delivered."""
        if isinstance(item, Oversize):
            self._stats.frames_received += 1
            self._reject(
                Rejection("oversize", f"frame of {item.size} bytes (limit {MAX_FRAME_BYTES})"),
                "unix",
                peer_pid,
            )
            return False
        if not item.strip():
            self._stats.blank_lines += 1
            return False
        self._stats.frames_received += 1
        result = check_frame(item)
        if isinstance(result, Rejection):
            self._reject(result, "unix", peer_pid)
            return False
        refused = self._deliver(result, sink)
        if refused is not None:
            self._reject(refused, "unix", peer_pid)
            return False
        self._stats.frames_delivered += 1
        return True

    def _http_connection_for(self, sink: EvidenceSink) -> Handler:
        async def handle(connection: Connection) -> None:
            with contextlib.suppress(OSError):  # the client went away
                await self._http_connection(connection, sink)

        return handle

    async def _http_connection(self, connection: Connection, sink: EvidenceSink) -> None:
        protocol = HttpHookProtocol(self._token, self._hooks)
        while True:
            event = protocol.next_event(self._clock_ms())
            if protocol.authenticated and not connection.proven:
                connection.prove()  # the right token: no longer the first to be shed
            if isinstance(event, NeedData):
                idle = KEEPALIVE_IDLE_S if protocol.between_requests else self._head_deadline
                data = await connection.receive(1 << 18, connection.deadline(idle))
                if data is None:
                    if not protocol.between_requests:
                        self._stats.http_requests += 1
                        self._reject(
                            Rejection("timeout", "request not finished within its deadline"),
                            "http",
                            None,
                        )
                    return
                protocol.receive_data(data)
                continue
            if isinstance(event, HttpRefusal):
                self._stats.http_requests += 1
                self._reject(event.rejection, "http", None)
                if event.reply:
                    await connection.send(event.reply)
                if event.close:
                    return
                continue
            if isinstance(event, HttpHook):
                self._stats.http_requests += 1
                if self._gate is not None and self._gate.closed():
                    self._stats.backpressure_waits += 1
                    await self._gate.wait()
                refused = self._deliver(event.message, sink)
                if refused is not None:
                    self._reject(refused, "http", None)
                    reply = protocol.respond(422, {"error": refused.detail})
                else:
                    self._stats.http_delivered += 1
                    reply = protocol.respond(200, {})
                await connection.send(reply)
                continue
            return  # HttpClosed
