"""The persistent store: session catalog + append-only transition journal (docs/design.md §8).

Who talks to it:

* The supervisor's broadcast hub feeds it, through :meth:`Store.run_subscription` over a
  ``states=True`` subscription (or direct :meth:`Store.record` calls): every published
  :class:`messages.Transition` is appended to the ``journal`` and upserts the ``sessions``
  catalog row of its key with the reducer state behind it (captured at publish time, so a
  restart restores the whole state, not a reconstruction); a snapshot upserts catalog rows
  only; an :class:`messages.Overflow` is written to the ``gaps`` log and counted.
* On start the daemon calls :meth:`Store.load`; the supervisor re-proves every restored state
  with :func:`actors.core.reducer.reprove` *before* anything is published (docs/design.md §4,
  "Restart of paneward"); sessions that ended long ago (:func:`actors.core.reducer.settled`)
  are forgotten by ``load``.
* ``paneward watch --since SEQ`` reads :meth:`Store.journal_since`; ``paneward top`` finds where
  its last hour starts with :meth:`Store.seq_before`.

Writes never happen on the hot path: :meth:`Store.record` is synchronous, encodes the
transition's journal row (a few microseconds; each activity is encoded once and reused as the
next transition's ``before`` and as the catalog row) and appends it to an in-memory batch. One
writer task commits them in *bounded* transactions: at most ``batch_rows`` rows each, started
``batch_ms`` after the oldest waiting row was recorded or as soon as ``batch_rows`` wait, and
the next one at once while rows are still waiting. A transaction is ONE hop to a worker thread
holding the store's own write connection (multi-row ``INSERT`` statements, the catalog upsert,
the retention prune, ``COMMIT``): its duration does not depend on how busy the event loop is
(a burst of hooks cannot stretch a many-statement flush over seconds of loop round trips).

Durability (WAL, ``synchronous=NORMAL``): a committed batch survives ``kill -9`` of the daemon;
a batch is all-or-nothing; so a killed daemon loses at most the rows not yet committed
(:attr:`StoreStatistics.unflushed`): the transaction in flight (at most ``batch_rows``) plus
the rows waiting (at most ``max_pending``: beyond that a stuck disk makes the store drop rows,
counted and recorded as a gap). Under load the window is one batch in flight plus what arrives
while it commits (measured: bench/RESULTS.md). Power loss may additionally roll back the last
committed transactions; the file stays consistent either way.

Nothing is dropped silently: every written row, batch, error, drop, duplicate and gap is
counted in :meth:`Store.statistics`, and every journal row dropped (over the cap, or after
repeated failed commits) is recorded in the ``gaps`` log, which ``paneward watch --since``
reports (:meth:`Store.gaps_between`).

The seq mark (:mod:`actors.core.seq_mark`, the file ``<db>-seq`` beside the database, outside
SQLite's WAL): seqs are reserved on disk ahead of what is shown (:meth:`Store.wait_reserved`,
awaited by the control server), and the last committed seq is recorded, so at open the store
numbers past every seq anyone may have seen (after a ``kill -9`` too) and logs the gaps:
``not_committed`` (published, never committed) and ``lost_committed`` (committed, then lost by
the database: a damaged WAL), counted in :class:`StoreStatistics`.

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
import stat
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
from typing import Final, Literal, Protocol

import aiosqlite
import anyio
import msgspec

import messages
from actors.core.clock import now_ms
from actors.core.reducer import ENDED_RETENTION_MS, SessionState, from_activity, settled
from actors.core.seq_mark import (
    MARK_BYTES,
    MarkDamaged,
    SeqMark,
    decode_mark,
    encode_slot,
    resume,
    slot_offset,
)
from actors.runtime.hub import (
    StateItem,
    StateSnapshot,
    StateTransition,
    Subscription,
    ready_now,
)
from messages import (
    Activity,
    Gap,
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
    "Migration",
    "DurabilityGate",
    "Owner",
    "Restored",
    "Store",
    "StoreError",
    "StoreStatistics",
    "open_store",
]

_log = logging.getLogger(__name__)

Owner = tuple[int, str]
"""The owning process incarnation of a session: ``(pid, start_token)``."""

# 'pwrd': marks the file as paneward's, so a foreign SQLite database at the
# configured path is refused instead of being "migrated" into ours.
APPLICATION_ID: Final = 0x70777264

#: The rows waiting for a transaction are capped so a stuck disk can neither eat the daemon's
#: memory nor widen what a kill -9 loses past this; rows beyond the cap are dropped, counted
#: (StoreStatistics.dropped) and recorded as a gap.
DEFAULT_MAX_PENDING: Final = 10_000
#: A transaction starts this long after the oldest waiting row was recorded (or as soon as
#: ``batch_rows`` wait): the longest a row waits for its commit when nothing is ahead of it.
DEFAULT_BATCH_MS: Final = 50
#: Catalog rows of settled sessions (ended, nothing to act on: actors.core.reducer.settled) not
#: seen for this long are deleted at the next start rather than restored.
DEFAULT_ENDED_RETENTION_MS: Final = ENDED_RETENTION_MS
#: A batch whose transaction failed is retried this many times, then dropped (counted).
MAX_FLUSH_ATTEMPTS: Final = 3
#: Newest rows kept in the gap log.
GAP_RETENTION_ROWS: Final = 1_000
#: Default upper bound on ``journal_since`` results.
DEFAULT_JOURNAL_LIMIT: Final = 10_000
#: Seqs the seq mark reserves at a time (raised again when what was shown comes within half of
#: it): one ``fsync`` per block, and after a ``kill -9`` a ``not_committed`` gap of at most a
#: block more than was really published.
DEFAULT_SEQ_BLOCK: Final = 2_000
#: The seq mark's ``committed`` is rewritten at most this often while commits go on.
MARK_INTERVAL_S: Final = 1.0
#: After a failed write of the seq mark, wait this long, doubling up to the maximum.
MARK_RETRY_S: Final = 0.05
MARK_RETRY_MAX_S: Final = 2.0
#: A store that has neither committed nor dropped anything for this long while rows wait is
#: stuck (a locked or failing disk): backpressure then lets intake go on (rows beyond
#: ``max_pending`` are dropped as gaps) rather than stall the daemon.
BACKPRESSURE_STALL_S: Final = 1.0


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
    Migration(
        3,
        "the reducer state behind each catalog row (restored whole after a restart)",
        ("ALTER TABLE sessions ADD COLUMN state TEXT",),
    ),
    Migration(
        4,
        # With its reducer state a catalog row is over a kilobyte: SQLite's WITHOUT ROWID is
        # for rows far smaller than a page, and the catalog upsert (every session a batch
        # touched, in every transaction) was the most of a transaction's time.
        "the session catalog as a rowid table with a unique key",
        (
            """CREATE TABLE sessions_v4 (
                harness TEXT NOT NULL,
                session_id TEXT NOT NULL,
                activity TEXT NOT NULL,
                owner_pid INTEGER,
                owner_start_token TEXT,
                pane TEXT,
                last_seen_ms INTEGER NOT NULL,
                seq INTEGER NOT NULL,
                state TEXT,
                UNIQUE (harness, session_id)
            )""",
            "INSERT INTO sessions_v4 (harness, session_id, activity, owner_pid, "
            "owner_start_token, pane, last_seen_ms, seq, state) SELECT harness, session_id, "
            "activity, owner_pid, owner_start_token, pane, last_seen_ms, seq, state FROM sessions",
            "DROP TABLE sessions",
            "ALTER TABLE sessions_v4 RENAME TO sessions",
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
_CHUNK_ROWS: Final = 1000  # x 9 columns: far below SQLite's 32,766 bound variables
_JOURNAL_INSERT_HEAD: Final = (
    "INSERT OR IGNORE INTO journal (seq, harness, session_id, at_ms, transition) VALUES "
)
_CATALOG_UPSERT_HEAD: Final = (
    "INSERT INTO sessions (harness, session_id, activity, owner_pid, owner_start_token, "
    "pane, last_seen_ms, seq, state) VALUES "
)
_CATALOG_UPSERT_TAIL: Final = (
    " ON CONFLICT (harness, session_id) DO UPDATE SET activity = excluded.activity, "
    "owner_pid = excluded.owner_pid, owner_start_token = excluded.owner_start_token, "
    "pane = excluded.pane, last_seen_ms = excluded.last_seen_ms, seq = excluded.seq, "
    "state = excluded.state"
)
_GAP_INSERT_HEAD: Final = "INSERT INTO gaps (next_seq, dropped, reason, noticed_ms) VALUES "
_CATALOG_DELETE: Final = "DELETE FROM sessions WHERE harness = ? AND session_id = ?"


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


# --------------------------------------------------------------------------- records


class StoreStatistics(msgspec.Struct, kw_only=True):
    """Counters of one open store (all since open_store): one record the store keeps and
    :meth:`Store.statistics` copies."""

    recorded: int = 0
    """Transitions accepted by ``record``."""
    snapshot_rows: int = 0
    """Catalog rows accepted from Snapshots."""
    rejected: int = 0
    """Calls to ``record``/``record_snapshot``/``record_gap`` refused as invalid."""
    ignored: int = 0
    """Subscription items that are none of Snapshot/Transition/Overflow."""
    seq_regressions: int = 0
    """Transitions whose seq did not exceed the previous one (caller contract broken)."""
    written: int = 0
    """Journal rows committed."""
    duplicates: int = 0
    """Transitions whose seq was already in the journal (kept once)."""
    catalog_writes: int = 0
    """Catalog rows upserted (the newest per key per batch)."""
    batches: int = 0
    """Committed flush transactions."""
    flush_errors: int = 0
    """Flush transactions that failed and were rolled back (the batch is retried)."""
    dropped: int = 0
    """Rows lost on purpose: over the pending cap, after repeated flush failures,
    or still pending when the close deadline expired."""
    gaps: int = 0
    """Overflow markers recorded (a subscription fell behind)."""
    gap_transitions: int = 0
    """Transitions the hub reported as not delivered to the store (sum of Overflow.dropped)."""
    pruned: int = 0
    """Journal rows deleted by retention."""
    ended_pruned: int = 0
    """Catalog rows of long-ended sessions deleted by ``load`` (``ended_retention_ms``)."""
    decode_errors: int = 0
    """Stored rows that no longer decode (skipped by load/journal_since)."""
    pending: int = 0
    """Rows waiting for the next flush."""
    in_flight: int = 0
    """Rows in the flush transaction currently running."""
    last_flushed_seq: int = 0
    """Highest journal seq committed by this store (0 if none)."""
    backpressure_stalls: int = 0
    """Times intake stopped waiting for this store because it made no progress for
    ``BACKPRESSURE_STALL_S`` (a stuck disk): see :meth:`Store.backpressure`."""
    lost_committed: int = 0
    """Rows the seq mark says were committed that the journal no longer held at open (SQLite
    dropped them with a damaged WAL, or the file was put back from a backup): recorded as a
    ``lost_committed`` gap. ``paneward status`` shows it."""
    not_committed: int = 0
    """Seqs the last run reserved (a watcher may have seen them) that no committed row held at
    open: it stopped (``kill -9``, power loss, the close deadline) before committing them, or
    never used them. Recorded as a ``not_committed`` gap; numbering continues after them."""
    mark_reserved: int = 0
    """The seq mark on disk: no seq above it was shown to anyone."""
    mark_committed: int = 0
    """The seq mark on disk: every seq up to it was committed."""
    mark_writes: int = 0
    """Records written to the seq mark (each one ``fsync``-ed)."""
    mark_errors: int = 0
    """Seq-mark writes that failed (retried with backoff), and a mark file found damaged."""

    @property
    def unflushed(self) -> int:
        """Rows a ``kill -9`` right now would lose: the batch window plus the flush in flight."""
        return self.pending + self.in_flight


@dataclass(frozen=True, slots=True)
class Restored:
    """What :meth:`Store.load` read back: the catalog as of the last committed batch."""

    states: tuple[SessionState, ...]
    """The reducer state of every session kept (rows written before schema 3 are rebuilt from
    their activity, :func:`actors.core.reducer.from_activity`)."""
    last_seq: int
    """Max of the journal's and the catalog's seq and of the seq mark (what the last run
    reserved, :mod:`actors.core.seq_mark`): number new transitions after it."""
    skipped: int = 0
    """Catalog rows that did not decode (counted in StoreStatistics.decode_errors)."""
    ended_pruned: int = 0
    """Rows of sessions settled more than ``ended_retention_ms`` ago: deleted, not restored."""

    @property
    def activities(self) -> tuple[Activity, ...]:
        """The published activity of every session kept."""
        return tuple(s.activity for s in self.states if s.activity is not None)

    @property
    def owners(self) -> Mapping[SessionKey, Owner]:
        """Owner incarnation per key, for states that recorded one."""
        return MappingProxyType(
            {
                s.key: (s.owner_pid, s.owner_token)
                for s in self.states
                if s.owner_pid is not None and s.owner_token is not None
            }
        )


# --------------------------------------------------------------------------- rows


class _Row(msgspec.Struct, frozen=True, gc=False):
    """One pending write: a journal row (``journal`` set) and/or a catalog row.

    A Struct rather than a frozen dataclass: one is made per recorded transition, and a frozen
    dataclass's ``__init__`` costs ten times as much (2.4 against 0.2 us here).
    """

    seq: int
    activity: Activity
    # The activity's JSON, encoded once when recorded (the journal row embeds the same bytes).
    activity_json: msgspec.Raw
    # (seq, harness, session_id, at_ms, transition JSON), encoded when recorded: a few
    # microseconds per transition spread over the stream, rather than a whole batch's worth
    # of Python work at flush time competing with the event loop for the GIL.
    journal: tuple[int, str, str, int | None, str] | None
    owner: Owner | None
    state: SessionState | None
    seen_ms: int
    # The session's last transition (Transition.forgets): its catalog row is deleted.
    forgets: bool = False


class _JournalTransition(msgspec.Struct, gc=False, tag="Transition", tag_field="type"):
    """:class:`messages.Transition` with its activities as already-encoded JSON.

    Encodes to exactly the bytes ``messages.encode(transition)`` gives (same fields, same
    order), without encoding an activity a second time.
    """

    seq: int
    key: SessionKey
    after: msgspec.Raw
    cause: str
    before: msgspec.Raw | None = None


# The catalog's state column: the reducer state without its activity (that is the activity
# column) and without the per-process duplicate fingerprints.
_STATE_ENCODER: Final = msgspec.json.Encoder()
_STATE_DECODER: Final = msgspec.json.Decoder(SessionState)
_ENCODER: Final = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class _Gap:
    next_seq: int
    dropped: int
    reason: str
    noticed_ms: int


def _journal_row(
    t: Transition, after: msgspec.Raw, before: msgspec.Raw | None
) -> tuple[int, str, str, int | None, str]:
    ev = t.after.evidence
    at_ms = ev.at_ms if ev.at_ms is not None else ev.observed_at_ms
    text = _ENCODER.encode(_JournalTransition(t.seq, t.key, after, t.cause, before)).decode()
    return (t.seq, t.key.harness, t.key.session_id, at_ms, text)


def _flush_statements(
    rows: Sequence[_Row], newest: Sequence[_Row], gaps: Sequence[_Gap]
) -> tuple[list[tuple[str, list[object]]], list[tuple[str, list[object]]]]:
    """The journal inserts, and the catalog upserts + gap inserts, of one flush."""
    journal_rows = [row.journal for row in rows if row.journal is not None]
    journal = list(_multi_row_statements(_JOURNAL_INSERT_HEAD, journal_rows))
    kept = [row for row in newest if not row.forgets]
    others = list(
        _multi_row_statements(
            _CATALOG_UPSERT_HEAD, list(_catalog_rows(kept)), _CATALOG_UPSERT_TAIL
        )
    )
    others += [
        (_CATALOG_DELETE, [row.activity.key.harness, row.activity.key.session_id])
        for row in newest
        if row.forgets
    ]
    gap_rows = [(g.next_seq, g.dropped, g.reason, g.noticed_ms) for g in gaps]
    others += _multi_row_statements(_GAP_INSERT_HEAD, gap_rows)
    return journal, others


def _newest_per_key(rows: Sequence[_Row]) -> list[_Row]:
    newest: dict[SessionKey, _Row] = {}
    for row in rows:  # recording order: the last recorded row of a key wins
        newest[row.activity.key] = row
    return list(newest.values())


def _catalog_rows(rows: Sequence[_Row]) -> Iterator[tuple[object, ...]]:
    for row in rows:
        a = row.activity
        pid, token = row.owner if row.owner is not None else (None, None)
        state = row.state
        yield (
            a.key.harness,
            a.key.session_id,
            bytes(row.activity_json).decode(),
            pid,
            token,
            a.pane,
            row.seen_ms,
            row.seq,
            None
            if state is None
            else _STATE_ENCODER.encode(
                msgspec.structs.replace(state, activity=None, recent=())
            ).decode(),
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


# --------------------------------------------------------------------------- opening


def _prepare_path(path: Path) -> None:
    """Create missing parent directories (0700) and the file itself (0600), never through a
    symbolic link.

    SQLite creates ``-wal``/``-shm`` with the database file's mode, so creating the
    file first keeps the whole store private to the user (docs/design.md §11). A directory this
    creates gets its mode set on the fd it opened with ``O_NOFOLLOW`` (mkdir's mode goes through
    the umask), never by path; an existing directory is left as it is (the daemon checks its
    own state directory first: :func:`actors.runtime.files.open_private_dir`).
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
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fchmod(fd, 0o700)
        finally:
            os.close(fd)
    try:
        fd = os.open(
            path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
    except FileExistsError:
        return
    os.close(fd)


async def _pragma(db: aiosqlite.Connection, sql: str) -> object:
    rows = list(await db.execute_fetchall(sql))
    return rows[0][0] if rows else None


async def _check_ours(db: aiosqlite.Connection, path: Path) -> None:
    """Refuse a database paneward did not create, before anything is written to it (WAL mode
    included: switching a foreign file to WAL would already change it)."""
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


async def _migrate(db: aiosqlite.Connection, path: Path) -> int:
    """Bring the schema to SCHEMA_VERSION; return the version found on disk. The caller has
    refused a foreign file already (:func:`_check_ours`, before WAL was set)."""
    version = await _pragma(db, "PRAGMA user_version")
    assert isinstance(version, int)
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
        await _check_ours(db, path)  # before WAL: a foreign file is never changed
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


def _open_writer(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """The store's write connection (blocking): used only from worker threads, one
    transaction at a time under the store's lock."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA synchronous = NORMAL")  # per connection; WAL is the file's
    except BaseException:
        conn.close()
        raise
    return conn


def _open_mark_file(path: Path) -> int:
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


# --------------------------------------------------------------------------- the store


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
        self._writer = writer
        # The seq mark (actors.core.seq_mark): the record on disk, the seq numbering continues
        # after (set at open), the highest seq shown through wait_reserved, whether anything
        # was, and the events of its writer task.
        self._mark_fd = mark_fd
        self._seq_block = seq_block
        self._mark = SeqMark()
        self._floor = 0
        self._shown = 0
        self._asked = False
        self._mark_lock = anyio.Lock()
        self._mark_wake = anyio.Event()
        self._mark_moved = anyio.Event()
        self._mark_written_at = -math.inf
        self._path = path
        self._batch_s = batch_ms / 1000
        self._batch_rows = batch_rows
        self._retention_rows = retention_rows
        self._ended_retention_ms = ended_retention_ms
        self._max_pending = max_pending
        self._clock = clock
        self._pending: list[_Row] = []
        self._pending_gaps: list[_Gap] = []
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
        self._last_recorded_seq = 0
        # The newest activity recorded per key and its JSON: it is the next transition's
        # ``before`` (the hub hands the same object), so it is never encoded twice.
        self._encoded: dict[SessionKey, tuple[Activity, msgspec.Raw]] = {}
        self._closed = False
        self._lock = anyio.Lock()
        self._wake = anyio.Event()
        self._full = anyio.Event()
        self._stats = StoreStatistics()

    @property
    def path(self) -> Path:
        return self._path

    def statistics(self) -> StoreStatistics:
        """A point-in-time copy of the counters (never blocks)."""
        return msgspec.structs.replace(
            self._stats,
            pending=len(self._pending) + len(self._pending_gaps),
            mark_reserved=self._mark.reserved,
            mark_committed=self._mark.committed,
        )

    # ------------------------------------------------------------------ recording (sync)

    def _check_open(self, what: str) -> None:
        if self._closed:
            self._stats.rejected += 1
            raise StoreError(f"{what} on a closed store ({self._path})")

    def _append(self, row: _Row) -> None:
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

    def _note_drop(self, first_seq: int, count: int, reason: str) -> None:
        """Record in the gap log that ``count`` journal rows from ``first_seq`` were dropped
        (extending the last pending gap when it is the same run)."""
        gaps = self._pending_gaps
        if gaps:
            last = gaps[-1]
            if last.reason == reason and last.next_seq + last.dropped == first_seq:
                gaps[-1] = _Gap(last.next_seq, last.dropped + count, reason, last.noticed_ms)
                return
        if len(gaps) >= GAP_RETENTION_ROWS:
            return  # the log keeps the newest GAP_RETENTION_ROWS anyway; the count is exact
        gaps.append(_Gap(first_seq, count, reason, self._clock()))
        self._wake.set()

    def _encode_activity(self, activity: Activity) -> msgspec.Raw:
        known = self._encoded.get(activity.key)
        if known is not None and known[0] is activity:
            return known[1]
        raw = msgspec.Raw(_ENCODER.encode(activity))
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
        self._append(
            _Row(
                seq,
                transition.after,
                after_json,
                _journal_row(transition, after_json, before_json),
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
            return _check_owner(owner)
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
            self._append(
                _Row(
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
        self._pending_gaps.append(
            _Gap(overflow.next_seq, overflow.dropped, overflow.reason, self._clock())
        )
        self._wake.set()

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

    async def _run_writer(self) -> None:
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
            async with self._lock:
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
        if self._stats.last_flushed_seq > self._mark.committed:
            self._mark_wake.set()  # the mark's committed seq follows, at most once a second

    def _advanced(self, seq: int) -> None:
        """Rows up to ``seq`` are committed or given up on: wake whoever waits for that."""
        self._recovered.set()
        self._handled_seq = max(self._handled_seq, seq)
        self._last_progress = anyio.current_time()
        self._progress.set()
        self._progress = anyio.Event()

    @property
    def handled_seq(self) -> int:
        """The highest journal seq committed or dropped (counted) by this store."""
        return self._handled_seq

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
            self, published, self._batch_rows if limit is None else limit, stall_s
        )
    def _commit(
        self, rows: Sequence[_Row], gaps: Sequence[_Gap], journal_count: int
    ) -> tuple[int, int, int]:
        """One transaction on the write connection (worker thread); returns the journal rows
        inserted, the journal rows pruned and the catalog rows upserted."""
        newest = _newest_per_key(rows)
        journal, others = _flush_statements(rows, newest, gaps)
        db = self._writer
        db.execute("BEGIN IMMEDIATE")
        try:
            inserted = 0
            for sql, params in journal:
                inserted += max(db.execute(sql, params).rowcount, 0)
            for sql, params in others:
                db.execute(sql, params)
            if gaps:
                db.execute(_GAP_PRUNE, (GAP_RETENTION_ROWS,))
            excess = journal_count + inserted - self._retention_rows
            pruned = 0
            if excess > 0:
                pruned = max(db.execute(_JOURNAL_PRUNE, (excess,)).rowcount, 0)
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")  # none open (BEGIN itself failed) raises: nothing to undo
            raise
        return inserted, pruned, len(newest)

    def _drop_rows(self, rows: Sequence[_Row], reason: str) -> None:
        top = 0
        for row in rows:
            if row.journal is not None:
                self._note_drop(row.seq, 1, reason)
                top = max(top, row.seq)
        if top:
            self._advanced(top)

    def _requeue(self, rows: list[_Row], gaps: list[_Gap]) -> None:
        room = max(self._max_pending - len(self._pending), 0)
        keep = rows[:room]
        self._stats.dropped += len(rows) - len(keep)
        self._drop_rows(rows[room:], "store_full")
        if keep:
            self._window_opened = anyio.current_time()
        self._pending = keep + self._pending
        self._pending_gaps = gaps + self._pending_gaps

    async def _rollback(self) -> None:
        # No transaction open (BEGIN itself failed) raises: nothing to undo then.
        with contextlib.suppress(sqlite3.Error):
            await self._db.execute("ROLLBACK")

    async def flush(self) -> None:
        """Commit everything recorded so far (waits for a flush already running).

        As many bounded transactions as the rows recorded before the call need, under the
        lock, so a producer that keeps recording cannot keep ``flush`` busy forever. A batch
        that fails stays queued for the writer's retry; ``flush`` returns after that attempt.
        """
        async with self._lock:
            remaining = len(self._pending)
            while True:
                errors = self._stats.flush_errors
                taken = min(remaining, self._batch_rows)
                await self._flush_once()
                remaining -= taken
                if self._stats.flush_errors != errors or remaining <= 0:
                    return

    async def _close(self, deadline_s: float) -> None:
        """Final flush (shielded, bounded), then no more records; then the seq mark's last
        record: ``committed`` what was, ``reserved`` brought down to the highest seq recorded
        or shown (nothing above it was handed out), so a clean stop leaves no gap."""
        with anyio.move_on_after(deadline_s, shield=True):
            errors = self._stats.flush_errors
            while (self._pending or self._pending_gaps) and self._stats.flush_errors == errors:
                await self.flush()
        self._closed = True
        left = len(self._pending) + len(self._pending_gaps)
        if left:
            self._stats.dropped += left
            _log.error("store %s: %d rows not flushed before the close deadline", self._path, left)
            self._pending, self._pending_gaps = [], []
        used = max(self._floor, self._shown, self._last_recorded_seq, self._stats.last_flushed_seq)
        with anyio.move_on_after(deadline_s, shield=True):
            await self._write_mark(used, self._committed_mark(), final=True)
        self._mark_moved.set()  # nobody waits for a reservation of a closed store

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
        self._asked = True
        if seq > self._shown:
            self._shown = seq
        if self._shown + self._seq_block // 2 > self._mark.reserved:
            self._mark_wake.set()
        while seq > self._mark.reserved and not self._closed:
            moved = self._mark_moved
            await moved.wait()

    def _committed_mark(self) -> int:
        return max(self._mark.committed, self._stats.last_flushed_seq)

    async def _open_mark(self, path: Path) -> None:
        """Read the seq mark at open, decide where numbering continues and which gaps the
        journal has (:func:`actors.core.seq_mark.resume`), queue those gaps for the first
        transaction (once: a gap already logged is not logged again), and write the mark.

        :raises StoreError: the mark file cannot be read (not a regular file, a link).
        """
        try:
            data = await anyio.to_thread.run_sync(os.pread, self._mark_fd, MARK_BYTES, 0)
        except OSError as exc:
            raise StoreError(f"cannot read the seq mark {path}: {exc}") from exc
        try:
            mark = decode_mark(data)
        except MarkDamaged as exc:
            self._stats.mark_errors += 1
            _log.error("store %s: the seq mark is damaged (%s); numbering continues after the "
                       "journal", path, exc)
            mark = SeqMark()
        rows = list(await self._db.execute_fetchall("SELECT max(seq) FROM sessions"))
        catalog_max = rows[0][0] or 0
        decided = resume(self._last_recorded_seq, catalog_max, mark)
        known = set(
            await self._db.execute_fetchall(
                "SELECT next_seq, dropped, reason FROM gaps "
                "WHERE reason IN ('lost_committed', 'not_committed')"
            )
        )
        now = self._clock()
        for next_seq, dropped, reason in decided.gaps:
            if (next_seq, dropped, reason) not in known:
                self._pending_gaps.append(_Gap(next_seq, dropped, reason, now))
        self._stats.lost_committed = decided.lost
        self._stats.not_committed = decided.not_committed
        if decided.lost:
            _log.error(
                "store %s: the journal ends at seq %d but seqs up to %d were committed: %d "
                "committed rows are lost (a damaged write-ahead log, or an older copy of the "
                "database); recorded as a gap", self._path, self._last_recorded_seq,
                mark.committed, decided.lost,
            )
        self._mark = mark
        self._floor = decided.start_seq
        await self._write_mark(decided.start_seq, max(mark.committed, self._last_recorded_seq))

    async def _write_mark(self, reserved: int, committed: int, *, final: bool = False) -> bool:
        """Write (and ``fsync``) the next record of the seq mark; False if that failed. Once
        the store is closed only the ``final`` record (from ``_close``) is written."""
        async with self._mark_lock:
            if self._closed and not final:
                return True
            mark = SeqMark(self._mark.generation + 1, reserved, committed)
            try:
                await anyio.to_thread.run_sync(_write_mark_record, self._mark_fd, mark)
            except OSError as exc:
                self._stats.mark_errors += 1
                _log.error("store %s: cannot write the seq mark: %s", self._path, exc)
                return False
            self._mark = mark
            self._stats.mark_writes += 1
            self._mark_written_at = anyio.current_time()
            self._mark_moved.set()
            self._mark_moved = anyio.Event()
            return True

    async def _run_marker(self) -> None:
        """The seq mark's writer task (started by open_store): raises the reservation a block
        ahead as soon as what is shown needs it; follows the committed seq at most once every
        :data:`MARK_INTERVAL_S`; a failed write is retried with a growing delay."""
        retry = MARK_RETRY_S
        while not self._closed:
            mark = self._mark
            reserved = mark.reserved
            if self._asked and self._shown + self._seq_block // 2 > reserved:
                reserved = self._shown + self._seq_block
            committed = self._committed_mark()
            if reserved == mark.reserved and committed == mark.committed:
                self._mark_wake = anyio.Event()
                await self._mark_wake.wait()
                continue
            if reserved == mark.reserved:
                # Only the committed seq moved: it may wait for the interval (a reservation
                # asked for meanwhile does not).
                due = self._mark_written_at + MARK_INTERVAL_S - anyio.current_time()
                if due > 0:
                    self._mark_wake = anyio.Event()
                    with anyio.move_on_after(due):
                        await self._mark_wake.wait()
                    continue
            if await self._write_mark(reserved, committed):
                retry = MARK_RETRY_S
            else:
                await anyio.sleep(retry)
                retry = min(retry * 2, MARK_RETRY_MAX_S)

    # ------------------------------------------------------------------ reading

    async def load(self) -> Restored:
        """Read the catalog back (after committing anything pending).

        Called by the daemon once at start, before any actor publishes; the supervisor
        re-proves the states (:meth:`supervisor.Supervisor.restore`). Rows of sessions that
        settled (:func:`actors.core.reducer.settled`) more than ``ended_retention_ms`` ago are
        deleted instead (their seq still counts).
        """
        self._check_open("load()")
        await self.flush()
        async with self._lock:
            rows = await self._db.execute_fetchall(
                "SELECT activity, owner_pid, owner_start_token, seq, last_seen_ms, harness, "
                "session_id, state FROM sessions ORDER BY seq, harness, session_id"
            )
            top = await self._db.execute_fetchall("SELECT max(seq) FROM journal")
            states: list[SessionState] = []
            last_seq = 0
            skipped = 0
            ended_before = self._clock() - self._ended_retention_ms
            expired: list[tuple[str, str, int]] = []
            for text, pid, token, seq, seen_ms, harness, session_id, state_text in rows:
                last_seq = max(last_seq, seq)  # a deleted row's seq still counts
                activity = self._decode_activity(text)
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
                state = self._decode_state(state_text, activity)
                if state.owner_pid is None and pid is not None and token is not None:
                    state = msgspec.structs.replace(state, owner_pid=pid, owner_token=token)
                states.append(state)
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
                self._stats.ended_pruned += len(expired)
        for (journal_max,) in top:
            last_seq = max(last_seq, journal_max or 0)
        last_seq = max(last_seq, self._floor)  # what the last run reserved: maybe seen
        return Restored(tuple(states), last_seq, skipped, len(expired))

    def _decode_state(self, text: str | None, activity: Activity) -> SessionState:
        """The catalog row's reducer state, with its activity; rebuilt when absent or bad."""
        if text is not None:
            try:
                state = _STATE_DECODER.decode(text)
            except msgspec.DecodeError as exc:
                self._stats.decode_errors += 1
                _log.error("store %s: state of %s does not decode: %s", self._path,
                           activity.key, exc)
            else:
                if state.key == activity.key:
                    return msgspec.structs.replace(state, activity=activity)
                self._stats.decode_errors += 1
        return from_activity(activity)

    def _decode_activity(self, text: str) -> Activity | None:
        try:
            item = messages.decode_outbound(text)
        except MessageError as exc:
            self._stats.decode_errors += 1
            _log.error("store %s: catalog row does not decode: %s", self._path, exc)
            return None
        if not isinstance(item, Activity):
            self._stats.decode_errors += 1
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
                self._stats.decode_errors += 1
                _log.error("store %s: journal row does not decode: %s", self._path, exc)
                continue
            if isinstance(item, Transition):
                out.append(item)
            else:
                self._stats.decode_errors += 1
        return out

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
        async with self._lock:
            rows = list(
                await self._db.execute_fetchall(
                    "SELECT seq FROM journal WHERE at_ms >= ? ORDER BY seq LIMIT 1", (at_ms,)
                )
            )
            if not rows:
                rows = list(await self._db.execute_fetchall("SELECT max(seq) + 1 FROM journal"))
        first = rows[0][0]
        return 0 if first is None else max(0, int(first) - 1)

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

    async def gaps_between(self, since: int, until: int) -> list[Gap]:
        """Where the journal misses transitions with ``since < seq <= until``, oldest first.

        For ``paneward watch --since SEQ``: the gap log's rows in that range (transitions the
        store dropped, or its subscription never got, including those a failing disk keeps in
        memory for now), and ``retention`` gaps for the rest of what is missing before the
        oldest row the journal keeps.
        """
        self._check_open("gaps_between()")
        await self.flush()
        async with self._lock:
            rows = list(
                await self._db.execute_fetchall(
                    "SELECT next_seq, dropped, reason, noticed_ms FROM gaps "
                    "WHERE next_seq + dropped > ? AND next_seq <= ? ORDER BY next_seq, id",
                    (since, until),
                )
            )
            bounds = list(await self._db.execute_fetchall("SELECT min(seq) FROM journal"))
        recorded = [
            Gap(next_seq=next_seq, dropped=dropped, reason=reason, noticed_ms=noticed_ms)
            for next_seq, dropped, reason, noticed_ms in rows
        ]
        recorded += [
            Gap(next_seq=g.next_seq, dropped=g.dropped, reason=g.reason, noticed_ms=g.noticed_ms)
            for g in self._pending_gaps
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
                                     reason="retention", noticed_ms=self._clock()))
            cursor = max(cursor, gap.next_seq + gap.dropped)
        if oldest is not None and cursor <= end:
            retention.append(Gap(next_seq=cursor, dropped=end - cursor + 1,
                                 reason="retention", noticed_ms=self._clock()))
        return sorted(recorded + retention, key=lambda g: g.next_seq)

    async def _count_journal(self) -> None:
        rows = list(await self._db.execute_fetchall("SELECT count(*), max(seq) FROM journal"))
        self._journal_count = rows[0][0]
        self._last_recorded_seq = rows[0][1] or 0
        self._handled_seq = self._last_recorded_seq


class DurabilityGate:
    """Backpressure from the store to intake (made by :meth:`Store.backpressure`).

    ``closed()`` while the hub's seq runs ``limit`` or more ahead of the store's
    :attr:`~Store.handled_seq` (committed or dropped), so a ``kill -9`` loses at most about
    one batch whatever the load; ``wait()`` returns at the store's next progress, or once it has
    been held up ``stall_s`` with no progress (a stuck disk never stalls intake for longer: the
    store then drops what it cannot keep, as gaps, and the gate stays open until the store
    moves again). ``waits`` and ``stalls`` count both.
    """

    def __init__(
        self, store: Store, published: Callable[[], int], limit: int, stall_s: float
    ) -> None:
        self._store = store
        self._published = published
        self._limit = limit
        self._stall_s = stall_s
        self._base = published() - store.handled_seq  # what was restored, not recorded here
        self._held_since: float | None = None  # since when the lag has been over the limit
        self.waits = 0
        self.stalls = 0

    def _lag(self) -> int:
        return self._published() - self._base - self._store.handled_seq

    def _held_for(self) -> float:
        now = anyio.current_time()
        if self._held_since is None:
            self._held_since = now
        return now - max(self._held_since, self._store._last_progress)

    def closed(self) -> bool:
        if self._lag() < self._limit:
            self._held_since = None
            return False
        return self._held_for() < self._stall_s

    async def wait(self) -> None:
        self.waits += 1
        store = self._store
        while self.closed():
            with anyio.move_on_after(max(self._stall_s - self._held_for(), 0.0)) as scope:
                await store._progress.wait()
            if scope.cancelled_caught and self._lag() >= self._limit:
                self.stalls += 1
                store._stats.backpressure_stalls += 1
                return


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
    db = await _connect(Path(path), busy_timeout_ms)
    writer: sqlite3.Connection | None = None
    mark_fd: int | None = None
    mark_path = Path(path).with_name(Path(path).name + "-seq")
    try:
        writer = await anyio.to_thread.run_sync(_open_writer, Path(path), busy_timeout_ms)
        try:
            mark_fd = await anyio.to_thread.run_sync(_open_mark_file, mark_path)
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
        try:
            await store._count_journal()  # reads every journal page: finds a corrupt body
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{path} is not a usable paneward store ({exc}); "
                "move it aside and paneward will start a new one"
            ) from exc
        await store._open_mark(mark_path)
        body_error: BaseException | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(store._run_writer)
            tg.start_soon(store._run_marker)
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
