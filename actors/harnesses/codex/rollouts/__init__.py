"""Codex rollout discovery: who owns which thread, and the lifecycle records they append.

Facts this rests on (real rollouts in tests/fixtures/codex/):

- A Codex thread's rollout is ``<CODEX_HOME or ~/.codex>/sessions/YYYY/MM/DD/
  rollout-<YYYY-MM-DDTHH-MM-SS>-<thread-id>.jsonl``. The process that runs the
  thread keeps it open (``O_APPEND``) while the thread is loaded: ``codex exec``,
  the in-process TUI, or the shared ``app-server`` daemon that outlives the TUI and
  finishes turns in the background. All of them have comm exactly ``codex`` (the
  npm wrapper is ``node``). Ownership is therefore "comm ``codex`` + open fd",
  whoever holds it; the daemon is a first-class owner.
- Each line is ``{"timestamp","ordinal","type","payload"}``; the first is
  ``session_meta`` (``payload.id`` is the thread id; a child thread names its
  parent in ``payload.source.subagent.thread_spawn.parent_thread_id`` or
  ``payload.parent_thread_id``). Turn boundaries are ``event_msg`` records whose
  ``payload.type`` is ``task_started``, ``task_complete`` or ``turn_aborted``.
  Nothing here says a call waits for approval (the daemon's status does; the call it waits
  on is read from the tail by :mod:`actors.harnesses.codex.approvals`).

One job per module; the first three are the functional core (no I/O, tested without an
event loop):

- ``parsing`` -- a rollout line's turn boundary, the ``session_meta`` header, the thread id in
  a file name, the root of a thread tree.
- ``tail`` -- :class:`RolloutTail`, the per-file cursor: a bounded backwards scan at first
  sight (only the LATEST boundary), then forward reads of the new bytes (EVERY boundary).
- ``ownership`` -- :func:`build_sample` + :func:`reconcile_ownership`: which process holds
  which rollout, and the two-consecutive-misses rule.
- ``reads`` -- the blocking reads (fd tables, the ``codex`` processes, a tail's new bytes, a
  header), each run in a worker thread.
- ``actor`` -- the imperative shell, :class:`CodexRolloutDiscovery`: it follows the sessions
  tree through inotify (or a stat poll), reads a rollout when it is appended to and samples
  ownership when the tree says it may have changed.
"""

from __future__ import annotations

from actors.harnesses.codex.rollouts.actor import (
    IDLE_SAMPLE_INTERVAL_S,
    POLL_INTERVAL_S,
    SAMPLE_INTERVAL_S,
    CodexDiscoveryStatistics,
    CodexRolloutDiscovery,
)
from actors.harnesses.codex.rollouts.ownership import (
    MISS_CONFIRMATIONS,
    Owned,
    OwnershipSample,
    OwnershipState,
    Released,
    RolloutOwner,
    build_sample,
    reconcile_ownership,
)
from actors.harnesses.codex.rollouts.parsing import (
    BoundaryRecord,
    RolloutMeta,
    is_rollout_path,
    parse_boundary_line,
    parse_session_meta,
    parse_timestamp_ms,
    root_of,
    thread_id_from_path,
)
from actors.harnesses.codex.rollouts.reads import HEADER_LIMIT_BYTES, codex_processes
from actors.harnesses.codex.rollouts.tail import (
    DISCOVERY_MAX_WINDOWS,
    MAX_LINE_BYTES,
    OVERLAP_BYTES,
    WINDOW_BYTES,
    RolloutTail,
    TailStatistics,
)

__all__ = [
    "DISCOVERY_MAX_WINDOWS",
    "HEADER_LIMIT_BYTES",
    "IDLE_SAMPLE_INTERVAL_S",
    "MAX_LINE_BYTES",
    "MISS_CONFIRMATIONS",
    "OVERLAP_BYTES",
    "POLL_INTERVAL_S",
    "SAMPLE_INTERVAL_S",
    "WINDOW_BYTES",
    "BoundaryRecord",
    "CodexDiscoveryStatistics",
    "CodexRolloutDiscovery",
    "Owned",
    "RolloutOwner",
    "OwnershipSample",
    "OwnershipState",
    "Released",
    "RolloutMeta",
    "RolloutTail",
    "TailStatistics",
    "build_sample",
    "codex_processes",
    "is_rollout_path",
    "parse_boundary_line",
    "parse_session_meta",
    "parse_timestamp_ms",
    "reconcile_ownership",
    "root_of",
    "thread_id_from_path",
]
