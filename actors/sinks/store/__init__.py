"""The persistent store: session catalog + append-only transition journal (docs/design.md §8).

One room, one job per module:

==============  ==============================================================================
``actor``       :class:`Store` (the thin shell every call goes through) and :func:`open_store`
``records``     what it hands out: :class:`StoreError`, :class:`StoreStatistics`,
                :class:`Restored`, ``Owner``
``schema``      the database file: migrations, the flush's statements, opening the file
``rows``        the rows of a flush, built as transitions are recorded (pure)
``writer``      the batches and their bounded transactions; backpressure (:class:`DurabilityGate`)
``marker``      the seq mark file beside the database (decided by :mod:`actors.core.seq_mark`)
``reader``      reading the catalog, the journal and its gaps back
==============  ==============================================================================

Who talks to it:

* The supervisor's broadcast hub feeds it, through :meth:`Store.run_subscription` over a
  ``states=True`` subscription (or direct :meth:`Store.record` calls): every published
  :class:`messages.Transition` is appended to the ``journal`` and upserts the ``sessions``
  catalog row of its key with the reducer state behind it (captured at publish time, so a
  restart restores the whole state, not a reconstruction); a snapshot upserts catalog rows
  only; an :class:`messages.Overflow` is written to the ``gaps`` log and counted.
* On start the daemon calls :meth:`Store.load`; the supervisor re-proves every restored state
  with :func:`actors.core.session.reducer.reprove` *before* anything is published
  (docs/design.md §4, "Restart of paneward"); sessions that ended long ago
  (:func:`actors.core.session.reducer.settled`) are forgotten by ``load``.
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
(a many-statement flush would stretch over a burst's loop round trips).

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

from actors.sinks.store.actor import StateSource, Store, open_store
from actors.sinks.store.marker import DEFAULT_SEQ_BLOCK
from actors.sinks.store.reader import DEFAULT_ENDED_RETENTION_MS, DEFAULT_JOURNAL_LIMIT
from actors.sinks.store.records import Owner, Restored, StoreError, StoreStatistics
from actors.sinks.store.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION, Migration
from actors.sinks.store.writer import (
    BACKPRESSURE_STALL_S,
    DEFAULT_BATCH_MS,
    DEFAULT_MAX_PENDING,
    DurabilityGate,
)

__all__ = [
    "APPLICATION_ID",
    "BACKPRESSURE_STALL_S",
    "DEFAULT_BATCH_MS",
    "DEFAULT_ENDED_RETENTION_MS",
    "DEFAULT_JOURNAL_LIMIT",
    "DEFAULT_MAX_PENDING",
    "DEFAULT_SEQ_BLOCK",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "DurabilityGate",
    "Migration",
    "Owner",
    "Restored",
    "StateSource",
    "Store",
    "StoreError",
    "StoreStatistics",
    "open_store",
]
