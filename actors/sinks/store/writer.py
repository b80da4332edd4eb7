"""The store's writer: the rows waiting for a transaction, the bounded transactions that
commit them, and the backpressure it gives intake.

One :class:`BatchWriter` per open store, owned by :class:`actors.sinks.store.Store`: its
recording methods append rows (:meth:`BatchWriter.append`, never blocking), its task
(:meth:`BatchWriter.run`, started by :func:`actors.sinks.store.open_store`) commits them at
most ``batch_rows`` a transaction, ``batch_ms`` after the oldest waiting row was recorded or as
soon as ``batch_rows`` wait. A transaction is one hop to a worker thread holding the store's
own write connection. What does not fit (over ``max_pending``, or after
:data:`MAX_FLUSH_ATTEMPTS` failed commits) is dropped, counted and logged as a gap.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import anyio

from actors.sinks.store.records import StoreStatistics
from actors.sinks.store.rows import GapRow, Row, flush_statements, newest_per_key
from actors.sinks.store.schema import GAP_PRUNE, JOURNAL_PRUNE

__all__ = [
    "BACKPRESSURE_STALL_S",
    "DEFAULT_BATCH_MS",
    "DEFAULT_MAX_PENDING",
    "GAP_RETENTION_ROWS",
    "MAX_FLUSH_ATTEMPTS",
    "BatchWriter",
    "DurabilityGate",
]

_log = logging.getLogger(__name__)

#: The rows waiting for a transaction are capped so a stuck disk can neither eat the daemon's
#: memory nor widen what a kill -9 loses past this; rows beyond the cap are dropped, counted
#: (StoreStatistics.dropped) and recorded as a gap.
DEFAULT_MAX_PENDING: Final = 10_000
#: A transaction starts this long after the oldest waiting row was recorded (or as soon as
#: ``batch_rows`` wait): the longest a row waits for its commit when nothing is ahead of it.
DEFAULT_BATCH_MS: Final = 50
#: A batch whose transaction failed is retried this many times, then dropped (counted).
MAX_FLUSH_ATTEMPTS: Final = 3
#: Newest rows kept in the gap log.
GAP_RETENTION_ROWS: Final = 1_000
#: A store that has neither committed nor dropped anything for this long while rows wait is
#: stuck (a locked or failing disk): backpressure then lets intake go on (rows beyond
#: ``max_pending`` are dropped as gaps) rather than stall the daemon.
BACKPRESSURE_STALL_S: Final = 1.0


class BatchWriter:
    """The batches of one open store, committed on ``writer`` (the store's write connection,
    used only from worker threads, one transaction at a time under :attr:`lock`).

    ``stats`` is the store's own record (the writer counts what it commits, drops and
    retries in it); ``committed`` is called after every commit (the seq mark follows it).
    ``path`` is the database's, for log lines.
    """

    def __init__(
        self,
        writer: sqlite3.Connection,
        *,
        path: Path,
        batch_ms: int,
        batch_rows: int,
        retention_rows: int,
        max_pending: int,
        clock: Callable[[], int],
        stats: StoreStatistics,
        committed: Callable[[], None],
    ) -> None:
        self._writer = writer
        self._path = path
        self._batch_s = batch_ms / 1000
        self._batch_rows = batch_rows
        self._retention_rows = retention_rows
        self._max_pending = max_pending
        self._clock = clock
        self._stats = stats
        self._committed = committed
        self._pending: list[Row] = []
        self._pending_gaps: list[GapRow] = []
        # When the oldest waiting row was recorded (the batch window runs from it), and whether
        # rows were left over by the last transaction (the next one starts at once then).
        self._window_opened = 0.0
        self._carry = False
        # The highest seq committed or given up on (dropped), when it last moved, and an event
        # set when it does: what backpressure (DurabilityGate) waits for.
        self._handled_seq = 0
        self._last_progress = anyio.current_time()
        self._progress = anyio.Event()
        self._recovered = anyio.Event()
        self._attempts = 0
        self._journal_count = 0
        #: Held for every transaction, and by the store's reads (after a flush).
        self.lock = anyio.Lock()
        self._wake = anyio.Event()
        self._full = anyio.Event()

    @property
    def waiting(self) -> int:
        """Rows and gaps waiting for the next transaction."""
        return len(self._pending) + len(self._pending_gaps)

    @property
    def pending_gaps(self) -> Sequence[GapRow]:
        """The gap rows waiting for the next transaction (``gaps_between`` reports them)."""
        return self._pending_gaps

    @property
    def handled_seq(self) -> int:
        """The highest journal seq committed or dropped (counted) by this store."""
        return self._handled_seq

    def start_after(self, journal_rows: int, journal_max: int) -> None:
        """Called once at open with what the journal holds: its row count (retention prunes
        beyond ``retention_rows``) and its highest seq (handled already)."""
        self._journal_count = journal_rows
        self._handled_seq = journal_max

    # ------------------------------------------------------------------ queueing (sync)

    def append(self, row: Row) -> None:
        """Queue ``row`` for the next transaction, or drop it (counted, logged as a gap) when
        ``max_pending`` rows wait already."""
        if len(self._pending) >= self._max_pending:
            # The disk is not keeping up; losing history is better than losing the
            # daemon to memory (or a kill -9 losing more than the cap). Counted, visible in
            # `paneward status`, and recorded as a gap for `watch --since`.
            self._stats.dropped += 1
            if row.journal is not None:
                self._note_drop(row.seq, 1, "store_full")
                self._advanced(row.seq)
            return
        if not self._pending:
            self._window_opened = anyio.current_time()
        self._pending.append(row)
        self._wake.set()
        if len(self._pending) >= self._batch_rows:
            self._full.set()

    def append_gap(self, gap: GapRow) -> None:
        """Queue a gap log row for the next transaction."""
        self._pending_gaps.append(gap)
        self._wake.set()

    def _note_drop(self, first_seq: int, count: int, reason: str) -> None:
        """Record in the gap log that ``count`` journal rows from ``first_seq`` were dropped
        (extending the last pending gap when it is the same run)."""
        gaps = self._pending_gaps
        if gaps:
            last = gaps[-1]
            if last.reason == reason and last.next_seq + last.dropped == first_seq:
                gaps[-1] = GapRow(last.next_seq, last.dropped + count, reason, last.noticed_ms)
                return
        if len(gaps) >= GAP_RETENTION_ROWS:
            return  # the log keeps the newest GAP_RETENTION_ROWS anyway; the count is exact
        gaps.append(GapRow(first_seq, count, reason, self._clock()))
        self._wake.set()

    # ------------------------------------------------------------------ writing

    async def run(self) -> None:
        """The writer task (started by open_store): bounded transactions, back to back while
        rows wait."""
        while True:
            if not self._pending and not self._pending_gaps:
                self._wake = anyio.Event()
                await self._wake.wait()
            # The window opened with the oldest waiting row; it closes batch_ms after it or as
            # soon as batch_rows are waiting, whichever comes first. Rows left over by the last
            # transaction have waited already: the next one starts at once.
            if len(self._pending) < self._batch_rows and not self._carry:
                remaining = self._window_opened + self._batch_s - anyio.current_time()
                if remaining > 0:
                    self._full = anyio.Event()
                    with anyio.move_on_after(remaining):
                        await self._full.wait()
            async with self.lock:
                await self._flush_once()
            if self._attempts:
                # The last flush failed: back off one window before retrying (or until a flush
                # called meanwhile succeeded: the disk is back).
                self._recovered = anyio.Event()
                with anyio.move_on_after(self._batch_s):
                    await self._recovered.wait()

    async def _flush_once(self) -> None:
        """Commit the oldest ``batch_rows`` waiting rows (and the gaps) in one transaction.
        Caller holds the lock."""
        rows = self._pending[: self._batch_rows]
        del self._pending[: self._batch_rows]
        self._carry = bool(self._pending)
        if self._pending:
            self._window_opened = anyio.current_time()
        gaps, self._pending_gaps = self._pending_gaps, []
        if not rows and not gaps:
            return
        self._stats.in_flight = len(rows) + len(gaps)
        journal_rows = sum(1 for r in rows if r.journal is not None)
        max_seq = max((r.seq for r in rows if r.journal is not None), default=0)
        try:
            # One worker-thread hop for the whole transaction; anyio waits for the thread even
            # when cancelled, so a transaction is never left open on the connection.
            inserted, pruned, catalog = await anyio.to_thread.run_sync(
                self._commit, rows, gaps, self._journal_count
            )
        except Exception as exc:  # sqlite3.Error mostly; never let the writer die
            self._stats.flush_errors += 1
            self._attempts += 1
            if self._attempts >= MAX_FLUSH_ATTEMPTS:
                self._stats.dropped += len(rows) + len(gaps)
                self._attempts = 0
                self._drop_rows(rows, "write_failed")
                # The gaps themselves are kept for the next transaction: they say what is lost.
                self._pending_gaps = gaps + self._pending_gaps
                _log.error(
                    "store %s: dropped a batch of %d rows after %d failed flushes: %s",
                    self._path, len(rows) + len(gaps), MAX_FLUSH_ATTEMPTS, exc,
                )
            else:
                _log.warning("store %s: flush failed (will retry): %s", self._path, exc)
                self._requeue(rows, gaps)
            return
        finally:
            self._stats.in_flight = 0
        self._attempts = 0
        self._journal_count += inserted - pruned
        self._stats.written += inserted
        self._stats.duplicates += journal_rows - inserted
        self._stats.catalog_writes += catalog
        self._stats.pruned += pruned
        self._stats.batches += 1
        self._stats.last_flushed_seq = max(self._stats.last_flushed_seq, max_seq)
        self._advanced(max_seq)
        self._committed()

    def _advanced(self, seq: int) -> None:
        """Rows up to ``seq`` are committed or given up on: wake whoever waits for that."""
        self._recovered.set()
        self._handled_seq = max(self._handled_seq, seq)
        self._last_progress = anyio.current_time()
        self._progress.set()
        self._progress = anyio.Event()

    def _commit(
        self, rows: Sequence[Row], gaps: Sequence[GapRow], journal_count: int
    ) -> tuple[int, int, int]:
        """One transaction on the write connection (worker thread); returns the journal rows
        inserted, the journal rows pruned and the catalog rows upserted."""
        newest = newest_per_key(rows)
        journal, others = flush_statements(rows, newest, gaps)
        db = self._writer
        db.execute("BEGIN IMMEDIATE")
        try:
            inserted = 0
            for sql, params in journal:
                inserted += max(db.execute(sql, params).rowcount, 0)
            for sql, params in others:
                db.execute(sql, params)
            if gaps:
                db.execute(GAP_PRUNE, (GAP_RETENTION_ROWS,))
            excess = journal_count + inserted - self._retention_rows
            pruned = 0
            if excess > 0:
                pruned = max(db.execute(JOURNAL_PRUNE, (excess,)).rowcount, 0)
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")  # none open (BEGIN itself failed) raises: nothing to undo
            raise
        return inserted, pruned, len(newest)

    def _drop_rows(self, rows: Sequence[Row], reason: str) -> None:
        top = 0
        for row in rows:
            if row.journal is not None:
                self._note_drop(row.seq, 1, reason)
                top = max(top, row.seq)
        if top:
            self._advanced(top)

    def _requeue(self, rows: list[Row], gaps: list[GapRow]) -> None:
        room = max(self._max_pending - len(self._pending), 0)
        keep = rows[:room]
        self._stats.dropped += len(rows) - len(keep)
        self._drop_rows(rows[room:], "store_full")
        if keep:
            self._window_opened = anyio.current_time()
        self._pending = keep + self._pending
        self._pending_gaps = gaps + self._pending_gaps

    async def flush(self) -> None:
        """Commit everything queued so far (:meth:`actors.sinks.store.Store.flush`)."""
        async with self.lock:
            remaining = len(self._pending)
            while True:
                errors = self._stats.flush_errors
                taken = min(remaining, self._batch_rows)
                await self._flush_once()
                remaining -= taken
                if self._stats.flush_errors != errors or remaining <= 0:
                    return

    async def close(self, deadline_s: float) -> None:
        """Final flush (shielded, bounded by ``deadline_s``); what is still waiting after it is
        dropped (counted, logged). Called by the store's close; it takes no records after."""
        with anyio.move_on_after(deadline_s, shield=True):
            errors = self._stats.flush_errors
            while (self._pending or self._pending_gaps) and self._stats.flush_errors == errors:
                await self.flush()
        left = len(self._pending) + len(self._pending_gaps)
        if left:
            self._stats.dropped += left
            _log.error("store %s: %d rows not flushed before the close deadline", self._path, left)
            self._pending, self._pending_gaps = [], []


class DurabilityGate:
    """Backpressure from the store to intake (made by
    :meth:`actors.sinks.store.Store.backpressure`).

    ``closed()`` while the hub's seq runs ``limit`` or more ahead of the writer's
    :attr:`~BatchWriter.handled_seq` (committed or dropped), so a ``kill -9`` loses at most about
    one batch whatever the load; ``wait()`` returns at the store's next progress, or once it has
    been held up ``stall_s`` with no progress (a stuck disk never stalls intake for longer: the
    store then drops what it cannot keep, as gaps, and the gate stays open until the store
    moves again). ``waits`` and ``stalls`` count both.
    """

    def __init__(
        self, writer: BatchWriter, published: Callable[[], int], limit: int, stall_s: float
    ) -> None:
        self._writer = writer
        self._published = published
        self._limit = limit
        self._stall_s = stall_s
        self._base = published() - writer.handled_seq  # what was restored, not recorded here
        self._held_since: float | None = None  # since when the lag has been over the limit
        self.waits = 0
        self.stalls = 0

    def _lag(self) -> int:
        return self._published() - self._base - self._writer.handled_seq

    def _held_for(self) -> float:
        now = anyio.current_time()
        if self._held_since is None:
            self._held_since = now
        return now - max(self._held_since, self._writer._last_progress)

    def closed(self) -> bool:
        if self._lag() < self._limit:
            self._held_since = None
            return False
        return self._held_for() < self._stall_s

    async def wait(self) -> None:
        self.waits += 1
        writer = self._writer
        while self.closed():
            with anyio.move_on_after(max(self._stall_s - self._held_for(), 0.0)) as scope:
                await writer._progress.wait()
            if scope.cancelled_caught and self._lag() >= self._limit:
                self.stalls += 1
                writer._stats.backpressure_stalls += 1
                return
