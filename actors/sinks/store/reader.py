"""The store's reads: the catalog back at start (:func:`read_catalog`), the journal for
``paneward watch --since`` and ``paneward top`` (:func:`read_journal`, :func:`seq_before`,
:func:`journal_bounds`) and where it misses transitions (:func:`gaps_between`).

Called by :class:`actors.sinks.store.Store` on its read connection, after a flush and under
the writer's lock. A stored row that no longer decodes is skipped, logged and counted in
``decode_errors`` of the store's :class:`~actors.sinks.store.records.StoreStatistics`.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import aiosqlite
import msgspec

import messages
from actors.core.session.reducer import ENDED_RETENTION_MS, SessionState, from_activity, settled
from actors.sinks.store.records import Restored, StoreStatistics
from actors.sinks.store.rows import GapRow
from messages import Activity, Gap, MessageError, Transition

__all__ = [
    "DEFAULT_ENDED_RETENTION_MS",
    "DEFAULT_JOURNAL_LIMIT",
    "catalog_max_seq",
    "count_journal",
    "gaps_between",
    "journal_bounds",
    "logged_mark_gaps",
    "read_catalog",
    "read_journal",
    "seq_before",
]

_log = logging.getLogger(__name__)

#: Catalog rows of settled sessions (ended, nothing to act on: actors.core.session.reducer.settled)
#: not seen for this long are deleted at the next start rather than restored.
DEFAULT_ENDED_RETENTION_MS: Final = ENDED_RETENTION_MS
#: Default upper bound on ``journal_since`` results.
DEFAULT_JOURNAL_LIMIT: Final = 10_000

_STATE_DECODER: Final = msgspec.json.Decoder(SessionState)


async def _rollback(db: aiosqlite.Connection) -> None:
    # No transaction open (BEGIN itself failed) raises: nothing to undo then.
    with contextlib.suppress(sqlite3.Error):
        await db.execute("ROLLBACK")


async def read_catalog(
    db: aiosqlite.Connection,
    *,
    ended_before: int,
    floor: int,
    stats: StoreStatistics,
    path: Path,
) -> Restored:
    """Every session of the catalog (:meth:`actors.sinks.store.Store.load`); rows of sessions
    that settled (:func:`actors.core.session.reducer.settled`) and were last seen before
    ``ended_before`` are deleted instead (their seq still counts, as does ``floor``: what the
    last run reserved)."""
    rows = await db.execute_fetchall(
        "SELECT activity, owner_pid, owner_start_token, seq, last_seen_ms, harness, "
        "session_id, state FROM sessions ORDER BY seq, harness, session_id"
    )
    top = await db.execute_fetchall("SELECT max(seq) FROM journal")
    states: list[SessionState] = []
    last_seq = 0
    skipped = 0
    expired: list[tuple[str, str, int]] = []
    for text, pid, token, seq, seen_ms, harness, session_id, state_text in rows:
        last_seq = max(last_seq, seq)  # a deleted row's seq still counts
        activity = _decode_activity(text, stats, path)
        if activity is None:
            skipped += 1
            continue
        if settled(activity) and seen_ms < ended_before:
            # Ended long ago with nothing to act on: nobody needs its state restored,
            # and without this the catalog (and every snapshot, `paneward status`)
            # grows with every session ever run. Its journal rows stay until journal
            # retention.
            expired.append((harness, session_id, seq))
            continue
        state = _decode_state(state_text, activity, stats, path)
        if state.owner_pid is None and pid is not None and token is not None:
            state = msgspec.structs.replace(state, owner_pid=pid, owner_token=token)
        states.append(state)
    if expired:
        await db.execute("BEGIN IMMEDIATE")
        try:
            await db.executemany(
                "DELETE FROM sessions WHERE harness = ? AND session_id = ? AND seq = ?",
                expired,
            )
            await db.execute("COMMIT")
        except BaseException:
            await _rollback(db)
            raise
        stats.ended_pruned += len(expired)
    for (journal_max,) in top:
        last_seq = max(last_seq, journal_max or 0)
    last_seq = max(last_seq, floor)  # what the last run reserved: maybe seen
    return Restored(tuple(states), last_seq, skipped, len(expired))


def _decode_state(
    text: str | None, activity: Activity, stats: StoreStatistics, path: Path
) -> SessionState:
    """The catalog row's reducer state, with its activity; rebuilt when absent or bad."""
    if text is not None:
        try:
            state = _STATE_DECODER.decode(text)
        except msgspec.DecodeError as exc:
            stats.decode_errors += 1
            _log.error("store %s: state of %s does not decode: %s", path, activity.key, exc)
        else:
            if state.key == activity.key:
                return msgspec.structs.replace(state, activity=activity)
            stats.decode_errors += 1
    return from_activity(activity)


def _decode_activity(text: str, stats: StoreStatistics, path: Path) -> Activity | None:
    try:
        item = messages.decode_outbound(text)
    except MessageError as exc:
        stats.decode_errors += 1
        _log.error("store %s: catalog row does not decode: %s", path, exc)
        return None
    if not isinstance(item, Activity):
        stats.decode_errors += 1
        return None
    return item


async def read_journal(
    db: aiosqlite.Connection, seq: int, limit: int, stats: StoreStatistics, path: Path
) -> list[Transition]:
    """Transitions with ``seq`` greater than ``seq``, oldest first, at most ``limit``."""
    rows = await db.execute_fetchall(
        "SELECT transition FROM journal WHERE seq > ? ORDER BY seq LIMIT ?",
        (seq, limit),
    )
    out: list[Transition] = []
    for (text,) in rows:
        try:
            item = messages.decode_outbound(text)
        except MessageError as exc:
            stats.decode_errors += 1
            _log.error("store %s: journal row does not decode: %s", path, exc)
            continue
        if isinstance(item, Transition):
            out.append(item)
        else:
            stats.decode_errors += 1
    return out


async def seq_before(db: aiosqlite.Connection, at_ms: int) -> int:
    """The seq after which the journal's transitions of ``at_ms`` and later start
    (:meth:`actors.sinks.store.Store.seq_before`)."""
    rows = list(
        await db.execute_fetchall(
            "SELECT seq FROM journal WHERE at_ms >= ? ORDER BY seq LIMIT 1", (at_ms,)
        )
    )
    if not rows:
        rows = list(await db.execute_fetchall("SELECT max(seq) + 1 FROM journal"))
    first = rows[0][0]
    return 0 if first is None else max(0, int(first) - 1)


async def journal_bounds(db: aiosqlite.Connection) -> tuple[int, int] | None:
    """``(oldest, newest)`` seq held by the journal, or ``None`` when it is empty."""
    rows = list(await db.execute_fetchall("SELECT min(seq), max(seq) FROM journal"))
    low, high = rows[0]
    return None if low is None else (low, high)


async def gaps_between(
    db: aiosqlite.Connection,
    since: int,
    until: int,
    pending: Sequence[GapRow],
    clock: Callable[[], int],
) -> list[Gap]:
    """Where the journal misses transitions with ``since < seq <= until``, oldest first
    (:meth:`actors.sinks.store.Store.gaps_between`): the gap log's rows in that range and the
    ``pending`` ones not committed yet, and ``retention`` gaps for the rest of what is missing
    before the oldest row the journal keeps."""
    rows = list(
        await db.execute_fetchall(
            "SELECT next_seq, dropped, reason, noticed_ms FROM gaps "
            "WHERE next_seq + dropped > ? AND next_seq <= ? ORDER BY next_seq, id",
            (since, until),
        )
    )
    bounds = list(await db.execute_fetchall("SELECT min(seq) FROM journal"))
    recorded = [
        Gap(next_seq=next_seq, dropped=dropped, reason=reason, noticed_ms=noticed_ms)
        for next_seq, dropped, reason, noticed_ms in rows
    ]
    recorded += [
        Gap(next_seq=g.next_seq, dropped=g.dropped, reason=g.reason, noticed_ms=g.noticed_ms)
        for g in pending
        if g.next_seq + g.dropped > since and g.next_seq <= until
    ]
    oldest = bounds[0][0]
    # Before the oldest kept row, what no recorded gap explains was pruned by retention.
    end = until if oldest is None else min(oldest - 1, until)
    cursor = since + 1
    retention: list[Gap] = []
    for gap in sorted(recorded, key=lambda g: g.next_seq):
        if gap.next_seq > cursor and cursor <= end and oldest is not None:
            upto = min(gap.next_seq - 1, end)
            retention.append(Gap(next_seq=cursor, dropped=upto - cursor + 1,
                                 reason="retention", noticed_ms=clock()))
        cursor = max(cursor, gap.next_seq + gap.dropped)
    if oldest is not None and cursor <= end:
        retention.append(Gap(next_seq=cursor, dropped=end - cursor + 1,
                             reason="retention", noticed_ms=clock()))
    return sorted(recorded + retention, key=lambda g: g.next_seq)


async def count_journal(db: aiosqlite.Connection) -> tuple[int, int]:
    """The journal's row count and highest seq (0 when empty); reads every journal page, so
    a corrupt body raises :class:`sqlite3.DatabaseError` here."""
    rows = list(await db.execute_fetchall("SELECT count(*), max(seq) FROM journal"))
    return rows[0][0], rows[0][1] or 0


async def catalog_max_seq(db: aiosqlite.Connection) -> int:
    """The catalog's highest seq (0 when empty), for the seq mark at open."""
    rows = list(await db.execute_fetchall("SELECT max(seq) FROM sessions"))
    return rows[0][0] or 0


async def logged_mark_gaps(db: aiosqlite.Connection) -> set[tuple[object, ...]]:
    """The seq mark's gaps the gap log holds already (a gap is logged once)."""
    rows = await db.execute_fetchall(
        "SELECT next_seq, dropped, reason FROM gaps "
        "WHERE reason IN ('lost_committed', 'not_committed')"
    )
    return {tuple(row) for row in rows}
