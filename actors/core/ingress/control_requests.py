"""Control-socket requests, sans-IO: one JSON line in, a typed request or a specific refusal out.

The control server (:mod:`actors.sources.control_server`) reads one line per connection and
hands it here; ``paneward status`` and ``paneward watch`` write it
(:func:`actors.cli.control_client.request_lines`). Total: :func:`take_request` and
:func:`parse_request` return a value for every input -- never an exception (a deeply nested
line would make a recursive decoder raise ``RecursionError``: the depth is checked first, with
the hook socket's rule, :func:`actors.core.ingress.frames.check_bytes`). The fuzz test in
``tests/sources/test_control_server.py`` holds them to that.

Requests (unknown fields are ignored, so newer clients can add some):

* ``{"op": "status", "format": FORM, "all": BOOL}`` -- ``FORM`` one of :data:`STATUS_FORMS`
  (default ``json``: everything), ``all`` also the sessions the table hides (default false).
* ``{"op": "watch", "since": SEQ | null, "since_ms": MS | null, "snapshot": BOOL, "fleet":
  BOOL}`` -- ``SEQ`` a non-negative integer; ``since_ms`` (epoch milliseconds, when ``since``
  is not given) the journal from the first transition whose evidence time is at or after it;
  ``snapshot`` first the subscription's snapshot (default false); ``fleet`` the stream a fleet
  follower reads: a ``Daemon`` line (who answers), the journal after ``SEQ``, the snapshot,
  then live (default false).
* Both take ``"host": NAME`` (only that fleet host's sessions) or ``"local": true`` (only this
  machine's): ``--host`` and ``--local`` of ``status`` and ``watch``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Final, Literal

import msgspec

from actors.core.ingress.frames import check_bytes

__all__ = [
    "MAX_REQUEST_BYTES",
    "STATUS_FORMS",
    "BadRequest",
    "BadRequestReason",
    "ControlRequest",
    "StatusRequest",
    "WatchRequest",
    "parse_request",
    "take_request",
]

#: The longest request line accepted (a request is a few dozen bytes).
MAX_REQUEST_BYTES: Final = 64 * 1024

BadRequestReason = Literal[
    "too_long", "truncated", "nul_byte", "invalid_utf8", "too_deep", "bad_json", "not_object",
    "unknown_op", "bad_field",
]


@dataclass(frozen=True, slots=True)
class BadRequest:
    """Why a request line was refused: ``reason`` is counted, ``detail`` is sent back."""

    reason: BadRequestReason
    detail: str


StatusForm = Literal["json", "table", "activities", "panes", "counters", "queue", "hosts"]
#: What a status request may ask for: everything (``json``), the rendered table, the
#: activities, the pane views, the counters, the attention queue's items that have a pane, the
#: fleet hosts' health (``null`` without a fleet).
STATUS_FORMS: Final[tuple[str, ...]] = (
    "json", "table", "activities", "panes", "counters", "queue", "hosts"
)


#: A fleet host's name (``--host NAME``): the sessions of that host only; ``local``: this
#: machine's only (docs/fleet.md).
HostName = Annotated[str, msgspec.Meta(min_length=1, max_length=255)]


class StatusRequest(msgspec.Struct, frozen=True, tag="status", tag_field="op"):
    """Every session's activity and every actor's counters, in the form asked, as one line."""

    format: StatusForm = "json"
    all: bool = False
    host: HostName | None = None
    local: bool = False


class WatchRequest(msgspec.Struct, frozen=True, tag="watch", tag_field="op"):
    """Transitions from now on; with ``since``, first the journal's after that seq; with
    ``since_ms`` (and no ``since``), first the journal's from the first transition whose
    evidence time is at or after it (``paneward top``'s last hour)."""

    since: Annotated[int, msgspec.Meta(ge=0)] | None = None
    snapshot: bool = False
    since_ms: Annotated[int, msgspec.Meta(ge=0)] | None = None
    fleet: bool = False
    host: HostName | None = None
    local: bool = False


ControlRequest = StatusRequest | WatchRequest
_DECODER: Final = msgspec.json.Decoder(ControlRequest)
_OPS: Final = ("status", "watch")


def take_request(buffer: bytes, *, eof: bool) -> bytes | BadRequest | None:
    """The request line in ``buffer`` (without its newline), ``None`` if more must be read.

    A line over :data:`MAX_REQUEST_BYTES` is refused as soon as that many bytes are buffered;
    at end of stream an unterminated non-empty line is taken as the request (``printf`` without
    a newline), an empty stream is ``truncated``.
    """
    newline = buffer.find(b"\n", 0, MAX_REQUEST_BYTES + 1)
    if newline >= 0:
        return buffer[:newline]
    if len(buffer) > MAX_REQUEST_BYTES:
        return BadRequest("too_long", f"request line over {MAX_REQUEST_BYTES} bytes")
    if eof:
        if buffer.strip():
            return buffer
        return BadRequest("truncated", "no request before end of stream")
    return None


def parse_request(line: bytes) -> ControlRequest | BadRequest:
    """Decode one request line (see the module docstring for the shapes)."""
    if len(line) > MAX_REQUEST_BYTES:
        return BadRequest("too_long", f"request line over {MAX_REQUEST_BYTES} bytes")
    problem = check_bytes(line)
    if problem is not None:
        reason: BadRequestReason = (
            problem.reason if problem.reason in ("nul_byte", "invalid_utf8") else "too_deep"
        )
        return BadRequest(reason, problem.detail)
    try:
        return _DECODER.decode(line)
    except msgspec.ValidationError as exc:
        return _classify(line, str(exc))
    except msgspec.DecodeError as exc:
        return BadRequest("bad_json", f"malformed JSON: {exc}")
    except RecursionError:  # belt and braces: check_bytes bounded the depth
        return BadRequest("too_deep", "JSON nested too deeply to decode")


def _classify(line: bytes, detail: str) -> BadRequest:
    try:
        value = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return BadRequest("bad_json", f"malformed JSON: {detail}")
    if not isinstance(value, dict):
        return BadRequest("not_object", "request must be a JSON object")
    op = value.get("op")
    if op not in _OPS:
        shown = repr(op)[:40] if op is None or isinstance(op, str | int | float) else (
            type(op).__name__
        )
        return BadRequest("unknown_op", f"unknown op {shown} (expected one of {', '.join(_OPS)})")
    if op == "watch" and "since" in value and not _is_seq(value["since"]):
        return BadRequest("bad_field", "since must be a non-negative integer or null")
    if op == "watch" and "since_ms" in value and not _is_seq(value["since_ms"]):
        return BadRequest("bad_field", "since_ms must be a non-negative integer or null")
    if "snapshot" in value and not isinstance(value["snapshot"], bool):
        return BadRequest("bad_field", "snapshot must be true or false")
    if "fleet" in value and not isinstance(value["fleet"], bool):
        return BadRequest("bad_field", "fleet must be true or false")
    if "local" in value and not isinstance(value["local"], bool):
        return BadRequest("bad_field", "local must be true or false")
    if value.get("host") is not None and not (
        isinstance(value["host"], str) and 1 <= len(value["host"]) <= 255
    ):
        return BadRequest("bad_field", "host must be a host's name (1 to 255 characters)")
    if op == "status" and value.get("format", "json") not in STATUS_FORMS:
        shown = repr(value["format"])[:40]
        expected = ", ".join(STATUS_FORMS)
        return BadRequest("bad_field", f"unknown status format {shown} (expected: {expected})")
    if op == "status" and not isinstance(value.get("all", False), bool):
        return BadRequest("bad_field", "all must be true or false")
    return BadRequest("bad_field", detail[:200])


def _is_seq(value: object) -> bool:
    return value is None or (type(value) is int and value >= 0)
