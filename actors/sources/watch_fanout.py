"""One hub subscription for every ``paneward watch`` client of the control server.

Each transition is encoded once, and each run of transitions joined into one write once,
whatever the number of watchers: with a hub subscription each, ten watchers of a daemon taking
10,000 events a second paid ten receives, cache lookups and joins per transition -- a third of
the event loop, which then took only ~5,700 events a second in (bench/bench_watch.py).

A watcher that falls ``buffer`` transitions behind (its process stopped reading) gets what was
queued for it, then one :class:`~messages.Overflow` line, and is disconnected -- what a hub
``all`` subscriber gets. The other watchers are not affected.

Used only by :class:`actors.sources.control_server.ControlServer`: it :meth:`~WatchFanout.join`\\ s
a watcher when a watch request arrives (synchronously, then takes the snapshot the watcher
starts from), writes what :meth:`Watcher.next_write` returns in the connection's task, and
:meth:`~WatchFanout.leave`\\ s when the connection ends; :meth:`WatchFanout.run`, a task of the
server, pumps the shared subscription while any watcher is joined.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

import anyio
import anyio.lowlevel
import msgspec

import messages
from messages.activity import Overflow, Transition

__all__ = ["WatchFanout", "WatchFanoutStatistics", "WatchHost", "Watcher"]


class WatchHost(Protocol):
    """What the fan-out needs of the supervisor."""

    def subscribe(self, mode: Any = ..., snapshot: bool = ..., *, buffer: int = ...) -> Any: ...

    @property
    def seq(self) -> int: ...


class WatchFanoutStatistics(msgspec.Struct, kw_only=True):
    """``watchers`` joined now; ``pumped`` transitions taken from the shared subscription;
    ``writes`` / ``lines`` handed to watchers (one write per run, per watcher); ``overflows``
    watchers cut off for falling behind, ``dropped`` the transitions they missed."""

    watchers: int = 0
    pumped: int = 0
    writes: int = 0
    lines: int = 0
    overflows: int = 0
    dropped: int = 0


class Watcher:
    """One watch client's queue of writes (made by :meth:`WatchFanout.join`).

    ``seq``: the hub seq it joined at; every transition queued for it has a larger one.
    """

    def __init__(self, seq: int, buffer: int, stats: WatchFanoutStatistics) -> None:
        self.seq = seq
        self._buffer = buffer
        self._stats = stats
        self._writes: deque[bytes] = deque()
        self._lines = 0
        self._last_seq = seq  # of the newest transition queued
        self._ready = anyio.Event()
        self._ended = False
        self._overflow_seq: int | None = None  # the first transition it missed
        self._dropped = 0

    def _push(self, data: bytes, first_seq: int, count: int, last_seq: int) -> None:
        if self._overflow_seq is not None:
            self._dropped += count
            self._stats.dropped += count
            return
        if self._lines + count > self._buffer:
            self._overflow_seq = first_seq
            self._dropped = count
            self._stats.overflows += 1
            self._stats.dropped += count
        else:
            self._writes.append(data)
            self._lines += count
            self._last_seq = last_seq
            self._stats.writes += 1
            self._stats.lines += count
        self._ready.set()

    def _cut(self, marker: Overflow) -> None:
        """The shared subscription itself overflowed: so did every watcher, from there."""
        if self._overflow_seq is None:
            self._overflow_seq = marker.next_seq
            self._stats.overflows += 1
        self._dropped += marker.dropped
        self._stats.dropped += marker.dropped
        self._ready.set()

    def _end(self) -> None:
        self._ended = True
        self._ready.set()

    async def next_write(self) -> tuple[bytes, int, int] | None:
        """Wait for what is queued and return it as one write with its line count and the seq
        of its last transition; ``None`` when nothing more will come (the hub closed, or it
        overflowed: see :meth:`overflow`)."""
        while not self._writes:
            if self._ended or self._overflow_seq is not None:
                return None
            self._ready = anyio.Event()
            await self._ready.wait()
        data = self._writes[0] if len(self._writes) == 1 else b"".join(self._writes)
        lines = self._lines
        self._writes.clear()
        self._lines = 0
        return data, lines, self._last_seq

    def overflow(self) -> Overflow | None:
        """The marker to write last if it fell behind (``None`` if it did not)."""
        if self._overflow_seq is None:
            return None
        return Overflow(
            next_seq=self._overflow_seq,
            dropped=self._dropped,
            reason=f"watcher fell {self._buffer} transitions behind; resubscribe for a snapshot",
        )


class WatchFanout:
    """The shared subscription and the watchers it feeds (see the module).

    :param host: the supervisor (``subscribe``, ``seq``).
    :param buffer: transitions a watcher may have queued before it is overflowed.
    :param batch: transitions taken from the subscription per write at most.
    """

    def __init__(self, host: WatchHost, buffer: int, batch: int) -> None:
        self._host = host
        self._buffer = buffer
        self._batch = batch
        self._watchers: dict[Watcher, None] = {}  # insertion-ordered set
        self._subscription: Any = None
        self._joined = anyio.Event()
        self._stats = WatchFanoutStatistics()

    def statistics(self) -> WatchFanoutStatistics:
        """A point-in-time copy of the counters."""
        return msgspec.structs.replace(self._stats, watchers=len(self._watchers))

    def join(self) -> Watcher:
        """A new watcher, queued every transition published after ``watcher.seq``. Never
        blocks: the caller takes its snapshot before it next awaits, so snapshot and stream
        meet exactly."""
        if self._subscription is None:
            self._subscription = self._host.subscribe("all", snapshot=False, buffer=self._buffer)
            self._joined.set()
        else:
            self._pump_nowait()  # what is pending belongs to the watchers already here
        watcher = Watcher(self._host.seq, self._buffer, self._stats)
        self._watchers[watcher] = None
        return watcher

    def leave(self, watcher: Watcher) -> None:
        """Forget ``watcher``; the last one to leave closes the shared subscription."""
        self._watchers.pop(watcher, None)
        if not self._watchers and self._subscription is not None:
            self._subscription.close()
            self._subscription = None

    async def run(self) -> None:
        """Pump the shared subscription into the watchers until cancelled or the hub closes
        (every watcher then ends once it has written what it was queued)."""
        while True:
            subscription = self._subscription
            if subscription is None:
                self._joined = anyio.Event()
                await self._joined.wait()
                continue
            try:
                await subscription.wait_pending(1)
                # One scheduler round before the run is taken: what intake produces in the same
                # round joins it (under load a run is then a read's worth of hooks, and every
                # run is a write and a wake-up of every watcher process), and a lone transition
                # waits for nothing. No item is held across the await: a watcher joining
                # meanwhile must not see one twice, nor the others one out of order.
                await anyio.lowlevel.checkpoint()
                item = subscription.receive_nowait()
            except anyio.WouldBlock:
                continue  # a watcher joining took it to the watchers already here
            except anyio.ClosedResourceError:
                continue  # the last watcher left
            except anyio.EndOfStream:  # the hub closed (an overflow ends in the marker)
                self._subscription = None
                for watcher in self._watchers:
                    watcher._end()
                return
            self._deliver(item)
            self._pump_nowait()

    def _pump_nowait(self) -> None:
        subscription = self._subscription
        while subscription is not None:
            try:
                self._deliver(subscription.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return

    def _deliver(self, item: Transition | Overflow) -> None:
        if isinstance(item, Overflow):
            # The pump fell a whole buffer behind (the loop never ran it): every watcher lost
            # the same run; the next watcher to join starts a new subscription.
            self._subscription = None
            for watcher in self._watchers:
                watcher._cut(item)
            return
        items = [item]
        subscription = self._subscription
        if subscription.pending:  # transitions only: the marker is never pending
            items += subscription.receive_many_nowait(self._batch - 1)
        self._stats.pumped += len(items)
        data = messages.encode_lines(items)
        for watcher in self._watchers:
            watcher._push(data, item.seq, len(items), items[-1].seq)
