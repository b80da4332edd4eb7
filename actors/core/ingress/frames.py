"""Hook-socket frames, sans-IO: split a byte stream into lines, check and decode each once.

The one ingress for bytes (docs/design.md §2): :func:`check_frame` decodes a frame into a valid
inbound message with :func:`messages.decode_inbound` (decoding is the validation) or says precisely
why it is refused. Used by the hook listener (:mod:`actors.sources.hook_listener`) and the http
path (:mod:`actors.core.ingress.http`); nothing downstream validates the message again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

import msgspec

import messages

__all__ = [
    "MAX_DEPTH",
    "MAX_FRAME_BYTES",
    "FrameSplitter",
    "Oversize",
    "RejectReason",
    "Rejection",
    "check_bytes",
    "check_frame",
    "classify",
    "nesting_depth",
    "restamp",
]

MAX_FRAME_BYTES: Final = 1 << 20
# Deeper JSON is refused at the edge: msgspec raises RecursionError (not a DecodeError) on
# very deep input, and every consumer downstream (normalizers, store, watch) would recurse too.
# Real hook payloads nest < 10 levels.
MAX_DEPTH: Final = 64


RejectReason = Literal[
    "peer_uid",
    "timeout",
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


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why one frame or request was refused (``detail`` is for humans, ``reason`` is counted)."""

    reason: RejectReason
    detail: str


@dataclass(frozen=True, slots=True)
class Oversize:
    """A frame longer than the limit; ``size`` is how many bytes were skipped."""

    size: int




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


def classify(exc: messages.MessageError) -> RejectReason:
    text = str(exc)
    if text.startswith("malformed JSON"):
        return "bad_json"
    if "Invalid value" in text and "`$.type`" in text:
        return "unknown_type"
    return "invalid_message"


def check_bytes(data: bytes) -> Rejection | None:
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
    problem = check_bytes(frame)
    if problem is not None:
        return problem
    try:
        return messages.decode_inbound(frame)
    except messages.MessageError as exc:
        reason = classify(exc)
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

