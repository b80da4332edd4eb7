"""Claude Code ``http`` hooks, sans-IO: the request head, the decision, the reply bytes.

Driven by the hook listener's http connections (:mod:`actors.sources.hook_listener`). A body is
spliced into a ``NotifyHook`` frame and decoded ONCE by :func:`actors.core.frames.check_frame`,
exactly like a frame from the Unix socket.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

import messages
from actors.core.frames import MAX_FRAME_BYTES, Rejection, check_bytes
from messages.common import Harness

__all__ = [
    "MAX_HEAD_BYTES",
    "TOKEN_HEADER",
    "HttpReply",
    "RequestHead",
    "check_http_request",
    "http_message",
    "http_response",
    "parse_request_head",
]

MAX_HEAD_BYTES: Final = 16 * 1024
#: The header carrying the per-install token (lower case: header names are case-insensitive).
TOKEN_HEADER: Final = "x-paneward-token"


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


def check_http_request(head: RequestHead, token: str, routes: Mapping[str, Harness]) -> HttpReply:
    """Decide on a request from its head alone: 401/404/405/411/413/501, or read the body.

    ``routes`` are the harness ids served under ``/hook/<harness>`` (harnesses with hooks).
    """
    supplied = head.headers.get(TOKEN_HEADER, "")
    if not hmac.compare_digest(supplied.encode("utf-8", "replace"), token.encode()):
        reason = "missing" if not supplied else "wrong"
        return HttpReply(401, Rejection("http_unauthorized", f"{reason} {TOKEN_HEADER} header"))
    prefix, _, harness = head.target.partition("?")[0].rpartition("/")
    if prefix != "/hook" or harness not in routes:
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
    return messages.NotifyHook(
        harness=harness, payload=payload, at_ms=now_ms, observed_at_ms=now_ms
    )


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

