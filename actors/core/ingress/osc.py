"""Streaming parser for program-status escapes in terminal output (pure, no I/O).

Fed the bytes a program writes to its PTY, :class:`OscParser` extracts

- OSC 7501 program-status records ``ESC ] 7501 ; key=value:key=value… (BEL | ESC \\)``
  (Claude Code after its probe is answered, Codex unasked; fields ``state``, ``app``,
  ``id`` (child), ``kind``, ``progress``, base64 ``title`` and ``msg``),
- OSC 7501 probes ``ESC ] 7501 ; ? …`` (Claude asks whether the terminal understands them),
- OSC 0 / OSC 2 window titles, OSC 9 and OSC 777 ``notify`` notifications and OSC 9;4 progress,

and hands back the bytes to pass on to the outer terminal, with the status records (and,
if asked, the probes) removed. Everything else, including every malformed sequence, is passed
through byte for byte.

Cost: plain output is scanned with ``bytes.find(b"\\x1b")`` (memchr) only, output with escapes
with ``bytes.find(b"\\x1b]")`` (no per-byte Python loop);
CSI sequences, which make up most TUI output, never enter Python code. State between chunks
is at most one incomplete OSC sequence, bounded by :data:`MAX_SEQUENCE` bytes: a longer
unterminated "OSC" is not one we care about and is passed on as plain bytes.

Users: :mod:`actors.cli.wrap` (``paneward wrap``), :mod:`actors.sources.pty_status` (hosts
that own their PTYs) and :mod:`actors.sinks.tmux_output` (tmux's own output stream). Neither
this module nor its records know about sessions; turning a record into ``messages.ProgramStatus``
is :func:`actors.sources.pty_status.program_status`.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass, replace
from typing import Final, Literal

import msgspec

__all__ = [
    "MAX_FIELD_TEXT",
    "MAX_SEQUENCE",
    "PROBE_ANSWER",
    "PROGRAM_STATES",
    "OscNotification",
    "OscEvent",
    "OscParser",
    "OscStatistics",
    "OscProbe",
    "Progress",
    "StatusRecord",
    "Title",
    "parse_status_fields",
]

#: The longest OSC sequence (from ``ESC ]`` to its terminator) we parse. Claude cuts ``msg``
#: to 2048 characters and ``title`` to 192 before base64, so a real record is < 12 KiB.
MAX_SEQUENCE: Final = 16 * 1024
#: Decoded ``msg``/``title``/notification text is cut to this many characters
#: (``messages.common.MAX_TEXT_LEN``).
MAX_FIELD_TEXT: Final = 4096
#: What a terminal that understands OSC 7501 answers to the probe (Claude accepts any
#: ``OSC 7501`` reply whose data starts with ``?``, BEL or ST terminated).
PROBE_ANSWER: Final = b"\x1b]7501;?\x07"

PROGRAM_STATES: Final = frozenset({"working", "blocked", "done", "idle", "clear"})
ProgramStateWord = Literal["working", "blocked", "done", "idle", "clear"]

_OSC: Final = b"\x1b]"
_ESC: Final = 0x1B
_BEL: Final = 0x07
_BACKSLASH: Final = 0x5C
_STATUS_PREFIX: Final = b"7501;"
_MAX_ID: Final = 256


@dataclass(frozen=True, slots=True)
class StatusRecord:
    """One well-formed OSC 7501 status record, fields decoded.

    ``message`` and ``title`` are the base64-decoded ``msg``/``title`` fields (UTF-8, invalid
    bytes replaced). ``terminator`` is ``"BEL"`` or ``"ST"``. ``serial`` is the record's number
    in its stream, counted by the :class:`OscParser` that found it (1, 2, ...; ``None`` outside
    a parser): what :class:`messages.evidence.Numbered` says why.
    """

    state: ProgramStateWord
    app: str | None = None
    kind: str | None = None
    child_id: str | None = None
    message: str | None = None
    title: str | None = None
    progress: int | None = None
    terminator: str = "BEL"
    serial: int | None = None


@dataclass(frozen=True, slots=True)
class OscProbe:
    """``ESC ] 7501 ; ? …``: the program asks whether the terminal understands OSC 7501."""

    data: str = "?"


@dataclass(frozen=True, slots=True)
class Title:
    """OSC 0 (icon name and title) or OSC 2 (title); ``text`` may be empty (title reset)."""

    text: str
    code: int = 0


@dataclass(frozen=True, slots=True)
class OscNotification:
    """A desktop notification: OSC 9 ``text`` or OSC 777 ``notify;title;body``."""

    body: str
    title: str | None = None
    code: int = 9


@dataclass(frozen=True, slots=True)
class Progress:
    """OSC 9;4 progress (ConEmu/ghostty/iTerm2): ``state`` 0 clear, 1 set, 2 error,
    3 indeterminate, 4 paused; ``value`` 0-100 when given."""

    state: int
    value: int | None = None


OscEvent = StatusRecord | OscProbe | Title | OscNotification | Progress


class OscStatistics(msgspec.Struct, kw_only=True):
    """Counters of one :class:`OscParser`: one record it keeps, copied by
    :meth:`OscParser.statistics` (``carry_bytes`` is the size held back now)."""

    bytes_fed: int = 0
    records: int = 0
    probes: int = 0
    titles: int = 0
    notifications: int = 0
    progress: int = 0
    #: OSC 7501 sequences that were terminated but not valid records (unknown state, bad
    #: base64, bad field syntax): passed through unchanged, never reported.
    malformed: int = 0
    #: ``ESC ]`` openings that found no terminator within :data:`MAX_SEQUENCE` bytes or were
    #: cut by another ESC: passed through as plain bytes.
    unterminated: int = 0
    #: OSC 7501 records/probes removed from the output.
    stripped: int = 0
    carry_bytes: int = 0


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")[:MAX_FIELD_TEXT]


def _b64(value: str) -> str | None:
    try:
        raw = binascii.a2b_base64(value.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        return None
    return _text(raw)


def parse_status_fields(payload: bytes, terminator: str = "BEL") -> StatusRecord | None:
    """Parse the data of an OSC 7501 record (after ``7501;``); ``None`` when malformed.

    Fields are ``key=value`` separated by ``:``. ``state`` is required and must be one of
    :data:`PROGRAM_STATES`; ``msg``/``title`` must be valid base64; ``progress`` an integer
    0-100. Unknown keys are ignored (forward compatibility); a repeated key is malformed.
    """
    try:
        text = payload.decode("ascii")
    except UnicodeDecodeError:
        return None
    fields: dict[str, str] = {}
    for item in text.split(":"):
        key, sep, value = item.partition("=")
        if not sep or not key or key in fields:
            return None
        fields[key] = value
    state = fields.get("state")
    if state not in PROGRAM_STATES:
        return None
    message = title = None
    if "msg" in fields:
        message = _b64(fields["msg"])
        if message is None:
            return None
    if "title" in fields:
        title = _b64(fields["title"])
        if title is None:
            return None
    progress = None
    if "progress" in fields:
        value = fields["progress"]
        if not value.isdigit() or int(value) > 100:
            return None
        progress = int(value)
    child_id = fields.get("id")
    if child_id is not None and not 0 < len(child_id) <= _MAX_ID:
        return None
    app = fields.get("app") or None
    kind = fields.get("kind") or None
    if (app is not None and len(app) > _MAX_ID) or (kind is not None and len(kind) > _MAX_ID):
        return None
    return StatusRecord(
        state=state,  # type: ignore[arg-type]  # checked against PROGRAM_STATES above
        app=app,
        kind=kind,
        child_id=child_id,
        message=message,
        title=title,
        progress=progress,
        terminator=terminator,
    )


def _parse_notification(code: int, rest: bytes) -> OscNotification | Progress | None:
    if code == 9:
        if rest.startswith(b"4;"):
            parts = rest.split(b";")
            if not parts[1].isdigit():
                return None
            value = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None
            return Progress(state=int(parts[1]), value=value)
        return OscNotification(body=_text(rest), code=9)
    # OSC 777 ; notify ; title ; body (rxvt-unicode, ghostty, Claude, Codex)
    parts = rest.split(b";", 2)
    if parts[0] != b"notify" or len(parts) < 2:
        return None
    body = parts[2] if len(parts) == 3 else b""
    return OscNotification(body=_text(body), title=_text(parts[1]), code=777)


def _holds_status(rest: bytes | memoryview) -> bool:
    """Could the OSC whose data starts with ``rest`` be an OSC 7501 sequence?"""
    head = bytes(rest[: len(_STATUS_PREFIX)])
    return _STATUS_PREFIX.startswith(head)


class OscParser:
    """Sans-IO streaming parser; feed it output chunks in order, as they were read.

    ``strip_status`` removes OSC 7501 status records from the returned output,
    ``strip_probe`` removes probes too (``paneward wrap`` answers them itself inside tmux).
    While a possibly-stripped sequence is incomplete at the end of a chunk its bytes are held
    back (at most :data:`MAX_SEQUENCE`); other incomplete sequences are passed on at once and
    only parsed when they complete.
    """

    __slots__ = (
        "_carry",
        "_carry_sent",
        "_stats",
        "_strip_probe",
        "_strip_status",
    )

    def __init__(self, *, strip_status: bool = False, strip_probe: bool = False) -> None:
        self._strip_status = strip_status
        self._strip_probe = strip_probe
        # An incomplete sequence from the previous chunk; the first _carry_sent bytes of it
        # were already passed on (0 when held back).
        self._carry = b""
        self._carry_sent = 0
        self._stats = OscStatistics()

    @property
    def carry_bytes(self) -> int:
        """How many bytes of an incomplete sequence are kept for the next chunk."""
        return len(self._carry)

    def statistics(self) -> OscStatistics:
        """A point-in-time copy of the counters (see :class:`OscStatistics`)."""
        return msgspec.structs.replace(self._stats, carry_bytes=len(self._carry))

    def flush(self) -> bytes:
        """End of stream: return (and forget) held-back bytes of an incomplete sequence."""
        held = self._carry[self._carry_sent :]
        if self._carry:
            self._stats.unterminated += 1
        self._carry = b""
        self._carry_sent = 0
        return held

    def feed(self, data: bytes) -> tuple[bytes, list[OscEvent]]:
        """Parse the next chunk; return ``(bytes to pass on, events in stream order)``."""
        self._stats.bytes_fed += len(data)
        if self._carry:
            buf = self._carry + data
            sent = self._carry_sent
            self._carry = b""
            self._carry_sent = 0
        else:
            # Fast path: no pending sequence and no OSC introducer, nothing to do. The one-byte
            # find is a memchr (tens of GB/s); the two-byte one only runs when ESC occurs.
            if data.find(b"\x1b") < 0 or (data.find(_OSC) < 0 and data[-1] != _ESC):
                return data, []
            buf = data
            sent = 0
        events: list[OscEvent] = []
        # Output is buf[sent:end] minus the stripped spans; the carried sequence (if any)
        # starts at 0 and is parsed again even where its bytes were already passed on.
        pieces: list[bytes] | None = None
        emit_from = sent
        end = len(buf)
        pos = 0
        size = len(buf)
        find = buf.find
        while True:
            start = find(_OSC, pos)
            if start < 0:
                if size and buf[-1] == _ESC and size - 1 >= pos:
                    # A trailing lone ESC may open an OSC: keep it for the next chunk.
                    end = self._keep(buf, size - 1, sent)
                break
            body = start + 2
            limit = min(size, start + MAX_SEQUENCE)
            bel = find(b"\x07", body, limit)
            esc = find(b"\x1b", body, bel if bel >= 0 else limit)
            if esc >= 0:
                if esc + 1 == size:
                    # ESC is the last byte: it may be the first half of ST.
                    if size - start < MAX_SEQUENCE:
                        end = self._keep(buf, start, sent)
                        break
                    self._stats.unterminated += 1
                    pos = body
                    continue
                if buf[esc + 1] != _BACKSLASH:
                    # ESC inside an OSC string that is not ST: not a sequence we parse.
                    self._stats.unterminated += 1
                    pos = esc
                    continue
                stop, terminator = esc + 2, "ST"
                content = buf[body:esc]
            elif bel >= 0:
                stop, terminator = bel + 1, "BEL"
                content = buf[body:bel]
            else:
                if size - start < MAX_SEQUENCE:
                    end = self._keep(buf, start, sent)
                    break
                self._stats.unterminated += 1
                pos = body
                continue
            if self._dispatch(content, terminator, events):
                # Only 7501 sequences are stripped, and those are never passed on early.
                if pieces is None:
                    pieces = []
                if start > emit_from:
                    pieces.append(buf[emit_from:start])
                emit_from = stop
                self._stats.stripped += 1
            pos = stop
        if pieces is None:
            if emit_from == 0 and end == size:
                return buf, events
            return buf[emit_from:end], events
        if end > emit_from:
            pieces.append(buf[emit_from:end])
        return b"".join(pieces), events

    def _keep(self, buf: bytes, start: int, sent: int) -> int:
        """Keep ``buf[start:]`` for the next chunk; return where this chunk's output ends.

        A sequence that may be a stripped OSC 7501 is held back whole; any other one is
        passed on now (except a trailing ESC, which may open a 7501 sequence) and only parsed
        when it completes. Bytes passed on earlier (``sent``) stay passed on.
        """
        carry = buf[start:]
        if not (self._strip_status or self._strip_probe):
            release = len(carry)
        elif _holds_status(carry[2:]):
            release = 0
        elif carry[-1] == _ESC:
            release = len(carry) - 1
        else:
            release = len(carry)
        release = max(release, sent - start)
        self._carry = carry
        self._carry_sent = release
        return start + release

    def _dispatch(self, content: bytes, terminator: str, events: list[OscEvent]) -> bool:
        """Record the event of one complete OSC; return whether to strip it."""
        code_end = content.find(b";")
        code = content[:code_end] if code_end >= 0 else content
        rest = content[code_end + 1 :] if code_end >= 0 else b""
        if code == b"7501":
            if code_end < 0:
                self._stats.malformed += 1
                return False
            if rest.startswith(b"?"):
                self._stats.probes += 1
                events.append(OscProbe(data=_text(rest)))
                return self._strip_probe
            record = parse_status_fields(rest, terminator)
            if record is None:
                self._stats.malformed += 1
                return False
            self._stats.records += 1
            events.append(replace(record, serial=self._stats.records))
            return self._strip_status
        if code in (b"0", b"2") and code_end >= 0:
            self._stats.titles += 1
            events.append(Title(text=_text(rest), code=int(code)))
        elif code in (b"9", b"777") and code_end >= 0:
            note = _parse_notification(int(code), rest)
            if note is None:
                self._stats.malformed += 1
            elif isinstance(note, Progress):
                self._stats.progress += 1
                events.append(note)
            else:
                self._stats.notifications += 1
                events.append(note)
        return False
