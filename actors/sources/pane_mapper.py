"""The pane mapper: which session runs in which pane, proven from the process tree.

The decision is pure in :mod:`actors.core.session.pane_map`
(:class:`~actors.core.session.pane_map.PaneMap`); this is its I/O shell. :class:`PaneMapper` is a
listener of the supervisor: the evidence that names owners and the pane messages
(:attr:`PaneMapper.accepts`) are handed to it as they are routed; it reads the process tree in a
worker thread and sends ``PaneBound`` / ``PaneUnbound`` (and the ``ProcessSeen`` announcing a
process bound to its own session) to the sink, which routes them to the sessions named. What a
process proves by itself comes from its harness package, handed to the mapper as
:class:`~actors.core.session.harness.ProcessBinders` (the daemon's wiring passes
:data:`actors.harnesses.catalog.BINDERS`): the mapper itself knows no harness.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import ClassVar

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

import messages
from actors.core.clock import now_ms
from actors.core.session.harness import ProcessBinders
from actors.core.session.pane_map import MAX_VISIT, OBSERVED, Binding, PaneChange, PaneMap
from actors.runtime.mailbox import EvidenceSink
from actors.sources import procfs

__all__ = ["PaneMapper", "PaneMapperStatistics"]


# ---------------------------------------------------------------- the actor


class PaneMapperStatistics(msgspec.Struct, kw_only=True):
    """Counters of the pane mapper: one record it keeps, copied by ``statistics()``.

    ``panes`` / ``bound`` / ``owners`` are sizes now; ``ignored``, ``walks``, ``visited`` and
    ``truncated_walks`` are kept by its :class:`~actors.core.session.pane_map.PaneMap` and filled in
    by :meth:`PaneMapper.statistics`; all but the sizes are monotonic.
    """

    panes: int = 0
    bound: int = 0
    owners: int = 0
    received: int = 0
    ignored: int = 0
    mailbox_overflow: int = 0
    tree_reads: int = 0
    walks: int = 0
    visited: int = 0
    truncated_walks: int = 0
    bound_sent: int = 0
    unbound_sent: int = 0
    sink_rejected: int = 0


class _TreeReader:
    """Worker thread: the process tree as far as the walks go, cmdlines read only when the
    walk asks.

    Where ``/proc/<pid>/task/<tid>/children`` exists (:data:`procfs.HAVE_CHILDREN`) every read
    is of a process a walk visits: walking a pane whose own process is the owner reads
    nothing, so the cost follows the panes' trees, not the machine's process table. Elsewhere
    one whole-table snapshot per round.
    """

    def __init__(self, binders: ProcessBinders) -> None:
        self._binders = binders
        self._lazy = procfs.HAVE_CHILDREN
        self._children: dict[int, Sequence[int]] = {}
        self._ident: dict[int, tuple[str, str] | None] = {}  # pid -> (comm, token)
        if not self._lazy:
            table = procfs.scan_processes()
            self._ident = {p.pid: (p.comm, p.start_token) for p in table}
            self._children = dict(procfs.children_map(table))

    def kids(self, pid: int) -> Sequence[int]:
        if not self._lazy:
            return self._children.get(pid, ())
        found = self._children.get(pid)
        if found is None:
            found = self._children[pid] = procfs.children(pid)
        return found

    def _identity(self, pid: int) -> tuple[str, str] | None:
        if pid not in self._ident and self._lazy:
            stat = procfs.read_stat(pid)
            self._ident[pid] = None if stat is None else (stat.comm, stat.start_token)
        return self._ident.get(pid)

    def bind(self, pid: int) -> Binding | None:
        ident = self._identity(pid)
        if ident is None or ident[0] not in self._binders.comms:
            return None  # no harness proves anything by this name: skip the cmdline read
        argv = procfs.read_cmdline(pid)
        if argv is None:
            return None
        return self._binders.bind(pid, ident[0], argv, ident[1])


class PaneMapper:
    """Actor: maps panes to sessions. A listener: the supervisor hands it the messages in
    :attr:`accepts` (:meth:`deliver_nowait`); sends ``PaneBound`` / ``PaneUnbound`` to the
    sink.

    ``rescan_interval`` re-walks every pane periodically (default 5 s) for what no
    message announces, e.g. a ``codex resume <id>`` TUI started in a pane; ``None``
    disables it.
    """

    #: What the mapper learns from: owners and panes (:data:`actors.core.session.pane_map.Observed`,
    #: what :meth:`PaneMap.observe` has a case for); everything else is not its business.
    accepts: ClassVar[tuple[type[messages.Inbound], ...]] = OBSERVED

    def __init__(
        self,
        binders: ProcessBinders,
        *,
        mailbox_size: int = 1024,
        max_visit: int = MAX_VISIT,
        rescan_interval: float | None = 5.0,
    ) -> None:
        if rescan_interval is not None and rescan_interval <= 0:
            raise ValueError(f"rescan_interval must be positive or None, got {rescan_interval!r}")
        self._binders = binders
        self._map = PaneMap(max_visit)
        self._rescan_interval = rescan_interval
        send, receive = anyio.create_memory_object_stream[messages.Inbound](mailbox_size)
        self._send_stream: MemoryObjectSendStream[messages.Inbound] = send
        self._receive: MemoryObjectReceiveStream[messages.Inbound] = receive
        self._stats = PaneMapperStatistics()
        self._idle: anyio.Event | None = None
        self._busy = False
        self._queued = 0  # messages in the mailbox (anyio's statistics() costs a record each)

    def send_nowait(self, message: messages.Inbound) -> None:
        """Queue a message without blocking.

        :raises anyio.WouldBlock: when the mailbox is full (counted as overflow).
        """
        try:
            self._send_stream.send_nowait(message)
        except anyio.WouldBlock:
            self._stats.mailbox_overflow += 1
            raise
        self._queued += 1

    def deliver_nowait(self, message: messages.Inbound) -> None:
        """The supervisor's hand-over (:class:`~actors.runtime.mailbox.Listener`): queue
        ``message``; a full mailbox is counted as overflow, a closed one (the mapper stopped)
        ignored."""
        if (
            type(message) is messages.HookHint
            and message.pid is not None
            and not self._busy
            and not self._queued
            and self._map.owns(message.pid, message.key)
        ):
            # The hook of an owner it knows, with nothing queued that could change that: its
            # observation would change nothing, so it is not queued (no wake-up per hook).
            self._stats.received += 1
            return
        with contextlib.suppress(
            anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            self.send_nowait(message)

    def close(self) -> None:
        """Close the mailbox (done by :meth:`run` when it ends); later sends raise
        ``anyio.ClosedResourceError``."""
        self._send_stream.close()
        self._receive.close()

    async def send(self, message: messages.Inbound) -> None:
        """Queue a message, waiting for room in the mailbox."""
        await self._send_stream.send(message)
        self._queued += 1

    def statistics(self) -> PaneMapperStatistics:
        """A point-in-time copy of the counters (see :class:`PaneMapperStatistics`)."""
        m = self._map
        return msgspec.structs.replace(
            self._stats,
            panes=len(m.panes),
            bound=len(m.bindings),
            owners=sum(len(v) for v in m.owners.values()),
            ignored=m.ignored,
            walks=m.walks,
            visited=m.visited,
            truncated_walks=m.truncated,
        )

    def bindings(self) -> dict[str, messages.SessionKey]:
        """The current pane -> session bindings (a copy)."""
        return {pane: b.key for pane, b in self._map.bindings.items()}

    async def wait_idle(self) -> None:
        """Wait until every queued message has been handled (tests, benchmarks)."""
        while self._receive.statistics().current_buffer_used or self._busy:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    async def run(self, sink: EvidenceSink) -> None:
        """Handle mailbox batches until cancelled."""
        try:
            await self._run(sink)
        finally:
            self.close()

    async def _run(self, sink: EvidenceSink) -> None:
        interval = math.inf if self._rescan_interval is None else self._rescan_interval
        while True:
            batch: list[messages.Inbound] = []
            with anyio.move_on_after(interval):
                batch.append(await self._receive.receive())
            self._busy = True
            try:
                while True:
                    try:
                        batch.append(self._receive.receive_nowait())
                    except anyio.WouldBlock:
                        break
                self._queued -= len(batch)
                await self._handle(batch, sink, rescan=not batch)
            finally:
                self._busy = False
                if self._idle is not None and not self._receive.statistics().current_buffer_used:
                    self._idle.set()
                    self._idle = None

    async def _handle(
        self, batch: list[messages.Inbound], sink: EvidenceSink, rescan: bool
    ) -> None:
        now = now_ms()
        out: list[PaneChange] = []
        for message in batch:
            self._stats.received += 1
            out.extend(self._map.observe(message))
        if rescan:
            self._map.dirty.update(self._map.panes)
        if self._map.dirty:
            tree = await anyio.to_thread.run_sync(self._walk_dirty, now)
            out.extend(tree)
        for message in out:
            try:
                sink.inject_nowait(message)
            except messages.PanewardError:  # invalid, or a full session mailbox
                self._stats.sink_rejected += 1
                continue
            if isinstance(message, messages.PaneBound):
                self._stats.bound_sent += 1
            elif isinstance(message, messages.PaneUnbound):
                self._stats.unbound_sent += 1

    def _walk_dirty(self, now: int) -> list[PaneChange]:
        # Worker thread. The actor task awaits this call, so nothing else touches the
        # map meanwhile (messages wait in the mailbox).
        reader = _TreeReader(self._binders)
        self._stats.tree_reads += 1
        return self._map.rebind(reader.kids, reader.bind, now)
