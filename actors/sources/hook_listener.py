"""The hook listener: the daemon's end of ``paneward hook`` (Unix socket) and Claude ``http`` hooks.

Who sends what:

- ``paneward hook`` (one connection per hook event), ``paneward inject`` and any local producer
  connect to the Unix socket (directory 0700, socket 0600) and write newline-delimited JSON
  frames, each ONE inbound message exactly as :func:`messages.encode` shapes it.
- Claude Code ``http`` hooks ``POST /hook/<harness>`` to the optional loopback listener with the
  per-install token in ``X-Paneward-Token``; the body (the hook JSON) becomes a ``NotifyHook``.

Every accepted message is restamped with ``observed_at_ms`` (now) and handed to
``sink.inject_nowait``; the supervisor owns normalization. Every refusal -- a peer of another
uid, an oversize frame, invalid UTF-8, a NUL byte, nesting deeper than :data:`MAX_DEPTH`, bad
JSON, an unknown ``type``, wrong field types, a message the sink refuses, a bad http token -- is
counted by reason and recorded (:meth:`HookListener.statistics`), and changes nothing else: the
connection carries on at the next newline and later valid frames still go through.

The decisions (:class:`FrameSplitter`, :func:`check_frame`, :func:`parse_request_head`,
:func:`check_http_request`) are sans-IO and tested without an event loop.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import re
import socket
import stat
import struct
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal

import anyio
import anyio.abc
import msgspec
from anyio.abc import SocketAttribute

import messages
from actors.cli import paths
from actors.runtime.mailbox import EvidenceSink

__all__ = [
    "HOOK_HARNESSES",
    "HTTP_SKIPPED_EVENTS",
    "MAX_DEPTH",
    "MAX_FRAME_BYTES",
    "TOKEN_HEADER",
    "EvidenceSink",
    "FrameSplitter",
    "HookListener",
    "HookListenerError",
    "HookListenerStatistics",
    "HttpReply",
    "Oversize",
    "Rejection",
    "RejectionRecord",
    "RequestHead",
    "check_frame",
    "check_http_request",
    "load_http_token",
    "nesting_depth",
    "parse_request_head",
    "restamp",
]

MAX_FRAME_BYTES: Final = 1 << 20
# Deeper JSON is refused at the edge: msgspec raises RecursionError (not a DecodeError) on
# very deep input, and every consumer downstream (normalizers, store, watch) would recurse too.
# Real hook payloads nest < 10 levels.
MAX_DEPTH: Final = 64
MAX_HEAD_BYTES: Final = 16 * 1024
MAX_RECENT_REJECTIONS: Final = 64
MAX_CONNECTIONS: Final = 512
TOKEN_HEADER: Final = "x-paneward-token"
HOOK_HARNESSES: Final = frozenset({"claude-code", "codex", "cursor"})
# Claude Code never sends these over http (they need a command hook, which also carries
# CLAUDE_PID); one arriving over http is a misconfiguration or a forgery.
HTTP_SKIPPED_EVENTS: Final = frozenset({"SessionStart", "Setup"})

RejectReason = Literal[
    "peer_uid",
    "too_many_connections",
    "oversize",
    "nul_byte",
    "invalid_utf8",
    "too_deep",
    "bad_json",
    "unknown_type",
    "invalid_message",
    "refused_by_sink",
    "http_bad_request",
    "http_unauthorized",
    "http_not_found",
    "http_method",
    "http_length_required",
    "http_too_large",
    "http_not_object",
    "http_session_start",
]


class HookListenerError(messages.PanewardError):
    """The listener cannot start: socket in use, unsafe directory, missing/unsafe http token."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why one frame or request was refused (``detail`` is for humans, ``reason`` is counted)."""

    reason: RejectReason
    detail: str


@dataclass(frozen=True, slots=True)
class Oversize:
    """A frame longer than the limit; ``size`` is how many bytes were skipped."""

    size: int


@dataclass(frozen=True, slots=True)
class RejectionRecord:
    reason: RejectReason
    detail: str
    at_ms: int
    transport: Literal["unix", "http"]
    peer_pid: int | None


@dataclass(frozen=True, slots=True)
class HookListenerStatistics:
    """A snapshot of the listener's counters (``rejected`` maps reason -> count)."""

    connections_accepted: int
    connections_open: int
    frames_received: int
    frames_delivered: int
    blank_lines: int
    http_requests: int
    http_delivered: int
    rejected: Mapping[str, int]
    recent_rejections: tuple[RejectionRecord, ...]
    socket_path: str | None
    http_port: int | None

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())


# ---------------------------------------------------------------------------------------------
# Pure decisions


class FrameSplitter:
    """Split a byte stream into newline-terminated frames of at most ``max_frame`` bytes.

    A frame longer than the limit is reported once as :class:`Oversize` (never buffered past
    the limit) and the stream resynchronises at the next newline. A final frame without a
    newline is returned by :meth:`close`.
    """

    __slots__ = ("_buffer", "_discarded", "_discarding", "_max")

    def __init__(self, max_frame: int = MAX_FRAME_BYTES) -> None:
        self._max = max_frame
        self._buffer = bytearray()
        self._discarding = False
        self._discarded = 0

    def feed(self, data: bytes) -> list[bytes | Oversize]:
        out: list[bytes | Oversize] = []
        start = 0
        while True:
            newline = data.find(b"\n", start)
            if newline < 0:
                self._keep(data[start:])
                return out
            piece = data[start:newline]
            start = newline + 1
            if self._discarding:
                out.append(Oversize(self._discarded + len(piece)))
                self._discarding = False
                self._discarded = 0
                continue
            if self._buffer:
                self._buffer += piece
                frame = bytes(self._buffer)
                self._buffer.clear()
            else:
                frame = bytes(piece)
            out.append(Oversize(len(frame)) if len(frame) > self._max else frame)

    def _keep(self, rest: bytes) -> None:
        if self._discarding:
            self._discarded += len(rest)
            return
        self._buffer += rest
        if len(self._buffer) > self._max:
            self._discarding = True
            self._discarded = len(self._buffer)
            self._buffer.clear()

    def close(self) -> list[bytes | Oversize]:
        """End of stream: the unterminated tail, if any, as a last frame."""
        if self._discarding:
            self._discarding = False
            return [Oversize(self._discarded)]
        if self._buffer:
            frame = bytes(self._buffer)
            self._buffer.clear()
            return [frame]
        return []

    @property
    def buffered(self) -> int:
        return len(self._buffer)


_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = bytes.maketrans(b"", b"")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def nesting_depth(data: bytes, limit: int = MAX_DEPTH) -> int:
    """Maximum ``[``/``{`` nesting of JSON text (brackets inside strings do not count).

    Cheap for ordinary payloads: when the text holds no more than ``limit`` opening brackets
    the depth cannot exceed it and only the count is computed.
    """
    opening = data.count(b"[") + data.count(b"{")
    if opening <= limit:
        return opening
    brackets = _STRINGS.sub(b"", data).translate(_BRACKETS, _NOT_BRACKETS)
    depth = deepest = 0
    for byte in brackets:
        if byte in (0x5B, 0x7B):
            depth += 1
            if depth > deepest:
                deepest = depth
        else:
            depth -= 1
    return deepest


def _classify(exc: messages.MessageError) -> RejectReason:
    text = str(exc)
    if text.startswith("malformed JSON"):
        return "bad_json"
    if "Invalid value" in text and "`$.type`" in text:
        return "unknown_type"
    return "invalid_message"


def _check_bytes(data: bytes) -> Rejection | None:
    if b"\x00" in data:
        return Rejection("nul_byte", f"raw NUL byte at offset {data.index(0)}")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rejection("invalid_utf8", f"invalid UTF-8 at offset {exc.start}: {exc.reason}")
    depth = nesting_depth(data)
    if depth > MAX_DEPTH:
        return Rejection("too_deep", f"JSON nested {depth} levels deep (limit {MAX_DEPTH})")
    return None


def check_frame(frame: bytes) -> messages.Inbound | Rejection:
    """Decode one frame into an inbound message, or say precisely why it is refused."""
    if len(frame) > MAX_FRAME_BYTES:
        return Rejection("oversize", f"frame of {len(frame)} bytes (limit {MAX_FRAME_BYTES})")
    problem = _check_bytes(frame)
    if problem is not None:
        return problem
    try:
        return messages.decode_inbound(frame)
    except messages.MessageError as exc:
        reason = _classify(exc)
        if reason != "bad_json":
            # msgspec validates while it parses, so a truncated frame can fail on a field
            # first; only call it a typing problem when the text is well-formed JSON at all.
            try:
                msgspec.json.decode(frame)
            except msgspec.DecodeError as syntax:
                return Rejection("bad_json", f"malformed JSON for inbound message: {syntax}")
        return Rejection(reason, str(exc))
    except RecursionError:  # belt and braces: the depth check should have caught it
        return Rejection("too_deep", "JSON nested too deeply to decode")


def restamp(message: messages.Inbound, observed_at_ms: int) -> messages.Inbound:
    """Set ``observed_at_ms`` (when paneward saw it) on messages that carry one."""
    if "observed_at_ms" in type(message).__struct_fields__:
        return msgspec.structs.replace(message, observed_at_ms=observed_at_ms)
    return message


@dataclass(frozen=True, slots=True)
class RequestHead:
    method: str
    target: str
    version: str
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return connection == "keep-alive"
        return connection != "close"


def parse_request_head(head: bytes) -> RequestHead | Rejection:
    """Parse an HTTP/1.x request line and headers (``head`` excludes the blank line)."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        return Rejection("http_bad_request", "undecodable request head")
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0") or not parts[1]:
        return Rejection("http_bad_request", f"bad request line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or " " in name:
            return Rejection("http_bad_request", f"bad header line {line[:80]!r}")
        key = name.lower()
        if key in headers and key in ("content-length", TOKEN_HEADER, "transfer-encoding"):
            return Rejection("http_bad_request", f"duplicate {name} header")
        headers[key] = value.strip()
    return RequestHead(parts[0], parts[1], parts[2], headers)


@dataclass(frozen=True, slots=True)
class HttpReply:
    """What to answer before reading the body: an error, or how many body bytes to read."""

    status: int
    rejection: Rejection | None = None
    harness: str | None = None
    content_length: int = 0


def check_http_request(head: RequestHead, token: str) -> HttpReply:
    """Decide on a request from its head alone: 401/404/405/411/413/501, or read the body."""
    supplied = head.headers.get(TOKEN_HEADER, "")
    if not hmac.compare_digest(supplied.encode("utf-8", "replace"), token.encode()):
        reason = "missing" if not supplied else "wrong"
        return HttpReply(401, Rejection("http_unauthorized", f"{reason} {TOKEN_HEADER} header"))
    prefix, _, harness = head.target.partition("?")[0].rpartition("/")
    if prefix != "/hook" or harness not in HOOK_HARNESSES:
        return HttpReply(404, Rejection("http_not_found", f"no route {head.target[:80]!r}"))
    if head.method != "POST":
        return HttpReply(405, Rejection("http_method", f"{head.method[:16]} is not POST"))
    if "transfer-encoding" in head.headers:
        return HttpReply(
            501, Rejection("http_bad_request", "Transfer-Encoding is not supported")
        )
    raw_length = head.headers.get("content-length")
    if raw_length is None:
        return HttpReply(411, Rejection("http_length_required", "no Content-Length"))
    if not raw_length.isdigit():
        return HttpReply(400, Rejection("http_bad_request", "bad Content-Length"))
    length = int(raw_length)
    if length > MAX_FRAME_BYTES:
        return HttpReply(
            413,
            Rejection("http_too_large", f"body of {length} bytes (limit {MAX_FRAME_BYTES})"),
        )
    return HttpReply(200, harness=harness, content_length=length)


def http_message(harness: str, body: bytes, now_ms: int) -> messages.Inbound | Rejection:
    """Turn an http hook body into a ``NotifyHook`` (same rules as the socket)."""
    problem = _check_bytes(body)
    if problem is not None:
        return problem
    try:
        payload = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        return Rejection("bad_json", f"malformed JSON body: {exc}")
    if not isinstance(payload, dict):
        return Rejection("http_not_object", f"body is a JSON {type(payload).__name__}")
    event = payload.get("hook_event_name")
    if event in HTTP_SKIPPED_EVENTS:
        return Rejection(
            "http_session_start",
            f"{event} cannot be an http hook (Claude Code skips it and it needs CLAUDE_PID): "
            "keep a command hook (`paneward hook --harness claude-code`) for it",
        )
    try:
        return messages.revalidate(
            messages.NotifyHook(
                harness=harness,  # type: ignore[arg-type]  # checked against HOOK_HARNESSES
                payload=payload,
                at_ms=now_ms,
                observed_at_ms=now_ms,
            )
        )
    except messages.MessageError as exc:
        return Rejection("invalid_message", str(exc))


_STATUS_TEXT: Final = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Content Too Large",
    422: "Unprocessable Content",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
}


def http_response(status: int, body: dict[str, Any], *, keep_alive: bool) -> bytes:
    payload = json.dumps(body, separators=(",", ":")).encode()
    head = (
        f"HTTP/1.1 {status} {_STATUS_TEXT.get(status, 'Error')}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return head.encode("ascii") + payload


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

    ``socket_path`` defaults to :func:`actors.cli.paths.socket_path`; ``http_port`` ``None`` leaves
    http off (``0`` picks a free port: see :attr:`http_port` once :meth:`wait_listening`
    returned); the token is read from ``token_path`` (default
    :func:`actors.cli.paths.http_token_path`) at start.
    """

    def __init__(
        self,
        *,
        socket_path: Path | None = None,
        http_port: int | None = None,
        http_host: str = "127.0.0.1",
        token_path: Path | None = None,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
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
        self._accepted = 0
        self._open = 0
        self._frames = 0
        self._delivered = 0
        self._blank = 0
        self._http_requests = 0
        self._http_delivered = 0
        self._rejected: Counter[str] = Counter()
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
        return HookListenerStatistics(
            connections_accepted=self._accepted,
            connections_open=self._open,
            frames_received=self._frames,
            frames_delivered=self._delivered,
            blank_lines=self._blank,
            http_requests=self._http_requests,
            http_delivered=self._http_delivered,
            rejected=MappingProxyType(dict(self._rejected)),
            recent_rejections=tuple(self._recent),
            socket_path=None if self._bound_socket is None else os.fspath(self._bound_socket),
            http_port=self._bound_port,
        )

    async def run(self, sink: EvidenceSink) -> None:
        """Serve until cancelled; removes its socket on the way out.

        :raises HookListenerError: when it cannot start (see the class docstring).
        """
        path = self._socket_path if self._socket_path is not None else paths.socket_path()
        await anyio.to_thread.run_sync(_prepare_socket_path, path)
        if self._http_requested_port is not None:
            token_path = self._token_path or paths.http_token_path()
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
        self._rejected[rejection.reason] += 1
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
            sink.inject_nowait(restamp(message, self._clock_ms()))
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
            if self._open >= MAX_CONNECTIONS:
                self._reject(
                    Rejection("too_many_connections", f"{self._open} connections open"),
                    "unix",
                    peer_pid,
                )
                return
            self._accepted += 1
            self._open += 1
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
                self._open -= 1

    def _frame(self, item: bytes | Oversize, sink: EvidenceSink, peer_pid: int) -> None:
        if isinstance(item, Oversize):
            self._frames += 1
            self._reject(
                Rejection("oversize", f"frame of {item.size} bytes (limit {MAX_FRAME_BYTES})"),
                "unix",
                peer_pid,
            )
            return
        if not item.strip():
            self._blank += 1
            return
        self._frames += 1
        result = check_frame(item)
        if isinstance(result, Rejection):
            self._reject(result, "unix", peer_pid)
            return
        refused = self._deliver(result, sink)
        if refused is not None:
            self._reject(refused, "unix", peer_pid)
        else:
            self._delivered += 1

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
                self._http_requests += 1
                self._reject(
                    Rejection("http_bad_request", "request head over 16 KiB"), "http", None
                )
                await stream.send(http_response(431, {"error": "head too large"}, keep_alive=False))
                return False
            try:
                buffer += await stream.receive(1 << 16)
            except anyio.EndOfStream:
                if buffer.strip():
                    self._http_requests += 1
                    self._reject(Rejection("http_bad_request", "truncated request"), "http", None)
                return False
        self._http_requests += 1
        head = parse_request_head(bytes(buffer[:end]))
        del buffer[: end + 4]
        if isinstance(head, Rejection):
            self._reject(head, "http", None)
            await stream.send(http_response(400, {"error": head.detail}, keep_alive=False))
            return False
        decision = check_http_request(head, self._token)
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
        result = http_message(decision.harness, body, self._clock_ms())
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
        self._http_delivered += 1
        await stream.send(http_response(200, {}, keep_alive=head.keep_alive))
        return head.keep_alive
