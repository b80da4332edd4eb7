"""The store's seq mark: the file ``<db>-seq`` beside the database, outside SQLite's WAL, that
reserves seqs on disk ahead of what is shown and records the last committed one, so a restart
(after a ``kill -9`` too) numbers past every seq anyone may have seen.

What to write and what a record found at open means are decided by :mod:`actors.core.seq_mark`;
:class:`SeqMarker` is the I/O around it, owned by :class:`actors.sinks.store.Store`: opened by
:func:`actors.sinks.store.open_store`, its task (:meth:`SeqMarker.run`) started beside the
writer's, woken by the writer after each commit, waited on by the control server through
:meth:`actors.sinks.store.Store.wait_reserved`.
"""

from __future__ import annotations

import logging
import math
import os
import stat
from pathlib import Path
from typing import Final

import anyio

from actors.core.backoff import retry_delay
from actors.core.seq_mark import (
    MARK_BYTES,
    MarkDamaged,
    Resume,
    SeqMark,
    decode_mark,
    encode_slot,
    resume,
    slot_offset,
)
from actors.sinks.store.records import StoreError, StoreStatistics

__all__ = [
    "DEFAULT_SEQ_BLOCK",
    "MARK_INTERVAL_S",
    "MARK_RETRY_MAX_S",
    "MARK_RETRY_S",
    "SeqMarker",
    "open_mark_file",
]

_log = logging.getLogger(__name__)

#: Seqs the seq mark reserves at a time (raised again when what was shown comes within half of
#: it): one ``fsync`` per block, and after a ``kill -9`` a ``not_committed`` gap of at most a
#: block more than was really published.
DEFAULT_SEQ_BLOCK: Final = 2_000
#: The seq mark's ``committed`` is rewritten at most this often while commits go on.
MARK_INTERVAL_S: Final = 1.0
#: After a failed write of the seq mark, wait this long, doubling up to the maximum.
MARK_RETRY_S: Final = 0.05
MARK_RETRY_MAX_S: Final = 2.0


def open_mark_file(path: Path) -> int:
    """Open the seq mark (blocking), creating it 0600 -- and its directory entry durable --
    when missing; never through a link, never anything but a regular file.

    :raises OSError: it cannot be opened, or is not a regular file.
    """
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    created = True
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        created = False
        fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        if created:
            directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_mark_record(fd: int, mark: SeqMark) -> None:
    """One record into its slot, on disk before this returns (blocking)."""
    os.pwrite(fd, encode_slot(mark), slot_offset(mark.generation))
    os.fsync(fd)


class SeqMarker:
    """The seq mark of one open store, on the file descriptor ``fd`` (made by
    :func:`open_mark_file`; the store closes it).

    ``stats`` is the store's own record: the marker counts ``mark_writes``, ``mark_errors``,
    ``lost_committed`` and ``not_committed`` in it, and follows its ``last_flushed_seq``.
    ``path`` is the database's, for log lines.
    """

    def __init__(self, fd: int, *, path: Path, seq_block: int, stats: StoreStatistics) -> None:
        self._fd = fd
        self._path = path
        self._seq_block = seq_block
        self._stats = stats
        # The record on disk, the seq numbering continues after (set at open), the highest seq
        # shown through wait_reserved, whether anything was, and the events of the task.
        self._mark = SeqMark()
        self._floor = 0
        self._shown = 0
        self._asked = False
        self._closed = False
        self._lock = anyio.Lock()
        self._wake = anyio.Event()
        self._moved = anyio.Event()
        self._written_at = -math.inf

    @property
    def mark(self) -> SeqMark:
        """The record on disk."""
        return self._mark

    @property
    def floor(self) -> int:
        """Where numbering continues: what the last run reserved (maybe seen), set at open."""
        return self._floor

    @property
    def shown(self) -> int:
        """The highest seq asked for through :meth:`wait_reserved`."""
        return self._shown

    async def wait_reserved(self, seq: int) -> None:
        """Return once ``seq`` may be shown (:meth:`actors.sinks.store.Store.wait_reserved`),
        or once the store is closed."""
        self._asked = True
        if seq > self._shown:
            self._shown = seq
        if self._shown + self._seq_block // 2 > self._mark.reserved:
            self._wake.set()
        while seq > self._mark.reserved and not self._closed:
            moved = self._moved
            await moved.wait()

    def committed_moved(self) -> None:
        """Called by the writer after each commit: the mark's committed seq follows, at most
        once every :data:`MARK_INTERVAL_S`."""
        if self._stats.last_flushed_seq > self._mark.committed:
            self._wake.set()

    def _committed(self) -> int:
        return max(self._mark.committed, self._stats.last_flushed_seq)

    async def open(self, mark_path: Path, journal_max: int, catalog_max: int) -> Resume:
        """Read the seq mark at open, decide where numbering continues and which gaps the
        journal has (:func:`actors.core.seq_mark.resume`, over the journal's and the catalog's
        highest seq), count them, and write the mark. The caller logs the gaps.

        :raises StoreError: the mark file cannot be read.
        """
        try:
            data = await anyio.to_thread.run_sync(os.pread, self._fd, MARK_BYTES, 0)
        except OSError as exc:
            raise StoreError(f"cannot read the seq mark {mark_path}: {exc}") from exc
        try:
            mark = decode_mark(data)
        except MarkDamaged as exc:
            self._stats.mark_errors += 1
            _log.error("store %s: the seq mark is damaged (%s); numbering continues after the "
                       "journal", mark_path, exc)
            mark = SeqMark()
        decided = resume(journal_max, catalog_max, mark)
        self._stats.lost_committed = decided.lost
        self._stats.not_committed = decided.not_committed
        if decided.lost:
            _log.error(
                "store %s: the journal ends at seq %d but seqs up to %d were committed: %d "
                "committed rows are lost (a damaged write-ahead log, or an older copy of the "
                "database); recorded as a gap", self._path, journal_max,
                mark.committed, decided.lost,
            )
        self._mark = mark
        self._floor = decided.start_seq
        await self.write(decided.start_seq, max(mark.committed, journal_max))
        return decided

    async def write(self, reserved: int, committed: int, *, final: bool = False) -> bool:
        """Write (and ``fsync``) the next record of the seq mark; False if that failed. Once
        the store is closed only the ``final`` record (from :meth:`close`) is written."""
        async with self._lock:
            if self._closed and not final:
                return True
            mark = SeqMark(self._mark.generation + 1, reserved, committed)
            try:
                await anyio.to_thread.run_sync(_write_mark_record, self._fd, mark)
            except OSError as exc:
                self._stats.mark_errors += 1
                _log.error("store %s: cannot write the seq mark: %s", self._path, exc)
                return False
            self._mark = mark
            self._stats.mark_writes += 1
            self._written_at = anyio.current_time()
            self._moved.set()
            self._moved = anyio.Event()
            return True

    async def run(self) -> None:
        """The seq mark's task (started by open_store): raises the reservation a block ahead
        as soon as what is shown needs it; follows the committed seq at most once every
        :data:`MARK_INTERVAL_S`; a failed write is retried with a growing delay."""
        failures = 0  # writes failed in a row
        while not self._closed:
            mark = self._mark
            reserved = mark.reserved
            if self._asked and self._shown + self._seq_block // 2 > reserved:
                reserved = self._shown + self._seq_block
            committed = self._committed()
            if reserved == mark.reserved and committed == mark.committed:
                self._wake = anyio.Event()
                await self._wake.wait()
                continue
            if reserved == mark.reserved:
                # Only the committed seq moved: it may wait for the interval (a reservation
                # asked for meanwhile does not).
                due = self._written_at + MARK_INTERVAL_S - anyio.current_time()
                if due > 0:
                    self._wake = anyio.Event()
                    with anyio.move_on_after(due):
                        await self._wake.wait()
                    continue
            if await self.write(reserved, committed):
                failures = 0
            else:
                # The one retry curve (actors/core/backoff.py); a write that works resets it.
                failures += 1
                await anyio.sleep(retry_delay(failures, MARK_RETRY_S, MARK_RETRY_MAX_S))

    async def close(self, used: int, deadline_s: float) -> None:
        """The last record (called by the store's close once it takes no more records):
        ``committed`` what was, ``reserved`` brought down to ``used`` (the highest seq
        recorded or shown: nothing above it was handed out), so a clean stop leaves no gap.
        Wakes every waiter of :meth:`wait_reserved`."""
        self._closed = True
        with anyio.move_on_after(deadline_s, shield=True):
            await self.write(used, self._committed(), final=True)
        self._moved.set()  # nobody waits for a reservation of a closed store
