"""The hook listener: the daemon's end of ``paneward hook`` (Unix socket) and Claude ``http`` hooks.

Who sends what:

- ``paneward hook`` (one connection per hook event), ``paneward inject`` and any local producer
  connect to the Unix socket (directory 0700, socket 0600) and write newline-delimited JSON
  frames, each ONE inbound message exactly as :func:`messages.encode` shapes it.
- Claude Code ``http`` hooks ``POST /hook/<harness>`` to the optional loopback listener with the
  per-install token in ``X-Paneward-Token``; the body (the hook JSON) becomes a ``NotifyHook``.

Every frame is decoded exactly once (:func:`actors.core.frames.check_frame`: decoding is the
validation), restamped with ``observed_at_ms`` (now) and handed to ``host.deliver_nowait``,
which routes it without validating it again; the supervisor owns normalization. Every refusal
-- a peer of another uid, an oversize frame, invalid UTF-8, a NUL byte, nesting deeper than
:data:`~actors.core.frames.MAX_DEPTH`, bad JSON, an unknown ``type``, wrong field types, a
message the host refuses, a bad http token -- is counted by reason and recorded
(:meth:`HookListener.statistics`), and changes nothing else: the connection carries on at the
next newline and later valid frames still go through.

The decisions are sans-IO in :mod:`actors.core.frames` and :mod:`actors.core.http`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import anyio
import anyio.abc
import msgspec
from anyio.abc import SocketAttribute

import messages
from actors.core import paths
from actors.core.clock import now_ms
from actors.core.frames import (
    MAX_FRAME_BYTES,
    FrameSplitter,
    Oversize,
    Rejection,
    RejectReason,
    check_frame,
    restamp,
)
from actors.core.harness import HookIngress
from actors.core.http import (
    MAX_HEAD_BYTES,
    check_http_request,
    http_message,
    http_response,
    parse_request_head,
)
from actors.runtime.mailbox import EvidenceSink

__all__ = [
    "HookListener",
    "HookListenerError",
    "HookListenerStatistics",
    "RejectionRecord",
    "load_http_token",
]

MAX_RECENT_REJECTIONS: Final = 64
MAX_CONNECTIONS: Final = 512


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
    ``recent_rejections`` (the last :data:`MAX_RECENT_REJECTIONS`), ``socket_path`` and
    ``http_port`` are filled in by :meth:`HookListener.statistics`; the rest monotonic.
    """

    connections_accepted: int = 0
    connections_open: int = 0
    frames_received: int = 0
    frames_delivered: int = 0
    blank_lines: int = 0
    http_requests: int = 0
    http_delivered: int = 0
    rejected: dict[str, int] = msgspec.field(default_factory=dict)
    recent_rejections: tuple[RejectionRecord, ...] = ()
    socket_path: str | None = None
    http_port: int | None = None

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())


def load_http_token(path: Path) -> str:
    """Read the http hook token, refusing a file others could read (blocking: use a thread).

    :raises HookListenerError: missing, empty, not ours, or group/world accessible.
    """
    try:
        st = path.stat()
        text = path.read_text("utf-8").strip()
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


def _prepare_socket_path(path: Path) -> None:
    """Create the private directory and clear a stale socket (blocking: run in a thread)."""
    directory = path.parent
    with contextlib.suppress(FileExistsError):
        directory.mkdir(parents=True, mode=0o700)
    st = directory.stat()
    if st.st_uid != os.getuid():
        raise HookListenerError(
            f"socket directory {directory} belongs to uid {st.st_uid}, not {os.getuid()}"
        )
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(directory, 0o700)
    try:
        existing = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(existing.st_mode):
        raise HookListenerError(f"{path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.setblocking(False)
    try:
        probe.connect(os.fspath(path))
    except ConnectionRefusedError:
        path.unlink(missing_ok=True)  # stale: its daemon is gone
        return
    except BlockingIOError:
        pass  # the backlog is full: someone is listening
    finally:
        probe.close()
    raise HookListenerError(f"another paneward daemon is already listening on {path}")


def _peer_credentials(stream: anyio.abc.SocketStream) -> tuple[int, int]:
    sock = stream.extra(SocketAttribute.raw_socket)
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    return pid, uid


# ---------------------------------------------------------------------------------------------
# The actor


class HookListener:
    """Actor: serve the hook socket (and optionally loopback http hooks) into a sink.

    ``socket_path`` defaults to :func:`actors.core.paths.socket_path`; ``http_port`` ``None`` leaves
    http off (``0`` picks a free port: see :attr:`http_port` once :meth:`wait_listening`
    returned); the token is read from ``token_path`` (default
    :func:`actors.core.paths.http_token_path`) at start.
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
    ) -> None:
        self._hooks = hooks
        self._socket_path = socket_path
        self._http_requested_port = http_port
        self._http_host = http_host
        self._token_path = token_path
        self._clock_ms = clock_ms
        self._token = ""
        self._listening = anyio.Event()
        self._bound_socket: Path | None = None
        self._bound_port: int | None = None
        self._uid = os.getuid()
        self._stats = HookListenerStatistics()
        self._recent: deque[RejectionRecord] = deque(maxlen=MAX_RECENT_REJECTIONS)

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
        return msgspec.structs.replace(
            self._stats,
            rejected=dict(self._stats.rejected),
            recent_rejections=tuple(self._recent),
            socket_path=None if self._bound_socket is None else os.fspath(self._bound_socket),
            http_port=self._bound_port,
        )

    async def run(self, sink: EvidenceSink) -> None:
        """Serve until cancelled; removes its socket on the way out.

        :raises HookListenerError: when it cannot start (see the class docstring).
        """
        path = self._socket_path if self._socket_path is not None else Path(paths.socket_path())
        await anyio.to_thread.run_sync(_prepare_socket_path, path)
        if self._http_requested_port is not None:
            token_path = self._token_path or Path(paths.http_token_path())
            self._token = await anyio.to_thread.run_sync(load_http_token, token_path)
        unix_listener = await anyio.create_unix_listener(path, mode=0o600)
        identity = os.stat(path).st_ino
        try:
            async with anyio.create_task_group() as tg:
                self._bound_socket = path
                tg.start_soon(self._serve_unix, unix_listener, sink)
                if self._http_requested_port is not None:
                    tcp = await anyio.create_tcp_listener(
                        local_host=self._http_host, local_port=self._http_requested_port
                    )
                    self._bound_port = tcp.extra(SocketAttribute.local_port)
                    tg.start_soon(self._serve_http, tcp, sink)
                self._listening.set()
        finally:
            with anyio.CancelScope(shield=True):
                await unix_listener.aclose()
            # Remove the socket only if it is still ours (a successor may have replaced it).
            try:
                if os.stat(path).st_ino == identity:
                    os.unlink(path)
            except OSError:
                pass

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

    async def _serve_unix(
        self, listener: anyio.abc.SocketListener, sink: EvidenceSink
    ) -> None:
        async with listener:
            await listener.serve(lambda stream: self._unix_connection(stream, sink))

    async def _unix_connection(self, stream: anyio.abc.SocketStream, sink: EvidenceSink) -> None:
        async with stream:
            try:
                peer_pid, peer_uid = _peer_credentials(stream)
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
            stats = self._stats
            if stats.connections_open >= MAX_CONNECTIONS:
                self._reject(
                    Rejection(
                        "too_many_connections", f"{stats.connections_open} connections open"
                    ),
                    "unix",
                    peer_pid,
                )
                return
            stats.connections_accepted += 1
            stats.connections_open += 1
            try:
                splitter = FrameSplitter()
                while True:
                    try:
                        chunk = await stream.receive(1 << 18)
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        break
                    for item in splitter.feed(chunk):
                        self._frame(item, sink, peer_pid)
                for item in splitter.close():
                    self._frame(item, sink, peer_pid)
            finally:
                stats.connections_open -= 1

    def _frame(self, item: bytes | Oversize, sink: EvidenceSink, peer_pid: int) -> None:
        if isinstance(item, Oversize):
            self._stats.frames_received += 1
            self._reject(
                Rejection("oversize", f"frame of {item.size} bytes (limit {MAX_FRAME_BYTES})"),
                "unix",
                peer_pid,
            )
            return
        if not item.strip():
            self._stats.blank_lines += 1
            return
        self._stats.frames_received += 1
        result = check_frame(item)
        if isinstance(result, Rejection):
            self._reject(result, "unix", peer_pid)
            return
        refused = self._deliver(result, sink)
        if refused is not None:
            self._reject(refused, "unix", peer_pid)
        else:
            self._stats.frames_delivered += 1

    async def _serve_http(
        self, listener: anyio.abc.Listener[anyio.abc.SocketStream], sink: EvidenceSink
    ) -> None:
        async with listener:
            await listener.serve(lambda stream: self._http_connection(stream, sink))

    async def _http_connection(self, stream: anyio.abc.SocketStream, sink: EvidenceSink) -> None:
        async with stream:
            buffer = bytearray()
            try:
                while await self._http_exchange(stream, buffer, sink):
                    pass
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return

    async def _http_exchange(
        self, stream: anyio.abc.SocketStream, buffer: bytearray, sink: EvidenceSink
    ) -> bool:
        """Serve one request; ``True`` to keep the connection for another."""
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            if len(buffer) > MAX_HEAD_BYTES:
                self._stats.http_requests += 1
                self._reject(
                    Rejection("http_bad_request", "request head over 16 KiB"), "http", None
                )
                await stream.send(http_response(431, {"error": "head too large"}, keep_alive=False))
                return False
            try:
                buffer += await stream.receive(1 << 16)
            except anyio.EndOfStream:
                if buffer.strip():
                    self._stats.http_requests += 1
                    self._reject(Rejection("http_bad_request", "truncated request"), "http", None)
                return False
        self._stats.http_requests += 1
        head = parse_request_head(bytes(buffer[:end]))
        del buffer[: end + 4]
        if isinstance(head, Rejection):
            self._reject(head, "http", None)
            await stream.send(http_response(400, {"error": head.detail}, keep_alive=False))
            return False
        decision = check_http_request(head, self._token, self._hooks.routes)
        if decision.rejection is not None:
            self._reject(decision.rejection, "http", None)
            await stream.send(
                http_response(
                    decision.status, {"error": decision.rejection.detail}, keep_alive=False
                )
            )
            return False
        while len(buffer) < decision.content_length:
            buffer += await stream.receive(1 << 18)
        body = bytes(buffer[: decision.content_length])
        del buffer[: decision.content_length]
        assert decision.harness is not None
        result: messages.NotifyHook | Rejection = http_message(
            self._hooks.routes[decision.harness], body, self._clock_ms()
        )
        if not isinstance(result, Rejection):
            refusal = self._hooks.http_refusal(result)
            if refusal is not None:
                result = Rejection("http_session_start", refusal)
        if isinstance(result, Rejection):
            rejection = result
            self._reject(rejection, "http", None)
            status = 422 if rejection.reason == "http_session_start" else 400
            await stream.send(
                http_response(status, {"error": rejection.detail}, keep_alive=head.keep_alive)
            )
            return head.keep_alive
        refused = self._deliver(result, sink)
        if refused is not None:
            self._reject(refused, "http", None)
            await stream.send(
                http_response(422, {"error": refused.detail}, keep_alive=head.keep_alive)
            )
            return head.keep_alive
        self._stats.http_delivered += 1
        await stream.send(http_response(200, {}, keep_alive=head.keep_alive))
        return head.keep_alive
