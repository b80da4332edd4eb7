"""What the store hands out: its error, its counters, what :meth:`Store.load` read back, and
the owner incarnation a catalog row records.

Shared by every module of :mod:`actors.sinks.store`; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import msgspec

from actors.core.session.reducer import SessionState
from messages import Activity, PanewardError, SessionKey

__all__ = ["Owner", "Restored", "StoreError", "StoreStatistics"]

Owner = tuple[int, str]
"""The owning process incarnation of a session: ``(pid, start_token)``."""


class StoreError(PanewardError):
    """The store cannot be used: the file is not a paneward database, is corrupt,
    has a newer schema, or the store is closed. The text names the path and what to do."""


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
    their activity, :func:`actors.core.session.reducer.from_activity`)."""
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
