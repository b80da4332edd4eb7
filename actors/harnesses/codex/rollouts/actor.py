"""The Codex rollout discovery actor: :class:`CodexRolloutDiscovery`, the imperative shell
over the package's pure parts.

It follows the sessions tree through inotify (:mod:`actors.sources.fswatch`; or a stat poll,
selectable): an append to an owned rollout reads that rollout
(:mod:`~actors.harnesses.codex.rollouts.tail`), and ownership is sampled
(:mod:`~actors.harnesses.codex.rollouts.ownership`), at most once a second, when the tree
says it may have changed (plus a rare safety sample); every blocking read
(:mod:`~actors.harnesses.codex.rollouts.reads`) in ``anyio.to_thread``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread
import msgspec

from actors.core.clock import now_ms
from actors.harnesses.codex import paths
from actors.harnesses.codex.rollouts import reads
from actors.harnesses.codex.rollouts.ownership import (
    Owned,
    OwnershipSample,
    OwnershipState,
    Released,
    build_sample,
    reconcile_ownership,
)
from actors.harnesses.codex.rollouts.parsing import (
    RolloutMeta,
    is_rollout_path,
    parse_session_meta,
    root_of,
    thread_id_from_path,
)
from actors.harnesses.codex.rollouts.reads import TailResult, Tracked, codex_processes
from actors.harnesses.codex.rollouts.tail import RolloutTail
from actors.runtime.mailbox import EvidenceSink
from actors.sources import fswatch, procfs
from messages.codec import Inbound
from messages.common import SessionKey
from messages.errors import MessageError
from messages.evidence import LifecycleBoundary, RolloutOwned, RolloutReleased

__all__ = [
    "IDLE_SAMPLE_INTERVAL_S",
    "POLL_INTERVAL_S",
    "SAMPLE_INTERVAL_S",
    "CodexDiscoveryStatistics",
    "CodexRolloutDiscovery",
]

SAMPLE_INTERVAL_S: Final = 1.0
# With notifications, ownership is sampled when the tree says it may have changed, and once
# in this long besides (what leaves no trace in the tree; lost notifications).
IDLE_SAMPLE_INTERVAL_S: Final = 30.0
POLL_INTERVAL_S: Final = 0.02


class CodexDiscoveryStatistics(msgspec.Struct, kw_only=True):
    """Counters of :class:`CodexRolloutDiscovery` (monotonic except ``owned_rollouts``, a
    size filled in by ``statistics()``): one record it keeps, copied by ``statistics()``."""

    samples: int = 0
    sample_errors: int = 0
    unreadable_processes: int = 0
    owned_rollouts: int = 0
    owned_emitted: int = 0
    released_emitted: int = 0
    boundaries_emitted: int = 0
    refreshes: int = 0
    bytes_read: int = 0
    invalid_lines: int = 0
    giant_lines: int = 0
    resets: int = 0
    vanished_files: int = 0
    unreadable_files: int = 0
    meta_unresolved: int = 0
    bad_timestamps: int = 0
    rejected: int = 0
    watch_errors: int = 0


class CodexRolloutDiscovery:
    """Discovery actor for Codex threads; sends RolloutOwned/Released and LifecycleBoundary.

    Sends to the sink (the supervisor routes by ``key``, or by ``root_key`` for
    child threads): :class:`~messages.RolloutOwned` when a rollout becomes owned
    or changes owner, :class:`~messages.RolloutReleased` at the second
    consecutive missed sample, :class:`~messages.LifecycleBoundary` for the latest
    boundary at first sight and for every boundary appended afterwards.

    ``run`` follows the sessions tree through inotify (``watch=True``, Linux: see
    :meth:`_notified`) or samples ownership every ``sample_interval`` seconds and polls the
    owned rollouts' sizes every ``poll_interval`` seconds. Tests drive it deterministically with
    :meth:`sample_now` and :meth:`refresh_now` instead.
    """

    def __init__(
        self,
        codex_home: str | os.PathLike[str] | None = None,
        *,
        sample_interval: float = SAMPLE_INTERVAL_S,
        idle_sample_interval: float = IDLE_SAMPLE_INTERVAL_S,
        watch: bool = True,
        poll_interval: float = POLL_INTERVAL_S,
        clock: Callable[[], int] = now_ms,
        process_table: Callable[[], list[procfs.ProcessInfo]] = codex_processes,
    ) -> None:
        home = Path(codex_home) if codex_home is not None else paths.home()
        self._sessions_root = os.path.realpath(home / "sessions")
        self._sample_interval = sample_interval
        self._watch = watch
        self._poll_interval = poll_interval
        self._clock = clock
        self._process_table = process_table
        self._idle_sample_interval = idle_sample_interval
        self._wanted = anyio.Event()  # set when a notification asks for a sample
        self._full = False  # ... and for every tail to be re-read with it
        self._lock = anyio.Lock(fast_acquire=True)
        self._state = OwnershipState()
        self._tracked: dict[str, Tracked] = {}
        self._parents: dict[str, str | None] = {}  # thread -> parent, from session_meta
        self._stats = CodexDiscoveryStatistics()

    @property
    def sessions_root(self) -> str:
        """The canonical ``sessions`` directory whose rollouts count."""
        return self._sessions_root

    def statistics(self) -> CodexDiscoveryStatistics:
        """A point-in-time copy of the counters (see :class:`CodexDiscoveryStatistics`)."""
        return msgspec.structs.replace(self._stats, owned_rollouts=len(self._tracked))

    # -- driving

    async def run(self, sink: EvidenceSink) -> None:
        """Sample ownership and follow owned rollouts until cancelled."""
        if self._watch and fswatch.AVAILABLE:
            try:
                await self._notified(sink)
                return
            except OSError:
                # inotify refused (watch or instance limits): sample and poll instead.
                self._stats.watch_errors += 1
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._sample_loop, sink)
            tg.start_soon(self._poll_loop, sink)

    async def _sample_loop(self, sink: EvidenceSink) -> None:
        # The wait between samples happens in the worker thread, just before the sample: an
        # idle tick then wakes the event loop once (when the sample is back) instead of
        # twice (the timer, then the worker). Every wake-up from idle costs the loop thread
        # 0.1-0.25 ms of CPU on this kind of VM: most of an idle tick.
        stop = threading.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_set_when_cancelled, stop)
            ticks = 0
            while True:
                after = self._sample_interval if ticks else 0.0
                await self.sample_now(sink, refresh_all=True, after=after, stop=stop)
                ticks += 1

    async def _poll_loop(self, sink: EvidenceSink) -> None:
        while True:
            await anyio.sleep(self._poll_interval)
            await self.refresh_now(sink)

    async def _notified(self, sink: EvidenceSink) -> None:
        """Event-driven mode: inotify on the sessions tree says when to read and when to sample.

        - a tracked rollout modified: read what was appended to it (that file only);
        - a rollout created, or an untracked one written (a thread resumed by a new process),
          or a tracked one closed after writing or removed (its owner let go of it or exited):
          sample ownership, at most once per ``sample_interval``; while a released-looking
          rollout waits for its second miss, the next sample follows ``sample_interval`` later;
        - nothing at all: one safety sample (with every tail re-read) every
          ``idle_sample_interval`` s, for what leaves no trace in the tree (a thread loaded
          without a write) and in case notifications were lost; a queue overflow does the same
          at once.

        :raises OSError: inotify could not be set up (the caller falls back to polling).
        """
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._sample_on_demand, sink)
            while True:
                # A fresh Codex home has no sessions/ yet: inotify says when it appears.
                await fswatch.wait_for_directory(self._sessions_root)
                with fswatch.Inotify() as notify:
                    await anyio.to_thread.run_sync(_watch_tree, notify, self._sessions_root)
                    self._wanted.set()  # sample what appeared before the watch began
                    while await self._on_events(sink, notify, await notify.wait()):
                        pass

    async def _on_events(
        self, sink: EvidenceSink, notify: fswatch.Inotify, events: list[fswatch.FsEvent]
    ) -> bool:
        """Act on one batch of notifications; False when the sessions root itself went."""
        gone = False
        touched: set[str] = set()
        sample = full = False
        for event in events:
            if event.mask & fswatch.Q_OVERFLOW:
                sample = full = True
            elif event.is_dir:
                if event.mask & (fswatch.CREATE | fswatch.MOVED_TO):
                    # A new day directory: watch it, and sample for what it already holds.
                    await anyio.to_thread.run_sync(_watch_tree, notify, event.path)
                    sample = True
            elif event.mask & fswatch.IGNORED:
                gone = gone or event.path == self._sessions_root
            elif not is_rollout_path(event.path, self._sessions_root):
                continue
            elif event.path in self._tracked:
                if event.mask & fswatch.MODIFY:
                    touched.add(event.path)
                if event.mask & (fswatch.CLOSE_WRITE | fswatch.DELETE | fswatch.MOVED_FROM):
                    sample = True
            elif event.mask & (fswatch.CREATE | fswatch.MODIFY | fswatch.MOVED_TO):
                sample = True
        if touched:
            await self.refresh_now(sink, touched)
        if sample or gone:
            self._full = self._full or full
            self._wanted.set()
        return not gone

    async def _sample_on_demand(self, sink: EvidenceSink) -> None:
        await self.sample_now(sink, refresh_all=True)
        last = time.monotonic()
        while True:
            # A rollout missed once is confirmed (or not) by the next sample.
            wait = self._sample_interval if self._state.misses else self._idle_sample_interval
            full = True
            with anyio.move_on_after(wait):
                await self._wanted.wait()
                full = self._full
            self._wanted = anyio.Event()
            self._full = False
            pause = last + self._sample_interval - time.monotonic()
            if pause > 0:
                await anyio.sleep(pause)  # at most one sample per sample_interval
            await self.sample_now(sink, refresh_all=full)
            last = time.monotonic()

    async def sample_now(
        self,
        sink: EvidenceSink,
        refresh_all: bool = True,
        *,
        after: float = 0.0,
        stop: threading.Event | None = None,
    ) -> None:
        """Run one ownership sample (``after`` seconds from now, unless ``stop`` is set
        first), emit what changed, then refresh owned tails.

        ``refresh_all=False`` reads only the rollouts whose ownership changed (the
        watching loop's usual tick: appends to the others arrive as notifications).
        """
        try:
            # Wait, sample and reconcile in one worker-thread hop, outside the lock (the
            # process table is all it reads; refreshes go on meanwhile).
            taken = await anyio.to_thread.run_sync(self._sample_after, after, stop)
        except OSError:
            # The process table itself could not be read: prove nothing this time.
            self._stats.sample_errors += 1
            return
        if taken is None:
            return  # stopped while waiting
        sample, reconciled_from, result = taken
        async with self._lock:
            if self._state is not reconciled_from:
                # Another sample was applied while this one ran: reconcile again from it.
                result = reconcile_ownership(self._state, sample)
            state, owned, released = result
            self._stats.samples += 1
            self._stats.unreadable_processes += len(sample.uncertain)
            self._state = state
            observed = self._clock()
            for gone in released:
                tracked = self._tracked.pop(gone.path, None)
                if tracked is not None and self._emit(
                    sink,
                    RolloutReleased(
                        key=tracked.key,
                        pid=gone.owner.pid,
                        at_ms=observed,
                        observed_at_ms=observed,
                    ),
                ):
                    self._stats.released_emitted += 1
            new_paths = [o.path for o in owned if o.path not in self._tracked]
            if new_paths:
                heads = await anyio.to_thread.run_sync(reads.read_heads, new_paths)
                self._admit(heads, owned)
            # Read every owned tail (new ones get their bounded discovery scan) BEFORE
            # announcing ownership, so the latest boundary follows its RolloutOwned.
            tails = await self._read_tails(None if refresh_all else [c.path for c in owned])
            observed = self._clock()
            for change in owned:
                tracked = self._tracked[change.path]
                tracked.owner = change.owner
                if self._emit(
                    sink,
                    RolloutOwned(
                        key=tracked.key,
                        pid=change.owner.pid,
                        start_token=change.owner.start_token,
                        at_ms=observed,
                        observed_at_ms=observed,
                        root_key=tracked.root_key,
                        version=tracked.version,
                    ),
                ):
                    self._stats.owned_emitted += 1
            self._emit_reads(sink, tails)

    async def refresh_now(self, sink: EvidenceSink, only: Iterable[str] | None = None) -> None:
        """Read what was appended to owned rollouts (all, or those in ``only``) and emit it."""
        async with self._lock:
            await self._refresh_locked(sink, only)

    # -- internals (called under the lock)

    def _sample_after(self, after: float, stop: threading.Event | None) -> _Sampled | None:
        """Worker thread: wait ``after`` s (``None`` if ``stop`` was set meanwhile), then
        sample the process table and reconcile it with the current ownership state."""
        if after > 0:
            if stop is None:
                time.sleep(after)
            elif stop.wait(after):
                return None
        state = self._state
        sample = self._sample_blocking()
        return sample, state, reconcile_ownership(state, sample)

    def _sample_blocking(self) -> OwnershipSample:
        # os.listdir("/proc") failing raises OSError: the caller counts it, proves nothing.
        return build_sample(self._process_table(), reads.fd_targets, self._sessions_root)

    def _admit(self, heads: dict[str, bytes | None], owned: list[Owned]) -> None:
        owners = {o.path: o.owner for o in owned}
        metas: dict[str, RolloutMeta] = {}
        for path, head in heads.items():
            meta = parse_session_meta(head) if head is not None else None
            if meta is None:
                # No readable session_meta yet: the file name carries the thread id.
                self._stats.meta_unresolved += 1
                thread = thread_id_from_path(path) or os.path.basename(path)
                meta = RolloutMeta(thread)
            metas[path] = meta
            self._parents[meta.thread_id] = meta.parent_id
        for path, meta in metas.items():
            root = root_of(meta.thread_id, self._parents)
            self._tracked[path] = Tracked(
                path=path,
                key=SessionKey("codex", meta.thread_id),
                owner=owners[path],
                root_key=SessionKey("codex", root) if root != meta.thread_id else None,
                version=meta.cli_version,
                tail=RolloutTail(),
            )

    async def _refresh_locked(self, sink: EvidenceSink, only: Iterable[str] | None) -> None:
        self._emit_reads(sink, await self._read_tails(only))

    async def _read_tails(self, only: Iterable[str] | None) -> list[tuple[Tracked, TailResult]]:
        if only is None:
            targets = list(self._tracked.values())
        else:
            targets = [self._tracked[p] for p in only if p in self._tracked]
        if not targets:
            return []
        results = await anyio.to_thread.run_sync(_refresh_and_count, targets, self._stats)
        self._stats.refreshes += 1
        return list(zip(targets, results, strict=True))

    def _emit_reads(self, sink: EvidenceSink, tails: list[tuple[Tracked, TailResult]]) -> None:
        observed = self._clock()
        for tracked, result in tails:
            for record in result.records:
                at_ms = record.at_ms
                if at_ms is None:
                    self._stats.bad_timestamps += 1
                    at_ms = observed
                if self._emit(
                    sink,
                    LifecycleBoundary(
                        key=tracked.key,
                        boundary=record.boundary,
                        at_ms=at_ms,
                        observed_at_ms=observed,
                        turn_id=record.turn_id,
                        root_key=tracked.root_key,
                        version=tracked.version,
                    ),
                ):
                    self._stats.boundaries_emitted += 1

    def _emit(self, sink: EvidenceSink, message: Inbound) -> bool:
        """Send ``message``; whether the sink took it (a refusal is counted)."""
        try:
            sink.inject_nowait(message)
        except MessageError:
            # e.g. a record timestamp outside 2000-2100 or an absurd thread id.
            self._stats.rejected += 1
            return False
        return True


#: What one worker-thread sample returns: the sample, the state it was reconciled from, and
#: the reconciliation (new state, newly owned, released).
_Sampled = tuple[
    OwnershipSample, OwnershipState, tuple[OwnershipState, list[Owned], list[Released]]
]


async def _set_when_cancelled(event: anyio.Event | threading.Event) -> None:
    try:
        await anyio.sleep_forever()
    finally:
        event.set()


#: What the sessions tree tells: appends, new rollouts and day directories, a writer closing.
_WATCH_MASK: Final = (
    fswatch.CREATE
    | fswatch.MODIFY
    | fswatch.CLOSE_WRITE
    | fswatch.DELETE
    | fswatch.MOVED_FROM
    | fswatch.MOVED_TO
)


def _watch_tree(notify: fswatch.Inotify, top: str) -> None:
    """Worker thread: watch ``top`` and every directory below it (``YYYY/MM/DD``).

    :raises OSError: the kernel refused a watch (``ENOSPC``: the user's watch limit).
    """
    for directory, _dirs, _files in os.walk(top):
        notify.add(directory, _WATCH_MASK)



def _refresh_and_count(
    targets: list[Tracked], stats: CodexDiscoveryStatistics
) -> list[TailResult]:
    """Worker thread: refresh every tail and add what the refresh changed in its counters to
    the actor's ``stats``, so that an idle refresh leaves the event loop nothing to do.

    Safe off the loop: refreshes run under the actor's lock (one at a time), and these fields
    are written by nothing else.
    """
    before = [t.tail.statistics() for t in targets]
    results = reads.refresh_all(targets)
    for tracked, old, result in zip(targets, before, results, strict=True):
        new = tracked.tail.statistics()
        stats.bytes_read += new.bytes_read - old.bytes_read
        stats.invalid_lines += new.invalid_lines - old.invalid_lines
        stats.giant_lines += new.giant_lines - old.giant_lines
        stats.resets += new.resets - old.resets
        stats.vanished_files += result.vanished
        stats.unreadable_files += result.unreadable
    return results

