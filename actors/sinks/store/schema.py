"""The store's database file: its schema, the migrations that bring an older file to it, the
statements a flush runs, and opening the file (refusing one paneward did not create).

Used by :func:`actors.sinks.store.open_store` (:func:`connect`, :func:`open_writer`) and by the
flush (:mod:`actors.sinks.store.rows` builds its statements from the heads here).
"""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import aiosqlite
import anyio

from actors.sinks.store.records import StoreError

__all__ = [
    "APPLICATION_ID",
    "CATALOG_DELETE",
    "CATALOG_UPSERT_HEAD",
    "CATALOG_UPSERT_TAIL",
    "GAP_INSERT_HEAD",
    "GAP_PRUNE",
    "JOURNAL_INSERT_HEAD",
    "JOURNAL_PRUNE",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Migration",
    "connect",
    "multi_row_statements",
    "open_writer",
]

_log = logging.getLogger(__name__)

# 'pwrd': marks the file as paneward's, so a foreign SQLite database at the
# configured path is refused instead of being "migrated" into ours.
APPLICATION_ID: Final = 0x70777264


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
# at most CHUNK_ROWS rows, never ``executemany``: sqlite3 releases the GIL around every
# statement step, and ``executemany`` steps once per row. While a burst keeps the event loop
# busy, each of those re-acquisitions waits out the interpreter's switch interval, which made a
# 500-row flush take 150-630 ms in the kill -9 burst test (10,000 hooks/s); with one step per
# chunk the same flushes take 20-60 ms (worst seen 190 ms).
CHUNK_ROWS: Final = 1000  # x 9 columns: far below SQLite's 32,766 bound variables
JOURNAL_INSERT_HEAD: Final = (
    "INSERT OR IGNORE INTO journal (seq, harness, session_id, at_ms, transition) VALUES "
)
CATALOG_UPSERT_HEAD: Final = (
    "INSERT INTO sessions (harness, session_id, activity, owner_pid, owner_start_token, "
    "pane, last_seen_ms, seq, state) VALUES "
)
CATALOG_UPSERT_TAIL: Final = (
    " ON CONFLICT (harness, session_id) DO UPDATE SET activity = excluded.activity, "
    "owner_pid = excluded.owner_pid, owner_start_token = excluded.owner_start_token, "
    "pane = excluded.pane, last_seen_ms = excluded.last_seen_ms, seq = excluded.seq, "
    "state = excluded.state"
)
GAP_INSERT_HEAD: Final = "INSERT INTO gaps (next_seq, dropped, reason, noticed_ms) VALUES "
CATALOG_DELETE: Final = "DELETE FROM sessions WHERE harness = ? AND session_id = ?"


@functools.lru_cache(maxsize=64)
def _values_clause(rows: int, columns: int) -> str:
    """``(?, ?), (?, ?)`` for ``rows`` rows of ``columns`` columns."""
    one = "(" + ", ".join("?" * columns) + ")"
    return ", ".join([one] * rows)


def multi_row_statements(
    head: str, tuples: Sequence[tuple[object, ...]], tail: str = ""
) -> Iterator[tuple[str, list[object]]]:
    """One ``(sql, parameters)`` per chunk of ``tuples`` (all of the same width)."""
    for start in range(0, len(tuples), CHUNK_ROWS):
        chunk = tuples[start : start + CHUNK_ROWS]
        params = [value for row in chunk for value in row]
        yield head + _values_clause(len(chunk), len(chunk[0])) + tail, params


# Deleting the `excess` oldest rows by rowid walks exactly `excess` b-tree entries:
# pruning costs O(rows inserted), never O(journal size).
JOURNAL_PRUNE: Final = (
    "DELETE FROM journal WHERE seq IN (SELECT seq FROM journal ORDER BY seq LIMIT ?)"
)
GAP_PRUNE: Final = (
    "DELETE FROM gaps WHERE id <= (SELECT max(id) FROM gaps) - ?"
)


def _prepare_path(path: Path) -> None:
    """Create missing parent directories (0700) and the file itself (0600), never through a
    symbolic link.

    SQLite creates ``-wal``/``-shm`` with the database file's mode, so creating the
    file first keeps the whole store private to the user (docs/design.md §11). A directory this
    creates gets its mode set on the fd it opened with ``O_NOFOLLOW`` (mkdir's mode goes through
    the umask), never by path; an existing directory is left as it is (the daemon checks its
    own state directory first: :func:`actors.sources.files.open_private_dir`).
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


async def connect(path: Path, busy_timeout_ms: int) -> aiosqlite.Connection:
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


def open_writer(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
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

