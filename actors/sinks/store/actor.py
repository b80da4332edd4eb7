"""The store's actor: :class:`Store`, the thin shell one open database is used through, and
:func:`open_store`, which opens it and runs its two tasks (the writer's and the seq mark's).

What it does with each call is said in :mod:`actors.sinks.store`; the work is in the package's
other modules: rows built as transitions are recorded (:mod:`~actors.sinks.store.rows`),
batches committed (:mod:`~actors.sinks.store.writer`), the seq mark kept
(:mod:`~actors.sinks.store.marker`), the database read (:mod:`~actors.sinks.store.reader`) and
opened (:mod:`~actors.sinks.store.schema`).
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Literal, Protocol

import aiosqlite
import anyio
import msgspec

from actors.core.clock import now_ms
from actors.core.session.reducer import SessionState
from actors.runtime.hub import (
    StateItem,
    StateSnapshot,
    StateTransition,
    Subscription,
    ready_now,
)
from actors.sinks.store import reader
from actors.sinks.store.marker import DEFAULT_SEQ_BLOCK, SeqMarker, open_mark_file
from actors.sinks.store.reader import DEFAULT_ENDED_RETENTION_MS, DEFAULT_JOURNAL_LIMIT
from actors.sinks.store.records import Owner, Restored, StoreError, StoreStatistics
from actors.sinks.store.rows import ENCODER, GapRow, Row, check_owner, journal_row
from actors.sinks.store.schema import connect, open_writer
from actors.sinks.store.writer import (
    BACKPRESSURE_STALL_S,
    DEFAULT_BATCH_MS,
    DEFAULT_MAX_PENDING,
    BatchWriter,
    DurabilityGate,
)
from messages import (
    Activity,
    Gap,
    MessageError,
    Overflow,
    SessionKey,
    Snapshot,
    Transition,
)

__all__ = ["StateSource", "Store", "open_store"]


class StateSource(Protocol):
    """Where :meth:`Store.follow` subscribes: the supervisor (or its hub)."""

    def subscribe(
        self,
        mode: Literal["all", "latest"] = ...,
        snapshot: bool = ...,
        *,
        buffer: int = ...,
        states: Literal[True],
    ) -> Subscription[StateItem]: ...



class Store:
    """A batched writer and reader of one paneward database. Made by :func:`open_store`."""

    def __init__(
        self,
        db: aiosqlite.Connection,
        path: Path,
        *,
        writer: sqlite3.Connection,
        mark_fd: int,
        seq_block: int,
        batch_ms: int,
        batch_rows: int,
        retention_rows: int,
        ended_retention_ms: int,
        max_pending: int,
        clock: Callable[[], int],
    ) -> None:
        self._db = db
        self._path = path
        self._batch_rows = batch_rows
        self._ended_retention_ms = ended_retention_ms
        self._max_pending = max_pending
        self._clock = clock
        self._stats = StoreStatistics()
        self._marker = SeqMarker(mark_fd, path=path, seq_block=seq_block, stats=self._stats)
        self._writer = BatchWriter(
            writer,
            path=path,
            batch_ms=batch_ms,
            batch_rows=batch_rows,
            retention_rows=retention_rows,
            max_pending=max_pending,
            clock=clock,
            stats=self._stats,
            committed=self._marker.committed_moved,
        )
        self._last_recorded_seq = 0
        # The newest activity recorded per key and its JSON: it is the next transition's
        # ``before`` (the hub hands the same object), so it is never encoded twice.
        self._encoded: dict[SessionKey, tuple[Activity, msgspec.Raw]] = {}
        self._closed = False

    @property
    def path(self) -> Path:
        return self._path

    def statistics(self) -> StoreStatistics:
        """A point-in-time copy of the counters (never blocks)."""
        mark = self._marker.mark
        return msgspec.structs.replace(
            self._stats,
            pending=self._writer.waiting,
            mark_reserved=mark.reserved,
            mark_committed=mark.committed,
        )

    # ------------------------------------------------------------------ recording (sync)

    def _check_open(self, what: str) -> None:
        if self._closed:
            self._stats.rejected += 1
            raise StoreError(f"{what} on a closed store ({self._path})")

    def _encode_activity(self, activity: Activity) -> msgspec.Raw:
        known = self._encoded.get(activity.key)
        if known is not None and known[0] is activity:
            return known[1]
        raw = msgspec.Raw(ENCODER.encode(activity))
        self._encoded[activity.key] = (activity, raw)
        return raw

    def record(
        self,
        transition: Transition,
        state: SessionState | None = None,
        *,
        owner: Owner | None = None,
    ) -> None:
        """Queue ``transition`` for the journal and its key's catalog row. Never blocks.

        Called by :meth:`run_subscription` (or directly) on the event loop's thread. ``state``
        is the reducer state that published it (kept in the catalog, its owner with it);
        ``owner`` names the owner incarnation when no state is given.

        :raises MessageError: ``transition`` is not a Transition or ``owner`` is malformed
            (counted in ``rejected``; nothing is queued).
        :raises StoreError: the store is closed.
        """
        self._check_open("record()")
        stats = self._stats
        if not isinstance(transition, Transition):
            stats.rejected += 1
            raise MessageError(
                f"Store.record() takes a Transition, not {type(transition).__name__}"
            )
        checked = self._owner(owner, state)
        seq = transition.seq
        if seq <= self._last_recorded_seq:
            stats.seq_regressions += 1
        self._last_recorded_seq = max(self._last_recorded_seq, seq)
        ev = transition.after.evidence
        seen = ev.observed_at_ms if ev.observed_at_ms is not None else self._clock()
        before = transition.before
        before_json = None if before is None else self._encode_activity(before)
        after_json = self._encode_activity(transition.after)
        stats.recorded += 1
        forgets = transition.forgets
        if forgets:
            self._encoded.pop(transition.key, None)  # no later transition has it as before
        self._writer.append(
            Row(
                seq,
                transition.after,
                after_json,
                journal_row(transition, after_json, before_json),
                checked,
                state,
                seen,
                forgets,
            )
        )

    def _owner(self, owner: object, state: SessionState | None) -> Owner | None:
        if state is not None and state.owner_pid is not None and state.owner_token is not None:
            return (state.owner_pid, state.owner_token)
        try:
            return check_owner(owner)
        except MessageError:
            self._stats.rejected += 1
            raise

    def record_snapshot(
        self, snapshot: Snapshot, states: Sequence[SessionState | None] = ()
    ) -> None:
        """Queue catalog upserts for every activity of ``snapshot`` (no journal rows).

        Called by :meth:`run_subscription` for the first item of a subscription; ``states``
        (aligned with the activities) are the reducer states behind them.
        """
        self._check_open("record_snapshot()")
        if not isinstance(snapshot, Snapshot):
            self._stats.rejected += 1
            raise MessageError(
                f"Store.record_snapshot() takes a Snapshot, not {type(snapshot).__name__}"
            )
        now = self._clock()
        for index, activity in enumerate(snapshot.activities):
            ev = activity.evidence
            seen = ev.observed_at_ms if ev.observed_at_ms is not None else now
            state = states[index] if index < len(states) else None
            self._stats.snapshot_rows += 1
            self._writer.append(
                Row(
                    snapshot.seq,
                    activity,
                    self._encode_activity(activity),
                    None,
                    self._owner(None, state),
                    state,
                    seen,
                )
            )

    def record_gap(self, overflow: Overflow) -> None:
        """Queue a ``gaps`` row for an Overflow marker and count it.

        The journal then misses ``overflow.dropped`` transitions from
        ``overflow.next_seq`` on; the subscriber's resubscription snapshot repairs the
        catalog, the gap log says what the journal lacks.
        """
        self._check_open("record_gap()")
        if not isinstance(overflow, Overflow):
            self._stats.rejected += 1
            raise MessageError(
                f"Store.record_gap() takes an Overflow, not {type(overflow).__name__}"
            )
        self._stats.gaps += 1
        self._stats.gap_transitions += overflow.dropped
        self._writer.append_gap(
            GapRow(overflow.next_seq, overflow.dropped, overflow.reason, self._clock())
        )

    def _take(self, item: object) -> None:
        if isinstance(item, StateTransition):
            self.record(item.transition, item.state)
        elif isinstance(item, Transition):
            self.record(item)
        elif isinstance(item, StateSnapshot):
            self.record_snapshot(item.snapshot, item.states)
        elif isinstance(item, Snapshot):
            self.record_snapshot(item)
        elif isinstance(item, Overflow):
            self.record_gap(item)
        else:
            self._stats.ignored += 1

    async def run_subscription(self, subscription: AsyncIterable[object]) -> None:
        """Record every item of a hub subscription until it ends.

        Snapshot -> catalog upserts; Transition -> journal + catalog; Overflow -> gap
        log (the subscription ends after it: :meth:`follow` resubscribes, and the new
        snapshot repairs the catalog). Other items are counted as ``ignored``. From a hub
        :class:`~actors.runtime.hub.Subscription` (or a memory stream) everything pending is
        taken at each wake-up (:func:`~actors.runtime.hub.ready_now`: one wake-up per burst,
        not one per transition), so it never lags behind the hub.
        """
        async for item in subscription:
            self._take(item)
            for ready in ready_now(subscription):
                self._take(ready)

    async def follow(
        self,
        host: StateSource,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Record everything ``host`` publishes until its hub closes.

        Use as ``await task_group.start(store.follow, supervisor)``: it returns once
        subscribed, so nothing published after that is missed. The first subscription has no
        snapshot (the catalog already holds what :meth:`load` read and the supervisor
        restored); after an Overflow (a disk that fell ``max_pending`` rows behind) it
        resubscribes with a snapshot that repairs the catalog, and the gap is logged.
        """
        snapshot = False
        while True:
            with host.subscribe(
                "all", snapshot, buffer=self._max_pending, states=True
            ) as subscription:
                if not snapshot:
                    task_status.started()
                await self.run_subscription(subscription)
                if not subscription.statistics().overflowed:
                    return
            snapshot = True
    # ------------------------------------------------------------------ writing

    @property
    def handled_seq(self) -> int:
        """The highest journal seq committed or dropped (counted) by this store."""
        return self._writer.handled_seq

    def backpressure(
        self,
        published: Callable[[], int],
        limit: int | None = None,
        stall_s: float = BACKPRESSURE_STALL_S,
    ) -> DurabilityGate:
        """An intake gate (:class:`actors.runtime.mailbox.IntakeGate`) closed while
        ``published()`` (the hub's seq) runs ``limit`` (default ``batch_rows``) or more ahead of
        what this store has committed, unless the store is stuck (held up ``stall_s`` with no
        progress)."""
        return DurabilityGate(
            self._writer, published, self._batch_rows if limit is None else limit, stall_s
        )

    async def flush(self) -> None:
        """Commit everything recorded so far (waits for a flush already running).

        As many bounded transactions as the rows recorded before the call need, under the
        lock, so a producer that keeps recording cannot keep ``flush`` busy forever. A batch
        that fails stays queued for the writer's retry; ``flush`` returns after that attempt.
        """
        await self._writer.flush()

    async def _close(self, deadline_s: float) -> None:
        """Final flush (shielded, bounded), then no more records; then the seq mark's last
        record: ``committed`` what was, ``reserved`` brought down to the highest seq recorded
        or shown (nothing above it was handed out), so a clean stop leaves no gap."""
        await self._writer.close(deadline_s)
        self._closed = True
        marker = self._marker
        used = max(marker.floor, marker.shown, self._last_recorded_seq,
                   self._stats.last_flushed_seq)
        await marker.close(used, deadline_s)

    # ------------------------------------------------------------------ the seq mark

    async def wait_reserved(self, seq: int) -> None:
        """Return once ``seq`` may be shown: the seq mark on disk reserves it, so no restart
        (``kill -9`` included) numbers a new transition ``seq`` or lower.

        Called by the control server before it writes a transition, a snapshot, an overflow
        marker or a status naming ``seq``. At once while ``seq`` is within the reserved block;
        the block is raised ahead (by ``seq_block``) once what is shown comes within half of
        its end, so a watcher waits for an ``fsync`` only at the first seq it is shown, or when
        the disk does not keep up. A store whose mark cannot be written keeps waiters waiting
        (``mark_errors`` counts the tries) rather than show a seq a restart could reuse.
        """
        await self._marker.wait_reserved(seq)

    async def _open(self, mark_path: Path) -> None:
        """At open: count the journal, then read the seq mark, decide where numbering
        continues and which gaps the journal has (:func:`actors.core.seq_mark.resume`), queue
        those gaps for the first transaction (once: a gap already logged is not logged again),
        and write the mark.

        :raises StoreError: the journal's body is corrupt, or the mark file cannot be read.
        """
        try:
            count, journal_max = await reader.count_journal(self._db)
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{self._path} is not a usable paneward store ({exc}); "
                "move it aside and paneward will start a new one"
            ) from exc
        self._last_recorded_seq = journal_max
        self._writer.start_after(count, journal_max)
        catalog_max = await reader.catalog_max_seq(self._db)
        known = await reader.logged_mark_gaps(self._db)
        decided = await self._marker.open(mark_path, journal_max, catalog_max)
        now = self._clock()
        for next_seq, dropped, reason in decided.gaps:
            if (next_seq, dropped, reason) not in known:
                self._writer.append_gap(GapRow(next_seq, dropped, reason, now))

    # ------------------------------------------------------------------ reading

    async def load(self) -> Restored:
        """Read the catalog back (after committing anything pending).

        Called by the daemon once at start, before any actor publishes; the supervisor
        re-proves the states (:meth:`supervisor.Supervisor.restore`). Rows of sessions that
        settled (:func:`actors.core.session.reducer.settled`) more than ``ended_retention_ms`` ago
        are deleted instead (their seq still counts).
        """
        self._check_open("load()")
        await self.flush()
        async with self._writer.lock:
            return await reader.read_catalog(
                self._db,
                ended_before=self._clock() - self._ended_retention_ms,
                floor=self._marker.floor,
                stats=self._stats,
                path=self._path,
            )

    async def journal_since(
        self, seq: int, limit: int = DEFAULT_JOURNAL_LIMIT
    ) -> list[Transition]:
        """Transitions with ``seq`` greater than ``seq``, oldest first, at most ``limit``.

        For ``paneward watch --since SEQ``: page by passing the last seq returned.
        Rows that no longer decode are skipped and counted (``decode_errors``).
        """
        self._check_open("journal_since()")
        if limit < 1:
            raise ValueError(f"limit must be >= 1, not {limit}")
        await self.flush()
        async with self._writer.lock:
            return await reader.read_journal(self._db, seq, limit, self._stats, self._path)

    async def seq_before(self, at_ms: int) -> int:
        """The seq after which the journal's transitions of ``at_ms`` and later start: one less
        than the oldest row whose evidence time (its ``at_ms`` column) is at or after ``at_ms``,
        else the newest seq held (0 when the journal is empty).

        For ``paneward top``'s last hour (a watch's ``since_ms``): pass the result as
        ``since``. Evidence times follow seq only roughly (a transition caused by a focus keeps
        its evidence's time), so the replay is every row from that one on, in seq order.
        """
        self._check_open("seq_before()")
        await self.flush()
        async with self._writer.lock:
            return await reader.seq_before(self._db, at_ms)

    async def journal_bounds(self) -> tuple[int, int] | None:
        """``(oldest, newest)`` seq held by the journal, or ``None`` when it is empty.

        ``watch --since`` uses it to tell the user that retention pruned what they asked for.
        """
        self._check_open("journal_bounds()")
        await self.flush()
        async with self._writer.lock:
            return await reader.journal_bounds(self._db)

    async def gaps_between(self, since: int, until: int) -> list[Gap]:
        """Where the journal misses transitions with ``since < seq <= until``, oldest first.

        For ``paneward watch --since SEQ``: the gap log's rows in that range (transitions the
        store dropped, or its subscription never got, including those a failing disk keeps in
        memory for now), and ``retention`` gaps for the rest of what is missing before the
        oldest row the journal keeps.
        """
        self._check_open("gaps_between()")
        await self.flush()
        async with self._writer.lock:
            return await reader.gaps_between(
                self._db, since, until, self._writer.pending_gaps, self._clock
            )


@contextlib.asynccontextmanager
async def open_store(
    path: Path,
    *,
    batch_ms: int = DEFAULT_BATCH_MS,
    batch_rows: int = 500,
    retention_rows: int = 100_000,
    ended_retention_ms: int = DEFAULT_ENDED_RETENTION_MS,
    max_pending: int = DEFAULT_MAX_PENDING,
    close_timeout_s: float = 5.0,
    busy_timeout_ms: int = 5_000,
    clock: Callable[[], int] = now_ms,
    seq_block: int = DEFAULT_SEQ_BLOCK,
) -> AsyncIterator[Store]:
    """Open (creating or migrating) the store at ``path`` and run its writer task.

    The seq mark (:mod:`actors.core.seq_mark`) is the file ``<path>-seq`` beside it (0600,
    created if missing): at open it decides where numbering continues and which gaps the
    journal has (``lost_committed``, ``not_committed``); ``seq_block`` seqs are reserved at a
    time (:meth:`Store.wait_reserved`).

    Parent directories are created 0700 and the file 0600. Leaving the context
    flushes everything still pending (shielded from cancellation, bounded by
    ``close_timeout_s``; rows left after that are counted as dropped) and closes the
    database.
    ``busy_timeout_ms`` bounds how long a flush waits for another connection's write
    lock before it fails (counted; the batch is retried). ``ended_retention_ms``: catalog rows of
    sessions that ended (``persisted``) and were not seen for that long are deleted by
    :meth:`Store.load` instead of being restored.

    :raises StoreError: the file is not a paneward database, is corrupt, or has a
        newer schema version.
    """
    for name, value in (("batch_rows", batch_rows), ("retention_rows", retention_rows),
                        ("max_pending", max_pending), ("seq_block", seq_block)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, not {value}")
    if not (batch_ms > 0 and math.isfinite(batch_ms)):
        raise ValueError(f"batch_ms must be > 0, not {batch_ms}")
    if busy_timeout_ms < 0:
        raise ValueError(f"busy_timeout_ms must be >= 0, not {busy_timeout_ms}")
    if ended_retention_ms < 0:
        raise ValueError(f"ended_retention_ms must be >= 0, not {ended_retention_ms}")
    db = await connect(Path(path), busy_timeout_ms)
    writer: sqlite3.Connection | None = None
    mark_fd: int | None = None
    mark_path = Path(path).with_name(Path(path).name + "-seq")
    try:
        writer = await anyio.to_thread.run_sync(open_writer, Path(path), busy_timeout_ms)
        try:
            mark_fd = await anyio.to_thread.run_sync(open_mark_file, mark_path)
        except OSError as exc:
            raise StoreError(
                f"cannot open the seq mark {mark_path} ({exc}); "
                "move it aside and paneward will start a new one"
            ) from exc
        store = Store(
            db,
            Path(path),
            writer=writer,
            mark_fd=mark_fd,
            seq_block=seq_block,
            batch_ms=batch_ms,
            batch_rows=batch_rows,
            retention_rows=retention_rows,
            ended_retention_ms=ended_retention_ms,
            max_pending=max_pending,
            clock=clock,
        )
        await store._open(mark_path)
        body_error: BaseException | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(store._writer.run)
            tg.start_soon(store._marker.run)
            try:
                yield store
            except BaseException as exc:
                # Re-raised below, outside the task group, so the caller sees its own
                # exception rather than an ExceptionGroup around it.
                body_error = exc
            finally:
                await store._close(close_timeout_s)
                tg.cancel_scope.cancel()
        if body_error is not None:
            raise body_error
    finally:
        with anyio.CancelScope(shield=True):
            if writer is not None:
                await anyio.to_thread.run_sync(writer.close)
            await db.close()
            if mark_fd is not None:
                os.close(mark_fd)
