"""The persistent store: session catalog + append-only transition journal (DESIGN §8).

Who talks to it:

* The supervisor's broadcast hub feeds it, through :meth:`Store.run_subscription`
  (or direct :meth:`Store.record` calls): every published :class:`messages.Transition`
  is appended to the ``journal`` and upserts the ``sessions`` catalog row of its key;
  a :class:`messages.Snapshot` upserts catalog rows only; an :class:`messages.Overflow`
  is written to the ``gaps`` log and counted.
* On start the daemon calls :meth:`Store.load` and then the pure :func:`reprove` with
  a start-token probe: restored sessions are re-proven *before* anything is published
  (DESIGN §4, "Restart of paneward").
* ``paneward watch --since SEQ`` reads :meth:`Store.journal_since`.

Writes never happen on the hot path: :meth:`Store.record` is synchronous, encodes the
transition's journal row (a few microseconds) and appends it to an in-memory batch; one
writer task flushes the batch every ``batch_ms`` (or as soon as ``batch_rows`` are waiting)
in ONE transaction of multi-row ``INSERT`` statements (a journal insert and a catalog upsert
per 1,000 rows) run in aiosqlite's thread; the loop only flattens parameters per flush.

Durability (WAL, ``synchronous=NORMAL``): a committed batch survives ``kill -9`` of
the daemon; a batch is all-or-nothing; so a killed daemon loses at most the rows
that were not yet committed -- the current batch window plus the one flush in
flight (:attr:`StoreStatistics.unflushed`). Power loss may additionally roll back
the last committed transactions; the file stays consistent either way.

Nothing is dropped silently: every written row, batch, error, drop, duplicate and
gap is counted in :meth:`Store.statistics`.

Contract for the caller: ``seq`` must keep growing across daemon restarts -- the
supervisor starts numbering after :attr:`Restored.last_seq`. A ``seq`` that does
not grow is still stored (the newest *recorded* row wins in the catalog) but is
counted in :attr:`StoreStatistics.seq_regressions`, and a ``seq`` already in the
journal is kept once and counted in :attr:`StoreStatistics.duplicates`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import sqlite3
import time
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final, Literal

import aiosqlite
import anyio
import msgspec

import messages
from messages import (
    Activity,
    Evidence,
    MessageError,
    Overflow,
    PanewardError,
    SessionKey,
    Snapshot,
    Transition,
)

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Correction",
    "Migration",
    "Owner",
    "Reproof",
    "Restored",
    "Store",
    "StoreError",
    "StoreStatistics",
    "open_store",
    "reprove",
]

_log = logging.getLogger(__name__)

Owner = tuple[int, str]
"""The owning process incarnation of a session: ``(pid, start_token)``."""

# 'pwrd': marks the file as paneward's, so a foreign SQLite database at the
# configured path is refused instead of being "migrated" into ours.
APPLICATION_ID: Final = 0x70777264

#: The in-memory batch is capped so a stuck disk cannot eat the daemon's memory;
#: rows beyond the cap are dropped and counted (StoreStatistics.dropped).
DEFAULT_MAX_PENDING: Final = 100_000
#: Catalog rows of sessions that ended (persisted) and were not seen for this long are deleted
#: at the next start rather than restored: a week.
DEFAULT_ENDED_RETENTION_MS: Final = 7 * 24 * 3600 * 1000
#: A batch whose transaction failed is retried this many times, then dropped (counted).
MAX_FLUSH_ATTEMPTS: Final = 3
#: Newest rows kept in the gap log.
GAP_RETENTION_ROWS: Final = 1_000
#: Default upper bound on ``journal_since`` results.
DEFAULT_JOURNAL_LIMIT: Final = 10_000


class StoreError(PanewardError):
    """The store cannot be used: the file is not a paneward database, is corrupt,
    has a newer schema, or the store is closed. The text names the path and what to do."""


# --------------------------------------------------------------------------- schema


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: ``statements`` take a database from ``version - 1`` to ``version``.

    Each migration runs in its own transaction together with the ``user_version``
    bump, so an interrupted upgrade leaves the previous version intact.
    """

    version: int
    summary: str
    statements: tuple[str, ...]


MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        1,
        "session catalog and append-only transition journal",
        (
            f"PRAGMA application_id = {APPLICATION_ID}",
            """CREATE TABLE sessions (
                harness TEXT NOT NULL,
                session_id TEXT NOT NULL,
                activity TEXT NOT NULL,
                owner_pid INTEGER,
                owner_start_token TEXT,
                pane TEXT,
                last_seen_ms INTEGER NOT NULL,
                seq INTEGER NOT NULL,
                PRIMARY KEY (harness, session_id)
            ) WITHOUT ROWID""",
            """CREATE TABLE journal (
                seq INTEGER PRIMARY KEY,
                harness TEXT NOT NULL,
                session_id TEXT NOT NULL,
                at_ms INTEGER,
                transition TEXT NOT NULL
            )""",
        ),
    ),
    Migration(
        2,
        "gap log: Overflow markers of the store's own subscription",
        (
            """CREATE TABLE gaps (
                id INTEGER PRIMARY KEY,
                next_seq INTEGER NOT NULL,
                dropped INTEGER NOT NULL,
                reason TEXT NOT NULL,
                noticed_ms INTEGER NOT NULL
            )""",
        ),
    ),
)
SCHEMA_VERSION: Final = MIGRATIONS[-1].version

# Rows go in as multi-row ``INSERT ... VALUES (...), (...), ...`` statements, one per chunk of
# at most _CHUNK_ROWS rows, never ``executemany``: sqlite3 releases the GIL around every
# statement step, and ``executemany`` steps once per row. While a burst keeps the event loop
# busy, each of those re-acquisitions waits out the interpreter's switch interval, which made a
# 500-row flush take 150-630 ms in the kill -9 burst test (10,000 hooks/s); with one step per
# chunk the same flushes take 20-60 ms (worst seen 190 ms).
_CHUNK_ROWS: Final = 1000  # x 8 columns: far below SQLite's 32,766 bound variables
_JOURNAL_INSERT_HEAD: Final = (
    "INSERT OR IGNORE INTO journal (seq, harness, session_id, at_ms, transition) VALUES "
)
_CATALOG_UPSERT_HEAD: Final = (
    "INSERT INTO sessions (harness, session_id, activity, owner_pid, owner_start_token, "
    "pane, last_seen_ms, seq) VALUES "
)
_CATALOG_UPSERT_TAIL: Final = (
    " ON CONFLICT (harness, session_id) DO UPDATE SET activity = excluded.activity, "
    "owner_pid = excluded.owner_pid, owner_start_token = excluded.owner_start_token, "
    "pane = excluded.pane, last_seen_ms = excluded.last_seen_ms, seq = excluded.seq"
)
_GAP_INSERT_HEAD: Final = "INSERT INTO gaps (next_seq, dropped, reason, noticed_ms) VALUES "


@functools.lru_cache(maxsize=64)
def _values_clause(rows: int, columns: int) -> str:
    """``(?, ?), (?, ?)`` for ``rows`` rows of ``columns`` columns."""
    one = "(" + ", ".join("?" * columns) + ")"
    return ", ".join([one] * rows)


def _multi_row_statements(
    head: str, tuples: Sequence[tuple[object, ...]], tail: str = ""
) -> Iterator[tuple[str, list[object]]]:
    """One ``(sql, parameters)`` per chunk of ``tuples`` (all of the same width)."""
    for start in range(0, len(tuples), _CHUNK_ROWS):
        chunk = tuples[start : start + _CHUNK_ROWS]
        params = [value for row in chunk for value in row]
        yield head + _values_clause(len(chunk), len(chunk[0])) + tail, params


# Deleting the `excess` oldest rows by rowid walks exactly `excess` b-tree entries:
# pruning costs O(rows inserted), never O(journal size).
_JOURNAL_PRUNE: Final = (
    "DELETE FROM journal WHERE seq IN (SELECT seq FROM journal ORDER BY seq LIMIT ?)"
)
_GAP_PRUNE: Final = (
    "DELETE FROM gaps WHERE id <= (SELECT max(id) FROM gaps) - ?"
)


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class StoreStatistics:
    """Counters of one open store (all since open_store), returned by ``Store.statistics()``."""

    recorded: int
    """Transitions accepted by ``record``."""
    snapshot_rows: int
    """Catalog rows accepted from Snapshots."""
    rejected: int
    """Calls to ``record``/``record_snapshot``/``record_gap`` refused as invalid."""
    ignored: int
    """Subscription items that are none of Snapshot/Transition/Overflow."""
    seq_regressions: int
    """Transitions whose seq did not exceed the previous one (caller contract broken)."""
    written: int
    """Journal rows committed."""
    duplicates: int
    """Transitions whose seq was already in the journal (kept once)."""
    catalog_writes: int
    """Catalog rows upserted (the newest per key per batch)."""
    batches: int
    """Committed flush transactions."""
    flush_errors: int
    """Flush transactions that failed and were rolled back (the batch is retried)."""
    dropped: int
    """Rows lost on purpose: over the pending cap, after repeated flush failures,
    or still pending when the close deadline expired."""
    gaps: int
    """Overflow markers recorded (a subscription fell behind)."""
    gap_transitions: int
    """Transitions the hub reported as not delivered to the store (sum of Overflow.dropped)."""
    pruned: int
    """Journal rows deleted by retention."""
    ended_pruned: int
    """Catalog rows of long-ended sessions deleted by ``load`` (``ended_retention_ms``)."""
    decode_errors: int
    """Stored rows that no longer decode (skipped by load/journal_since)."""
    owner_errors: int
    """Calls to ``owner_of`` that raised or returned a malformed owner (row kept, no owner)."""
    pending: int
    """Rows waiting for the next flush."""
    in_flight: int
    """Rows in the flush transaction currently running."""
    last_flushed_seq: int
    """Highest journal seq committed by this store (0 if none)."""

    @property
    def unflushed(self) -> int:
        """Rows a ``kill -9`` right now would lose: the batch window plus the flush in flight."""
        return self.pending + self.in_flight


@dataclass(frozen=True, slots=True)
class Restored:
    """What :meth:`Store.load` read back: the catalog as of the last committed batch."""

    activities: tuple[Activity, ...]
    owners: Mapping[SessionKey, Owner]
    """Owner incarnation per key, for rows that recorded one."""
    last_seq: int
    """Max of the journal's and the catalog's seq: number new transitions after it."""
    skipped: int = 0
    """Catalog rows that did not decode (counted in StoreStatistics.decode_errors)."""
    ended_pruned: int = 0
    """Rows of sessions that ended more than ``ended_retention_ms`` ago: deleted, not restored."""


CorrectionReason = Literal["owner_dead", "owner_recycled", "owner_unknown"]


@dataclass(frozen=True, slots=True)
class Correction:
    """A restored session whose owner could not be re-proven; ``after`` must be published."""

    before: Activity
    after: Activity
    reason: CorrectionReason

    @property
    def cause(self) -> str:
        """The ``Transition.cause`` to publish it under."""
        return f"persisted_store:{self.reason}"


@dataclass(frozen=True, slots=True)
class Reproof:
    """The outcome of :func:`reprove`.

    ``restored`` are installed silently (no transition): sessions whose owner is the
    same live incarnation (still ``running``) and sessions that were already
    ``persisted``. ``corrections`` are installed with their ``after`` activity and
    published as transitions. ``live_owners`` are the owners proven alive.
    """

    restored: tuple[Activity, ...]
    corrections: tuple[Correction, ...]
    live_owners: Mapping[SessionKey, Owner]

    def activities(self) -> tuple[Activity, ...]:
        """Every session's activity after the re-proof (restored, then corrected)."""
        return self.restored + tuple(c.after for c in self.corrections)


# --------------------------------------------------------------------------- pure re-proof


def _persisted(activity: Activity, observed_at_ms: int | None) -> Activity:
    attention = activity.attention
    if attention is not None and attention.kind == "needs_input":
        # Nobody can be waiting on a prompt of a process that is gone.
        attention = None
    return msgspec.structs.replace(
        activity,
        presence="persisted",
        turn="unknown",
        attention=attention,
        evidence=Evidence(source="persisted_store", observed_at_ms=observed_at_ms),
    )


def reprove(
    restored: Restored,
    probe: Callable[[int], str | None],
    *,
    observed_at_ms: int | None = None,
) -> Reproof:
    """Decide, without I/O, which restored sessions stay as they were.

    ``probe(pid)`` returns the live start token of ``pid`` (field 22 of
    ``/proc/<pid>/stat``) or ``None`` when it is gone (a zombie counts as gone);
    it must not raise, and is called once per distinct pid. A session that was not
    ``persisted`` keeps its activity only when its recorded owner is alive with the
    same start token; otherwise it becomes ``persisted`` / ``unknown`` with evidence
    ``persisted_store``, its attention kept except ``needs_input``.
    """
    tokens: dict[int, str | None] = {}
    kept: list[Activity] = []
    corrections: list[Correction] = []
    live: dict[SessionKey, Owner] = {}
    for activity in restored.activities:
        if activity.presence == "persisted":
            kept.append(activity)
            continue
        owner = restored.owners.get(activity.key)
        reason: CorrectionReason
        if owner is None:
            reason = "owner_unknown"
        else:
            pid, token = owner
            if pid not in tokens:
                tokens[pid] = probe(pid)
            live_token = tokens[pid]
            if live_token == token:
                kept.append(activity)
                live[activity.key] = owner
                continue
            reason = "owner_dead" if live_token is None else "owner_recycled"
        corrections.append(
            Correction(activity, _persisted(activity, observed_at_ms), reason)
        )
    return Reproof(tuple(kept), tuple(corrections), MappingProxyType(live))


# --------------------------------------------------------------------------- rows


@dataclass(frozen=True, slots=True)
class _Row:
    """One pending write: a journal row (``journal`` set) and/or a catalog row."""

    seq: int
    activity: Activity
    # (seq, harness, session_id, at_ms, transition JSON), encoded when recorded: a few
    # microseconds per transition spread over the stream, rather than a whole batch's worth
    # of Python work at flush time competing with the event loop for the GIL.
    journal: tuple[int, str, str, int | None, str] | None
    owner: Owner | None
    seen_ms: int


@dataclass(frozen=True, slots=True)
class _Gap:
    next_seq: int
    dropped: int
    reason: str
    noticed_ms: int


def _journal_row(t: Transition) -> tuple[int, str, str, int | None, str]:
    ev = t.after.evidence
    at_ms = ev.at_ms if ev.at_ms is not None else ev.observed_at_ms
    return (t.seq, t.key.harness, t.key.session_id, at_ms, messages.encode(t).decode())


def _flush_statements(
    rows: Sequence[_Row], newest: Sequence[_Row], gaps: Sequence[_Gap]
) -> tuple[list[tuple[str, list[object]]], list[tuple[str, list[object]]]]:
    """The journal inserts, and the catalog upserts + gap inserts, of one flush."""
    journal_rows = [row.journal for row in rows if row.journal is not None]
    journal = list(_multi_row_statements(_JOURNAL_INSERT_HEAD, journal_rows))
    others = list(
        _multi_row_statements(
            _CATALOG_UPSERT_HEAD, list(_catalog_rows(newest)), _CATALOG_UPSERT_TAIL
        )
    )
    gap_rows = [(g.next_seq, g.dropped, g.reason, g.noticed_ms) for g in gaps]
    others += _multi_row_statements(_GAP_INSERT_HEAD, gap_rows)
    return journal, others


def _newest_per_key(rows: Sequence[_Row]) -> list[_Row]:
    newest: dict[SessionKey, _Row] = {}
    for row in rows:  # recording order: the last recorded row of a key wins
        newest[row.activity.key] = row
    return list(newest.values())


def _catalog_rows(rows: Sequence[_Row]) -> Iterator[tuple[object, ...]]:
    encode = messages.encode
    for row in rows:
        a = row.activity
        pid, token = row.owner if row.owner is not None else (None, None)
        yield (
            a.key.harness,
            a.key.session_id,
            encode(a).decode(),
            pid,
            token,
            a.pane,
            row.seen_ms,
            row.seq,
        )


def _check_owner(owner: object) -> Owner | None:
    if owner is None:
        return None
    if (
        isinstance(owner, tuple)
        and len(owner) == 2
        and isinstance(owner[0], int)
        and not isinstance(owner[0], bool)
        and owner[0] > 0
        and isinstance(owner[1], str)
        and owner[1]
    ):
        return (owner[0], owner[1])
    raise MessageError(f"invalid owner {owner!r}: expected (pid > 0, non-empty start token)")


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


# --------------------------------------------------------------------------- opening


def _prepare_path(path: Path) -> None:
    """Create missing parent directories (0700) and the file itself (0600).

    SQLite creates ``-wal``/``-shm`` with the database file's mode, so creating the
    file first keeps the whole store private to the user (DESIGN §11).
    """
    missing: list[Path] = []
    parent = path.parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(directory, 0o700)  # mkdir's mode is filtered by the umask
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)


async def _pragma(db: aiosqlite.Connection, sql: str) -> object:
    rows = list(await db.execute_fetchall(sql))
    return rows[0][0] if rows else None


async def _migrate(db: aiosqlite.Connection, path: Path) -> int:
    """Bring the schema to SCHEMA_VERSION; return the version found on disk."""
    app_id = await _pragma(db, "PRAGMA application_id")
    version = await _pragma(db, "PRAGMA user_version")
    assert isinstance(app_id, int) and isinstance(version, int)
    tables = list(
        await db.execute_fetchall("SELECT name FROM sqlite_master WHERE type = 'table'")
    )
    if app_id != APPLICATION_ID and (app_id != 0 or version != 0 or tables):
        raise StoreError(
            f"{path} is an SQLite database that paneward did not create "
            f"(application_id {app_id:#x}, user_version {version}); "
            "refusing to touch it: point paneward at another path or move the file aside"
        )
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has store schema version {version}, newer than the {SCHEMA_VERSION} "
            "this paneward understands; upgrade paneward or move the file aside"
        )
    for migration in MIGRATIONS:
        if migration.version <= version:
            continue
        await db.execute("BEGIN IMMEDIATE")
        try:
            for statement in migration.statements:
                await db.execute(statement)
            await db.execute(f"PRAGMA user_version = {migration.version}")
            await db.execute("COMMIT")
        except BaseException:
            with anyio.CancelScope(shield=True):
                await db.execute("ROLLBACK")
            raise
        _log.info("store %s migrated to v%d: %s", path, migration.version, migration.summary)
    return version


async def _connect(path: Path, busy_timeout_ms: int) -> aiosqlite.Connection:
    await anyio.to_thread.run_sync(_prepare_path, path)
    db = await aiosqlite.connect(path, isolation_level=None)
    try:
        # Read the header first: a garbage file fails here ("file is not a database").
        await _pragma(db, "PRAGMA application_id")
        await db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        mode = await _pragma(db, "PRAGMA journal_mode = WAL")
        if mode != "wal":
            raise StoreError(f"{path}: SQLite refused WAL mode (journal_mode is {mode!r})")
        await db.execute("PRAGMA synchronous = NORMAL")
        await _migrate(db, path)
    except sqlite3.DatabaseError as exc:
        with anyio.CancelScope(shield=True):
            await db.close()
        raise StoreError(
            f"{path} is not a usable paneward store ({exc}); "
            "move it aside and paneward will start a new one"
        ) from exc
    except BaseException:
        with anyio.CancelScope(shield=True):
            await db.close()
        raise
    return db


# --------------------------------------------------------------------------- the store


class Store:
    """A batched writer and reader of one paneward database. Made by :func:`open_store`."""

    def __init__(
        self,
        db: aiosqlite.Connection,
        path: Path,
        *,
        batch_ms: int,
        batch_rows: int,
        retention_rows: int,
        ended_retention_ms: int,
        max_pending: int,
        owner_of: Callable[[SessionKey], Owner | None] | None,
        clock: Callable[[], int],
    ) -> None:
        self._db = db
        self._path = path
        self._batch_s = batch_ms / 1000
        self._batch_rows = batch_rows
        self._retention_rows = retention_rows
        self._ended_retention_ms = ended_retention_ms
        self._ended_pruned = 0
        self._max_pending = max_pending
        self._owner_of = owner_of
        self._clock = clock
        self._pending: list[_Row] = []
        self._pending_gaps: list[_Gap] = []
        self._in_flight = 0
        self._attempts = 0
        self._journal_count = 0
        self._last_recorded_seq = 0
        self._closed = False
        self._lock = anyio.Lock()
        self._wake = anyio.Event()
        self._full = anyio.Event()
        self._recorded = 0
        self._snapshot_rows = 0
        self._rejected = 0
        self._ignored = 0
        self._seq_regressions = 0
        self._written = 0
        self._duplicates = 0
        self._catalog_writes = 0
        self._batches = 0
        self._flush_errors = 0
        self._dropped = 0
        self._gaps = 0
        self._gap_transitions = 0
        self._pruned = 0
        self._decode_errors = 0
        self._owner_errors = 0
        self._last_flushed_seq = 0

    @property
    def path(self) -> Path:
        return self._path

    def statistics(self) -> StoreStatistics:
        """A snapshot of the counters (never blocks)."""
        return StoreStatistics(
            recorded=self._recorded,
            snapshot_rows=self._snapshot_rows,
            rejected=self._rejected,
            ignored=self._ignored,
            seq_regressions=self._seq_regressions,
            written=self._written,
            duplicates=self._duplicates,
            catalog_writes=self._catalog_writes,
            batches=self._batches,
            flush_errors=self._flush_errors,
            dropped=self._dropped,
            gaps=self._gaps,
            gap_transitions=self._gap_transitions,
            pruned=self._pruned,
            ended_pruned=self._ended_pruned,
            decode_errors=self._decode_errors,
            owner_errors=self._owner_errors,
            pending=len(self._pending) + len(self._pending_gaps),
            in_flight=self._in_flight,
            last_flushed_seq=self._last_flushed_seq,
        )

    # ------------------------------------------------------------------ recording (sync)

    def _check_open(self, what: str) -> None:
        if self._closed:
            self._rejected += 1
            raise StoreError(f"{what} on a closed store ({self._path})")

    def _owner(self, key: SessionKey, owner: object) -> Owner | None:
        try:
            checked = _check_owner(owner)
        except MessageError:
            self._rejected += 1
            raise
        if checked is None:
            return self._ask_owner(key)
        return checked

    def _ask_owner(self, key: SessionKey) -> Owner | None:
        if self._owner_of is None:
            return None
        try:
            return _check_owner(self._owner_of(key))
        except Exception as exc:
            # A broken owner_of must not stop recording: the row is kept without an
            # owner (re-proof will then treat the session as unproven), and counted.
            self._owner_errors += 1
            _log.error("store %s: owner_of(%s) failed: %r", self._path, key, exc)
            return None

    def _append(self, row: _Row) -> None:
        if len(self._pending) >= self._max_pending:
            # The disk is not keeping up; losing history is better than losing the
            # daemon to memory. Counted, and visible in `paneward status`.
            self._dropped += 1
            return
        self._pending.append(row)
        self._wake.set()
        if len(self._pending) >= self._batch_rows:
            self._full.set()

    def record(self, transition: Transition, owner: Owner | None = None) -> None:
        """Queue ``transition`` for the journal and its key's catalog row. Never blocks.

        Called by :meth:`run_subscription` (or the supervisor directly) on the event
        loop's thread. ``owner`` is the session's owner incarnation; when ``None``,
        ``owner_of`` given to :func:`open_store` is asked.

        :raises MessageError: ``transition`` is not a Transition or ``owner`` is malformed
            (counted in ``rejected``; nothing is queued).
        :raises StoreError: the store is closed.
        """
        self._check_open("record()")
        if not isinstance(transition, Transition):
            self._rejected += 1
            raise MessageError(
                f"Store.record() takes a Transition, not {type(transition).__name__}"
            )
        checked = self._owner(transition.key, owner)
        seq = transition.seq
        if seq <= self._last_recorded_seq:
            self._seq_regressions += 1
        self._last_recorded_seq = max(self._last_recorded_seq, seq)
        ev = transition.after.evidence
        seen = ev.observed_at_ms if ev.observed_at_ms is not None else self._clock()
        self._recorded += 1
        self._append(_Row(seq, transition.after, _journal_row(transition), checked, seen))

    def record_snapshot(self, snapshot: Snapshot) -> None:
        """Queue catalog upserts for every activity of ``snapshot`` (no journal rows).

        Called by :meth:`run_subscription` for the first item of a subscription.
        """
        self._check_open("record_snapshot()")
        if not isinstance(snapshot, Snapshot):
            self._rejected += 1
            raise MessageError(
                f"Store.record_snapshot() takes a Snapshot, not {type(snapshot).__name__}"
            )
        now = self._clock()
        for activity in snapshot.activities:
            ev = activity.evidence
            seen = ev.observed_at_ms if ev.observed_at_ms is not None else now
            owner = self._ask_owner(activity.key)
            self._snapshot_rows += 1
            self._append(_Row(snapshot.seq, activity, None, owner, seen))

    def record_gap(self, overflow: Overflow) -> None:
        """Queue a ``gaps`` row for an Overflow marker and count it.

        The journal then misses ``overflow.dropped`` transitions from
        ``overflow.next_seq`` on; the subscriber's resubscription snapshot repairs the
        catalog, the gap log says what the journal lacks.
        """
        self._check_open("record_gap()")
        if not isinstance(overflow, Overflow):
            self._rejected += 1
            raise MessageError(
                f"Store.record_gap() takes an Overflow, not {type(overflow).__name__}"
            )
        self._gaps += 1
        self._gap_transitions += overflow.dropped
        self._pending_gaps.append(
            _Gap(overflow.next_seq, overflow.dropped, overflow.reason, self._clock())
        )
        self._wake.set()

    async def run_subscription(self, subscription: AsyncIterable[messages.Outbound]) -> None:
        """Record every item of a hub subscription until it ends.

        Snapshot -> catalog upserts; Transition -> journal + catalog; Overflow -> gap
        log (the subscription ends after it: the supervisor resubscribes, and the new
        snapshot repairs the catalog). Other items are counted as ``ignored``.
        """
        async for item in subscription:
            if isinstance(item, Transition):
                self.record(item)
            elif isinstance(item, Snapshot):
                self.record_snapshot(item)
            elif isinstance(item, Overflow):
                self.record_gap(item)
            else:
                self._ignored += 1

    # ------------------------------------------------------------------ writing

    async def _run_writer(self) -> None:
        """The writer task (started by open_store): one flush per batch window."""
        while True:
            if not self._pending and not self._pending_gaps:
                self._wake = anyio.Event()
                await self._wake.wait()
            # The window opens with its first row; it closes after batch_ms or as
            # soon as batch_rows are waiting, whichever comes first.
            if len(self._pending) < self._batch_rows:
                self._full = anyio.Event()
                with anyio.move_on_after(self._batch_s):
                    await self._full.wait()
            async with self._lock:
                await self._flush_once()
            if self._attempts:
                # The last flush failed: back off one window before retrying.
                await anyio.sleep(self._batch_s)

    async def _flush_once(self) -> None:
        """Commit the current batch in one transaction. Caller holds the lock."""
        rows, self._pending = self._pending, []
        gaps, self._pending_gaps = self._pending_gaps, []
        if not rows and not gaps:
            return
        self._in_flight = len(rows) + len(gaps)
        newest = _newest_per_key(rows)
        journal_rows = sum(1 for r in rows if r.journal is not None)
        max_seq = max((r.seq for r in rows if r.journal is not None), default=0)
        db = self._db
        # Only flattening here (the transitions were encoded when recorded, the catalog holds
        # one row per key): cheap enough for the loop, and a worker-thread hop would cost one
        # more round trip through a loop that a burst keeps busy.
        journal, others = _flush_statements(rows, newest, gaps)
        try:
            # Shielded: a cancellation arriving mid-transaction must not leave it open
            # on the connection; a flush is short (bounded by busy_timeout).
            with anyio.CancelScope(shield=True):
                try:
                    await db.execute("BEGIN IMMEDIATE")
                    inserted = 0
                    for sql, params in journal:
                        inserted += max((await db.execute(sql, params)).rowcount, 0)
                    for sql, params in others:
                        await db.execute(sql, params)
                    if gaps:
                        await db.execute(_GAP_PRUNE, (GAP_RETENTION_ROWS,))
                    excess = self._journal_count + inserted - self._retention_rows
                    pruned = 0
                    if excess > 0:
                        pruned = max((await db.execute(_JOURNAL_PRUNE, (excess,))).rowcount, 0)
                    await db.execute("COMMIT")
                except BaseException:
                    await self._rollback()
                    raise
        except Exception as exc:  # sqlite3.Error mostly; never let the writer die
            self._flush_errors += 1
            self._attempts += 1
            if self._attempts >= MAX_FLUSH_ATTEMPTS:
                self._dropped += len(rows) + len(gaps)
                self._attempts = 0
                _log.error(
                    "store %s: dropped a batch of %d rows after %d failed flushes: %s",
                    self._path, len(rows) + len(gaps), MAX_FLUSH_ATTEMPTS, exc,
                )
            else:
                _log.warning("store %s: flush failed (will retry): %s", self._path, exc)
                self._requeue(rows, gaps)
            return
        finally:
            self._in_flight = 0
        self._attempts = 0
        self._journal_count += inserted - pruned
        self._written += inserted
        self._duplicates += journal_rows - inserted
        self._catalog_writes += len(newest)
        self._pruned += pruned
        self._batches += 1
        self._last_flushed_seq = max(self._last_flushed_seq, max_seq)

    def _requeue(self, rows: list[_Row], gaps: list[_Gap]) -> None:
        room = max(self._max_pending - len(self._pending), 0)
        keep = rows[:room]
        self._dropped += len(rows) - len(keep)
        self._pending = keep + self._pending
        self._pending_gaps = gaps + self._pending_gaps

    async def _rollback(self) -> None:
        # No transaction open (BEGIN itself failed) raises: nothing to undo then.
        with contextlib.suppress(sqlite3.Error):
            await self._db.execute("ROLLBACK")

    async def flush(self) -> None:
        """Commit everything recorded so far (waits for a flush already running).

        One transaction after taking the lock covers every row recorded before the
        call (a flush that was in flight already held its own batch), so a producer
        that keeps recording cannot keep ``flush`` busy forever. A batch that fails
        stays queued for the writer's retry; ``flush`` returns after that one attempt.
        """
        async with self._lock:
            await self._flush_once()

    async def _close(self, deadline_s: float) -> None:
        """Final flush (shielded, bounded), then no more records."""
        with anyio.move_on_after(deadline_s, shield=True):
            errors = self._flush_errors
            while (self._pending or self._pending_gaps) and self._flush_errors == errors:
                await self.flush()
        self._closed = True
        left = len(self._pending) + len(self._pending_gaps)
        if left:
            self._dropped += left
            _log.error("store %s: %d rows not flushed before the close deadline", self._path, left)
            self._pending, self._pending_gaps = [], []

    # ------------------------------------------------------------------ reading

    async def load(self) -> Restored:
        """Read the catalog back (after committing anything pending).

        Called by the daemon once at start, before any actor publishes; feed the
        result to :func:`reprove`.
        """
        self._check_open("load()")
        await self.flush()
        async with self._lock:
            rows = await self._db.execute_fetchall(
                "SELECT activity, owner_pid, owner_start_token, seq, last_seen_ms, harness, "
                "session_id FROM sessions ORDER BY seq, harness, session_id"
            )
            top = await self._db.execute_fetchall("SELECT max(seq) FROM journal")
            activities: list[Activity] = []
            owners: dict[SessionKey, Owner] = {}
            last_seq = 0
            skipped = 0
            ended_before = self._clock() - self._ended_retention_ms
            expired: list[tuple[str, str, int]] = []
            for text, pid, token, seq, seen_ms, harness, session_id in rows:
                last_seq = max(last_seq, seq)  # a deleted row's seq still counts
                activity = self._decode_activity(text)
                if activity is None:
                    skipped += 1
                    continue
                if activity.presence == "persisted" and seen_ms < ended_before:
                    # Ended long ago: nobody needs its state restored, and without this the
                    # catalog (and every snapshot, `paneward status`) grows with every
                    # session ever run. Its journal rows stay until journal retention.
                    expired.append((harness, session_id, seq))
                    continue
                activities.append(activity)
                if pid is not None and token is not None:
                    owners[activity.key] = (pid, token)
            if expired:
                await self._db.execute("BEGIN IMMEDIATE")
                try:
                    await self._db.executemany(
                        "DELETE FROM sessions WHERE harness = ? AND session_id = ? AND seq = ?",
                        expired,
                    )
                    await self._db.execute("COMMIT")
                except BaseException:
                    await self._rollback()
                    raise
                self._ended_pruned += len(expired)
        for (journal_max,) in top:
            last_seq = max(last_seq, journal_max or 0)
        return Restored(
            tuple(activities), MappingProxyType(owners), last_seq, skipped, len(expired)
        )

    def _decode_activity(self, text: str) -> Activity | None:
        try:
            item = messages.decode_outbound(text)
        except MessageError as exc:
            self._decode_errors += 1
            _log.error("store %s: catalog row does not decode: %s", self._path, exc)
            return None
        if not isinstance(item, Activity):
            self._decode_errors += 1
            return None
        return item

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
        async with self._lock:
            rows = await self._db.execute_fetchall(
                "SELECT transition FROM journal WHERE seq > ? ORDER BY seq LIMIT ?",
                (seq, limit),
            )
        out: list[Transition] = []
        for (text,) in rows:
            try:
                item = messages.decode_outbound(text)
            except MessageError as exc:
                self._decode_errors += 1
                _log.error("store %s: journal row does not decode: %s", self._path, exc)
                continue
            if isinstance(item, Transition):
                out.append(item)
            else:
                self._decode_errors += 1
        return out

    async def journal_bounds(self) -> tuple[int, int] | None:
        """``(oldest, newest)`` seq held by the journal, or ``None`` when it is empty.

        ``watch --since`` uses it to tell the user that retention pruned what they asked for.
        """
        self._check_open("journal_bounds()")
        await self.flush()
        async with self._lock:
            rows = list(await self._db.execute_fetchall("SELECT min(seq), max(seq) FROM journal"))
        low, high = rows[0]
        return None if low is None else (low, high)

    async def _count_journal(self) -> None:
        rows = list(await self._db.execute_fetchall("SELECT count(*), max(seq) FROM journal"))
        self._journal_count = rows[0][0]
        self._last_recorded_seq = rows[0][1] or 0


@contextlib.asynccontextmanager
async def open_store(
    path: Path,
    *,
    batch_ms: int = 50,
    batch_rows: int = 500,
    retention_rows: int = 100_000,
    ended_retention_ms: int = DEFAULT_ENDED_RETENTION_MS,
    max_pending: int = DEFAULT_MAX_PENDING,
    owner_of: Callable[[SessionKey], Owner | None] | None = None,
    close_timeout_s: float = 5.0,
    busy_timeout_ms: int = 5_000,
    clock: Callable[[], int] = _wall_ms,
) -> AsyncIterator[Store]:
    """Open (creating or migrating) the store at ``path`` and run its writer task.

    Parent directories are created 0700 and the file 0600. Leaving the context
    flushes everything still pending (shielded from cancellation, bounded by
    ``close_timeout_s``; rows left after that are counted as dropped) and closes the
    database. ``owner_of`` supplies owners for catalog rows when ``record`` gets none.
    ``busy_timeout_ms`` bounds how long a flush waits for another connection's write
    lock before it fails (counted; the batch is retried). ``ended_retention_ms``: catalog rows of
    sessions that ended (``persisted``) and were not seen for that long are deleted by
    :meth:`Store.load` instead of being restored.

    :raises StoreError: the file is not a paneward database, is corrupt, or has a
        newer schema version.
    """
    for name, value in (("batch_rows", batch_rows), ("retention_rows", retention_rows),
                        ("max_pending", max_pending)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, not {value}")
    if not (batch_ms > 0 and math.isfinite(batch_ms)):
        raise ValueError(f"batch_ms must be > 0, not {batch_ms}")
    if busy_timeout_ms < 0:
        raise ValueError(f"busy_timeout_ms must be >= 0, not {busy_timeout_ms}")
    if ended_retention_ms < 0:
        raise ValueError(f"ended_retention_ms must be >= 0, not {ended_retention_ms}")
    db = await _connect(Path(path), busy_timeout_ms)
    try:
        store = Store(
            db,
            Path(path),
            batch_ms=batch_ms,
            batch_rows=batch_rows,
            retention_rows=retention_rows,
            ended_retention_ms=ended_retention_ms,
            max_pending=max_pending,
            owner_of=owner_of,
            clock=clock,
        )
        try:
            await store._count_journal()  # reads every journal page: finds a corrupt body
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{path} is not a usable paneward store ({exc}); "
                "move it aside and paneward will start a new one"
            ) from exc
        body_error: BaseException | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(store._run_writer)
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
            await db.close()
