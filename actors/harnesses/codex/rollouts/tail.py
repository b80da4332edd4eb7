"""The tail of one rollout (sans-IO): :class:`RolloutTail` is fed the file's size and a
``read(offset, length)`` function and returns the turn boundaries to publish.

First sight: a bounded backwards scan (1 MiB windows, 64 KiB overlap, at most ``max_windows``
windows, the first partial line of every window that does not start at offset 0 ignored) that
yields only the LATEST boundary. Afterwards: incremental forward reads of the new bytes
yielding EVERY boundary in order; lines longer than ``max_line`` are skipped (counted) without
being buffered; truncation or replacement resets it. Driven by the discovery actor's worker
thread (:func:`actors.harnesses.codex.rollouts.reads.refresh_tail`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import msgspec

from actors.harnesses.codex.rollouts.parsing import (
    BOUNDARY_RE,
    BoundaryRecord,
    InvalidLine,
    parse_line,
)

__all__ = [
    "DISCOVERY_MAX_WINDOWS",
    "MAX_LINE_BYTES",
    "OVERLAP_BYTES",
    "WINDOW_BYTES",
    "ReadFn",
    "RolloutTail",
    "TailStatistics",
]

WINDOW_BYTES: Final = 1 << 20  # one backwards-scan window (seed: LIFECYCLE_SCAN_BYTES)
OVERLAP_BYTES: Final = 64 << 10  # windows overlap so a boundary line is never split
# First sight reads at most this many windows (2 MiB): never proportional to file size.
# A boundary further back than that is not found, and the turn honestly stays unknown.
DISCOVERY_MAX_WINDOWS: Final = 2
# Lines longer than this are skipped unbuffered. Boundary records are < 1 KiB except
# task_complete, whose last_agent_message is the final answer (rarely > 100 KiB).
MAX_LINE_BYTES: Final = 1 << 20

ReadFn = Callable[[int, int], bytes]
"""``read(offset, length) -> bytes``; may return fewer bytes at end of file."""


class TailStatistics(msgspec.Struct, kw_only=True):
    """Counters of one :class:`RolloutTail` (all monotonic): one record it keeps, copied by
    ``statistics()``."""

    bytes_read: int = 0
    lines: int = 0
    invalid_lines: int = 0
    giant_lines: int = 0
    resets: int = 0
    boundaries: int = 0


class RolloutTail:
    """Sans-IO lifecycle reader for one rollout file.

    Feed it the current file size (and identity) plus a ``read(offset, length)``
    function with :meth:`update`; it returns the boundaries to publish. The first
    update (and the first after a truncation or replacement) is *discovery*: a
    bounded backwards scan returning at most the latest boundary, so a restarted
    observer learns the current turn state without replaying history. Later
    updates read only the new bytes and return every boundary in file order.
    """

    def __init__(
        self,
        *,
        window: int = WINDOW_BYTES,
        overlap: int = OVERLAP_BYTES,
        max_windows: int = DISCOVERY_MAX_WINDOWS,
        max_line: int = MAX_LINE_BYTES,
    ) -> None:
        if not 0 <= overlap < window or max_windows < 1 or max_line < 1:
            raise ValueError("need 0 <= overlap < window, max_windows >= 1, max_line >= 1")
        self._window = window
        self._overlap = overlap
        self._max_windows = max_windows
        self._max_line = max_line
        self._offset: int | None = None  # None: not discovered yet
        self._identity: object = None
        self._buf = bytearray()  # the incomplete last line (only while <= max_line)
        self._discarding = False  # inside a giant line: drop bytes up to its newline
        self._stats = TailStatistics()

    @property
    def offset(self) -> int | None:
        """Bytes consumed so far (the cursor), or None before discovery."""
        return self._offset

    def statistics(self) -> TailStatistics:
        """A point-in-time copy of the counters."""
        return msgspec.structs.replace(self._stats)

    def update(self, size: int, read: ReadFn, identity: object = None) -> list[BoundaryRecord]:
        """Advance to ``size`` bytes and return the boundaries to publish.

        ``identity`` (e.g. ``(st_dev, st_ino)``) detects a file replaced by another.
        """
        if self._offset is not None and (
            size < self._offset or (identity is not None and identity != self._identity)
        ):
            # Truncated or replaced: what we consumed is gone; learn the file afresh.
            self._stats.resets += 1
            self._offset = None
        self._identity = identity
        found = self._discover(size, read) if self._offset is None else self._forward(size, read)
        self._stats.boundaries += len(found)
        return found

    # -- discovery: bounded backwards scan

    def _discover(self, size: int, read: ReadFn) -> list[BoundaryRecord]:
        self._buf.clear()
        self._discarding = False
        if size <= 0:
            self._offset = 0
            return []
        end = size
        cursor: int | None = None  # where forward reading resumes: start of the last partial line
        for _ in range(self._max_windows):
            start = max(0, end - self._window)
            data = read(start, end - start)
            self._stats.bytes_read += len(data)
            end = start + len(data)  # the file may have shrunk under us
            last_nl = data.rfind(b"\n")
            if cursor is None:
                if last_nl < 0:
                    # No newline in the last window: one line in progress. At offset 0 it
                    # is short and will be read whole later; otherwise it is giant.
                    cursor = start if start == 0 else end
                    self._discarding = start > 0
                    return self._finish_discovery(cursor, [])
                cursor = start + last_nl + 1
            if last_nl >= 0:
                # A window not starting at the file floor begins mid-record (maybe mid
                # UTF-8 sequence): ignore everything up to its first newline.
                lo = data.find(b"\n") + 1 if start > 0 else 0
                if lo <= last_nl:
                    record = self._latest_in(data, lo, last_nl + 1)
                    if record is not None:
                        return self._finish_discovery(cursor, [record])
            if start == 0:
                break
            end = start + self._overlap
        return self._finish_discovery(size if cursor is None else cursor, [])

    def _finish_discovery(self, cursor: int, found: list[BoundaryRecord]) -> list[BoundaryRecord]:
        self._offset = cursor
        return found

    def _latest_in(self, data: bytes, lo: int, hi: int) -> BoundaryRecord | None:
        """The last valid boundary among the complete lines of ``data[lo:hi]``."""
        hits = list(BOUNDARY_RE.finditer(data, lo, hi))
        tried: set[int] = set()
        for hit in reversed(hits):
            line_start = max(lo, data.rfind(b"\n", lo, hit.start()) + 1)
            if line_start in tried:
                continue
            tried.add(line_start)
            line_end = data.find(b"\n", hit.end(), hi)
            if line_end < 0:
                continue
            try:
                record = parse_line(data[line_start:line_end])
            except InvalidLine:
                continue
            if record is not None:
                return record
        return None

    # -- incremental forward reads

    def _forward(self, size: int, read: ReadFn) -> list[BoundaryRecord]:
        assert self._offset is not None
        out: list[BoundaryRecord] = []
        position = self._offset
        while position < size:
            chunk = read(position, min(self._window, size - position))
            if not chunk:
                break  # shrank between stat and read: the next update sees the truncation
            self._stats.bytes_read += len(chunk)
            self._consume(chunk, out)
            position += len(chunk)
        self._offset = position
        return out

    def _consume(self, chunk: bytes, out: list[BoundaryRecord]) -> None:
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                rest = len(chunk) - start
                if self._discarding:
                    pass
                elif len(self._buf) + rest > self._max_line:
                    self._buf.clear()
                    self._discarding = True
                else:
                    self._buf += chunk[start:]
                return
            if self._discarding or len(self._buf) + (newline - start) > self._max_line:
                self._stats.giant_lines += 1
                self._discarding = False
                self._buf.clear()
            else:
                if self._buf:
                    self._buf += chunk[start:newline]
                    line = bytes(self._buf)
                    self._buf.clear()
                else:
                    line = chunk[start:newline]
                self._take(line, out)
            start = newline + 1

    def _take(self, line: bytes, out: list[BoundaryRecord]) -> None:
        line = line.rstrip(b"\r")
        if not line.strip():
            return
        self._stats.lines += 1
        try:
            record = parse_line(line)
        except InvalidLine:
            self._stats.invalid_lines += 1
            return
        if record is not None:
            out.append(record)

