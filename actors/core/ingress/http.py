"""Claude Code ``http`` hooks, sans-IO: an :mod:`h11` server connection and the decisions on it.

Driven by the hook listener's http connections (:mod:`actors.sources.hook_listener`), in the
mqttproto style: the listener feeds the bytes it received (:meth:`HttpHookProtocol.receive_data`)
and acts on each event :meth:`HttpHookProtocol.next_event` returns -- read more, send a refusal,
or deliver a hook and send :meth:`HttpHookProtocol.respond`'s bytes. HTTP/1.1 itself (request
line, header syntax, ``Content-Length``, keep-alive, pipelining) is h11's; what is paneward's is
:func:`check_http_request` (token, route, method, length) and :func:`http_message`. A body is
decoded ONCE into a ``NotifyHook``, with the same byte rules as a frame from the Unix socket.

Total: whatever bytes arrive, :meth:`HttpHookProtocol.next_event` returns an event; a malformed
request is an :class:`HttpRefusal` with a specific, counted reason (the fuzz test in
``tests/sources/test_hook_listener.py`` holds it to that), never an exception.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import h11
import msgspec

import messages
from actors.core.ingress.frames import MAX_FRAME_BYTES, Rejection, check_bytes
from actors.core.session.harness import HookIngress
from messages.common import Harness

__all__ = [
    "MAX_HEAD_BYTES",
    "TOKEN_HEADER",
    "HttpClosed",
    "HttpEvent",
    "HttpHook",
    "HttpHookProtocol",
    "HttpRefusal",
    "HttpReply",
    "NeedData",
    "RequestHead",
    "check_http_request",
    "http_message",
    "http_response",
]

MAX_HEAD_BYTES: Final = 16 * 1024
#: The header carrying the per-install token (lower case: header names are case-insensitive).
TOKEN_HEADER: Final = "x-paneward-token"
#: Longest Content-Length value looked at (MAX_FRAME_BYTES has 7 digits; leading zeros aside,
#: anything longer is too large, and ``int()`` of thousands of digits is refused by Python).
_MAX_LENGTH_DIGITS: Final = 12


@dataclass(frozen=True, slots=True)
class RequestHead:
    """A request line and its headers (names lower-cased; a repeated header's last value)."""

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


@dataclass(frozen=True, slots=True)
class HttpReply:
    """What to answer before reading the body: an error, or how many body bytes to read."""

    status: int
    rejection: Rejection | None = None
    harness: Harness | None = None
    content_length: int = 0


def check_http_request(head: RequestHead, token: str, routes: Mapping[str, Harness]) -> HttpReply:
    """Decide on a request from its head alone: 401/404/405/411/413/501, or read the body.

    ``routes`` are the harness ids served under ``/hook/<harness>`` (harnesses with hooks).
    ``Content-Length`` is h11's to check for syntax (ASCII digits only, one value); this
    bounds it.
    """
    supplied = head.headers.get(TOKEN_HEADER, "")
    if not hmac.compare_digest(supplied.encode("utf-8", "replace"), token.encode()):
        reason = "missing" if not supplied else "wrong"
        return HttpReply(401, Rejection("http_unauthorized", f"{reason} {TOKEN_HEADER} header"))
    prefix, _, name = head.target.partition("?")[0].rpartition("/")
    harness = routes.get(name) if prefix == "/hook" else None
    if harness is None:
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
    digits = raw_length.lstrip("0") or "0"
    if not (raw_length.isascii() and raw_length.isdigit()):
        return HttpReply(400, Rejection("http_bad_request", "bad Content-Length"))
    length = int(digits) if len(digits) <= _MAX_LENGTH_DIGITS else MAX_FRAME_BYTES + 1
    if length > MAX_FRAME_BYTES:
        return HttpReply(
            413,
            Rejection(
                "http_too_large",
                f"body of {digits if len(digits) <= _MAX_LENGTH_DIGITS else 'over 10**12'} "
                f"bytes (limit {MAX_FRAME_BYTES})",
            ),
        )
    return HttpReply(200, harness=harness, content_length=length)


# The body is decoded ONCE, straight into the payload type; the NotifyHook around it is made of
# fields that are valid by construction (a routed harness id, the clock), so nothing downstream
# validates it again.
_PAYLOAD: Final = msgspec.json.Decoder(dict[str, Any])


def http_message(harness: Harness, body: bytes, now_ms: int) -> messages.NotifyHook | Rejection:
    """Turn an http hook body into a ``NotifyHook`` (same byte rules as the socket)."""
    problem = check_bytes(body)
    if problem is not None:
        return problem
    try:
        payload = _PAYLOAD.decode(body)
    except msgspec.ValidationError as exc:
        return Rejection("http_not_object", f"body is not a JSON object: {exc}")
    except msgspec.DecodeError as exc:
        return Rejection("bad_json", f"malformed JSON body: {exc}")
    except RecursionError:  # belt and braces: check_bytes bounds the depth
        return Rejection("too_deep", "JSON nested too deeply to decode")
    return messages.NotifyHook(
        harness=harness, payload=payload, at_ms=now_ms, observed_at_ms=now_ms
    )


_STATUS_TEXT: Final = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Content Too Large",
    422: "Unprocessable Content",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
    503: "Service Unavailable",
}


def http_response(status: int, body: dict[str, Any], *, keep_alive: bool) -> bytes:
    """A complete response (JSON body); used where the connection closes after it."""
    payload = json.dumps(body, separators=(",", ":")).encode()
    head = (
        f"HTTP/1.1 {status} {_STATUS_TEXT.get(status, 'Error')}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return head.encode("ascii") + payload


# ---------------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class NeedData:
    """Read more bytes (or end of stream) and feed them with ``receive_data``."""


@dataclass(frozen=True, slots=True)
class HttpHook:
    """A complete, authorized hook request: deliver ``message``, then send
    :meth:`HttpHookProtocol.respond`'s bytes."""

    message: messages.NotifyHook


@dataclass(frozen=True, slots=True)
class HttpRefusal:
    """A refused request: count ``rejection``, send ``reply``, close if ``close``."""

    rejection: Rejection
    reply: bytes
    close: bool


@dataclass(frozen=True, slots=True)
class HttpClosed:
    """The connection is over (the peer closed between requests, or after a refusal)."""


HttpEvent = NeedData | HttpHook | HttpRefusal | HttpClosed
_NEED_DATA: Final = NeedData()
_CLOSED: Final = HttpClosed()


class HttpHookProtocol:
    """One http hook connection's protocol state (sans-IO; an :class:`h11.Connection`).

    Used by one task of the hook listener: ``receive_data`` what arrived (``b""`` at end of
    stream), then ``next_event`` until it says :class:`NeedData` or :class:`HttpClosed`. After an
    :class:`HttpHook` the caller delivers it and calls :meth:`respond` with the status (200, or
    422 when its sink refused it) before asking for the next event. Pipelined requests are
    served in order. :attr:`authenticated` turns True with the first request that carried the
    right token (unauthenticated connections are the first to go when the listener sheds load);
    :attr:`between_requests` says nothing of a next request has arrived yet.
    """

    def __init__(self, token: str, ingress: HookIngress, *, max_head: int = MAX_HEAD_BYTES):
        self._token = token
        self._ingress = ingress
        self._conn = h11.Connection(h11.SERVER, max_incomplete_event_size=max_head)
        self._body = bytearray()
        self._reply: HttpReply | None = None
        self._keep_alive = True
        self._closed = False
        self._pending: messages.NotifyHook | None = None
        self.authenticated = False

    @property
    def between_requests(self) -> bool:
        """True when no byte of a next request is buffered (keep-alive idle)."""
        return (
            not self._closed
            and self._conn.their_state is h11.IDLE
            and not self._conn.trailing_data[0]
        )

    @property
    def closed(self) -> bool:
        return self._closed

    def receive_data(self, data: bytes) -> None:
        """Feed what was read; ``b""`` is the end of the stream."""
        if self._closed:
            return
        try:
            self._conn.receive_data(data)
        except h11.RemoteProtocolError:
            # Data after the peer's end of stream: nothing more can be parsed anyway.
            self._closed = True

    def next_event(self, now_ms: int) -> HttpEvent:
        """The next thing to do (never raises: malformed input is an :class:`HttpRefusal`)."""
        if self._closed:
            return _CLOSED
        if self._pending is not None:
            raise RuntimeError("respond() to the previous HttpHook first")
        while True:
            try:
                event = self._conn.next_event()
            except h11.RemoteProtocolError as exc:
                status = exc.error_status_hint
                if status == 431:
                    detail = f"request head over {MAX_HEAD_BYTES // 1024} KiB"
                else:
                    status, detail = 400, f"malformed request: {exc}"
                return self._refuse(status, Rejection("http_bad_request", detail[:200]))
            except Exception as exc:  # h11 is total too; if it ever is not, stay total
                return self._refuse(400, Rejection("http_bad_request", f"malformed: {exc!r}"))
            if event is h11.NEED_DATA:
                return _NEED_DATA
            if event is h11.PAUSED:
                # Both sides done with a keep-alive exchange: start the next one.
                if self._conn.our_state is h11.DONE and self._conn.their_state is h11.DONE:
                    self._conn.start_next_cycle()
                    continue
                return self._end()
            if isinstance(event, h11.ConnectionClosed):
                return self._end(truncated=self._conn.their_state not in (h11.IDLE, h11.DONE,
                                                                          h11.CLOSED,
                                                                          h11.MUST_CLOSE))
            if isinstance(event, h11.Request):
                refusal = self._head(event)
                if refusal is not None:
                    return refusal
                continue
            if isinstance(event, h11.Data):
                assert self._reply is not None
                self._body += event.data
                if len(self._body) > self._reply.content_length:  # pragma: no cover - h11 bounds
                    return self._refuse(400, Rejection("http_bad_request", "body too long"))
                continue
            if isinstance(event, h11.EndOfMessage):
                return self._complete(now_ms)
            continue  # InformationalResponse etc. never come to a server

    def respond(self, status: int, body: dict[str, Any]) -> bytes:
        """The response to the last :class:`HttpHook` (200, or 422 when it was refused)."""
        if self._pending is None:
            raise RuntimeError("respond() without an HttpHook to answer")
        self._pending = None
        return self._send(status, body)

    # -- internals -------------------------------------------------------------------------

    def _head(self, request: h11.Request) -> HttpRefusal | None:
        headers: dict[str, str] = {}
        for name, value in request.headers:
            headers[name.decode("latin-1")] = value.decode("latin-1")
        head = RequestHead(
            request.method.decode("latin-1"),
            request.target.decode("latin-1"),
            "HTTP/" + request.http_version.decode("latin-1"),
            headers,
        )
        self._keep_alive = head.keep_alive
        reply = check_http_request(head, self._token, self._ingress.routes)
        if reply.rejection is not None:
            return self._refuse(reply.status, reply.rejection)
        self.authenticated = True
        self._reply = reply
        self._body.clear()
        return None

    def _complete(self, now_ms: int) -> HttpEvent:
        reply = self._reply
        assert reply is not None and reply.harness is not None
        body = bytes(self._body)
        self._body.clear()
        self._reply = None
        result = http_message(reply.harness, body, now_ms)
        if not isinstance(result, Rejection):
            why = self._ingress.http_refusal(result)
            if why is None:
                self._pending = result
                return HttpHook(result)
            result = Rejection("http_session_start", why)
        status = 422 if result.reason == "http_session_start" else 400
        # The whole request was read: the connection may carry on.
        return HttpRefusal(
            result, self._send(status, {"error": result.detail}), close=self._closed
        )

    def _send(self, status: int, body: dict[str, Any]) -> bytes:
        payload = json.dumps(body, separators=(",", ":")).encode()
        keep = self._keep_alive
        headers = [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(payload))),
            ("Connection", "keep-alive" if keep else "close"),
        ]
        try:
            data = self._conn.send(h11.Response(status_code=status, headers=headers,
                                                reason=_STATUS_TEXT.get(status, "Error")))
            data = (data or b"") + (self._conn.send(h11.Data(data=payload)) or b"")
            data += self._conn.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:  # pragma: no cover - our own state machine is in order
            self._closed = True
            return http_response(status, body, keep_alive=False)
        if self._conn.our_state is h11.MUST_CLOSE:
            self._closed = True
        return data

    def _refuse(self, status: int, rejection: Rejection) -> HttpRefusal:
        """Refuse before the body was read: answer and close (the rest cannot be framed)."""
        self._closed = True
        return HttpRefusal(
            rejection, http_response(status, {"error": rejection.detail}, keep_alive=False), True
        )

    def _end(self, *, truncated: bool = False) -> HttpEvent:
        self._closed = True
        if truncated:
            return HttpRefusal(Rejection("http_bad_request", "truncated request"), b"", True)
        return _CLOSED

