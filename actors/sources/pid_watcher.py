"""The pid watcher: proves that the owners of live sessions are still alive, and says when not.

Functional core: :func:`actors.core.session.pids.pid_plan` decides, from plain data, what one probe
round means. Imperative shell: :class:`PidWatcher`, a listener of the supervisor: every inbound
message that names an owner (``RegistryStatus``, ``RolloutOwned``, ``PtySpawned``, a
``ProcessSeen`` claiming a key, a ``HookHint`` with a pid, a ``ClientAttached`` client, a
``ThreadStatus`` naming its daemon) is handed to it as the supervisor routes it, and the
owners of sessions restored at start come in its constructor. It probes each new candidate in
a worker thread, and for each pid it saw alive opens a pidfd (Linux ``os.pidfd_open``) and
waits for it to become readable on the event loop, so an exit is reported within
milliseconds. While every candidate is behind a pidfd nothing runs at all (no tick: a pidfd
pins one incarnation, so pid recycling cannot pass for it); the tick (default 1 s) probes
again only while some candidate is not (pidfds unavailable, not yet confirmed). A pid is
watched until it dies or is recycled.

Messages sent (through the sink, handled by the supervisor, routed to the sessions owned by
the pid): :class:`messages.ProcessSeen` the first time a pid is seen alive with a token
(again only if the token changes), :class:`messages.ProcessGone` when a seen-alive pid dies or
was recycled.
"""

from __future__ import annotations

import errno
import math
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar, Final, TypeAlias, get_args

import anyio
import msgspec

import messages
from actors.core.clock import now_ms
from actors.core.session.pids import Ended, ProbeResult, pid_plan
from actors.runtime.mailbox import EvidenceSink
from actors.sources import procfs

if TYPE_CHECKING:
    from typing_extensions import TypeIs

__all__ = [
    "PidWatcher",
    "PidWatcherStatistics",
]


# ---------------------------------------------------------------- shell


class PidWatcherStatistics(msgspec.Struct, kw_only=True):
    """Counters of one :class:`PidWatcher`: one record it keeps, copied by ``statistics()``.

    ``candidates`` / ``confirmed_alive`` / ``pidfds_open`` are sizes now and ``ticking`` whether
    the watcher probes on its tick now (some candidate is not behind a pidfd); the rest
    monotonic.
    """

    candidates: int = 0
    confirmed_alive: int = 0
    pidfds_open: int = 0
    ticking: bool = False
    rounds: int = 0
    probes: int = 0
    seen_sent: int = 0
    gone_sent: int = 0
    gone_by_pidfd: int = 0
    recycled: int = 0
    never_seen_dropped: int = 0
    rejected_watch: int = 0
    sink_rejected: int = 0
    pidfd_unavailable: int = 0


_MISSING = object()


def _pidfd_supported() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open")


#: The messages that name a session's owner by ``pid`` and ``start_token`` (``pid`` ``None``: this
#: one names none). :attr:`PidWatcher.accepts` is this union.
Owners: TypeAlias = (
    messages.RegistryStatus
    | messages.RolloutOwned
    | messages.PtySpawned
    | messages.HookHint
    | messages.ProcessSeen
    | messages.ClientAttached
    | messages.ThreadStatus
)
_OWNERS: Final[frozenset[type]] = frozenset(get_args(Owners))


def _owner_message(message: messages.Inbound) -> TypeIs[Owners]:
    return type(message) in _OWNERS


class PidWatcher:
    """Actor: probes watched pids on a tick and reports their death via pidfd at once.

    Fed by whoever learns owner pids (the supervisor hands it every :data:`Owners` message
    it routes: :meth:`deliver_nowait`) through :meth:`watch`, :meth:`unwatch` or
    :meth:`observe`; sends ``ProcessSeen`` / ``ProcessGone``
    to the sink. A dead or recycled pid is unwatched by the watcher itself.
    """

    #: The evidence that names a session owner (handed over by the supervisor as it routes it):
    #: :data:`Owners`, the one list :meth:`deliver_nowait` handles.
    accepts: ClassVar[tuple[type[messages.Inbound], ...]] = get_args(Owners)

    def __init__(
        self,
        *,
        tick: float = 1.0,
        use_pidfd: bool | None = None,
        initial: Mapping[int, str | None] | None = None,
    ) -> None:
        if tick <= 0:
            raise ValueError(f"tick must be positive, got {tick!r}")
        self._tick = tick
        self._use_pidfd = _pidfd_supported() if use_pidfd is None else use_pidfd
        if self._use_pidfd and not _pidfd_supported():
            raise ValueError("use_pidfd=True but os.pidfd_open is not available here")
        self._candidates: dict[int, str | None] = {}
        self._seen: dict[int, str] = {}
        # pid -> (token the pidfd pins, cancel scope of its waiter task)
        self._pidfds: dict[int, tuple[str, anyio.CancelScope]] = {}
        self._wake: anyio.Event | None = None
        self._round_done: anyio.Event | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._sink: EvidenceSink | None = None
        self._stats = PidWatcherStatistics()
        for pid, token in (initial or {}).items():
            self.watch(pid, token)

    # -- feeding (sync, never blocks) --

    def watch(self, pid: int, start_token: str | None = None) -> None:
        """Watch ``pid`` (the incarnation ``start_token``, or any if ``None``).

        Watching a pid again replaces its expected token. Triggers an early round
        so a new owner is confirmed without waiting a full tick.

        :raises ValueError: for a pid outside ``1 .. 2**31-1`` (counted).
        """
        if not 1 <= pid <= 2**31 - 1:
            self._stats.rejected_watch += 1
            raise ValueError(f"not a process id: {pid!r}")
        previous = self._candidates.get(pid, _MISSING)
        if previous is not _MISSING and (start_token is None or previous == start_token):
            return
        self._candidates[pid] = start_token
        if self._wake is not None:
            self._wake.set()

    def unwatch(self, pid: int) -> None:
        """Stop watching ``pid``; nothing is sent for it afterwards. Unknown pids are ignored."""
        self._candidates.pop(pid, None)
        self._seen.pop(pid, None)
        entry = self._pidfds.pop(pid, None)
        if entry is not None:
            entry[1].cancel()

    def deliver_nowait(self, message: messages.Inbound) -> None:
        """Watch the owner pid named by a piece of evidence, if any (never blocks).

        Every type of :data:`Owners` (:attr:`accepts`) that names a pid, except a
        ``ProcessSeen`` that claims no key; other messages are ignored.
        """
        if not _owner_message(message):
            return
        if message.pid is None:
            return
        if not isinstance(message, messages.ProcessSeen) or message.key is not None:
            self.watch(message.pid, message.start_token)

    def statistics(self) -> PidWatcherStatistics:
        """A point-in-time copy of the counters."""
        return msgspec.structs.replace(
            self._stats,
            candidates=len(self._candidates),
            confirmed_alive=len(self._seen),
            pidfds_open=len(self._pidfds),
            ticking=self._needs_tick(),
        )

    async def wait_rounds(self, count: int) -> None:
        """Wait until at least ``count`` probe rounds have completed since construction.

        For tests and benchmarks that must not sleep to synchronise.
        """
        while self._stats.rounds < count:
            if self._round_done is None:
                self._round_done = anyio.Event()
            await self._round_done.wait()

    # -- running --

    async def run(self, sink: EvidenceSink) -> None:
        """Probe every tick (and early after :meth:`watch`) until cancelled."""
        self._sink = sink
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                while True:
                    self._wake = anyio.Event()
                    await self._round()
                    # Every candidate behind a pidfd: its exit wakes us, a tick would only
                    # re-prove what the kernel already guarantees (a pidfd pins one
                    # incarnation, so a recycled pid cannot pass for it). Sleep until a new
                    # pid is watched.
                    tick = self._tick if self._needs_tick() else math.inf
                    with anyio.move_on_after(tick):
                        await self._wake.wait()
        finally:
            self._tg = None
            self._wake = None
            for _, scope in self._pidfds.values():
                scope.cancel()
            self._pidfds.clear()

    def _needs_tick(self) -> bool:
        """Whether some candidate is not behind a pidfd (pidfds unavailable, a pid not yet
        confirmed, a pidfd that could not be opened): then only probing can tell its end."""
        if not self._use_pidfd:
            return bool(self._candidates)
        return any(pid not in self._pidfds for pid in self._candidates)

    async def _round(self) -> None:
        candidates = dict(self._candidates)
        if not candidates:
            return
        need_fd = (
            {pid for pid in candidates if pid not in self._pidfds} if self._use_pidfd else set()
        )
        probes, fds = await anyio.to_thread.run_sync(self._probe_all, sorted(candidates), need_fd)
        self._stats.rounds += 1
        self._stats.probes += len(probes)
        if self._round_done is not None:
            self._round_done.set()
            self._round_done = None
        decision = pid_plan(candidates, self._seen, probes)
        now = now_ms()
        for pid in decision.forgotten:
            if pid not in self._candidates:
                self._seen.pop(pid, None)
        for seen in decision.seen:
            if self._candidates.get(seen.pid, _MISSING) != candidates[seen.pid]:
                continue  # re-watched or unwatched while we probed: decide next round
            self._seen[seen.pid] = seen.token
            self._send(
                messages.ProcessSeen(
                    pid=seen.pid, start_token=seen.token, at_ms=now, observed_at_ms=now
                )
            )
            self._stats.seen_sent += 1
        for ended in decision.ended:
            if self._candidates.get(ended.pid, _MISSING) != candidates[ended.pid]:
                continue
            self._end(ended, now)
        for pid in decision.dropped:
            if self._candidates.get(pid, _MISSING) == candidates[pid]:
                self._stats.never_seen_dropped += 1
                self._candidates.pop(pid, None)
        for pid, (token, fd) in fds.items():
            self._arm_pidfd(pid, token, fd)

    def _probe_all(
        self, pids: list[int], need_fd: set[int]
    ) -> tuple[dict[int, ProbeResult], dict[int, tuple[str, int]]]:
        """Worker thread: probe each distinct pid once; open pidfds for new live ones."""
        probes: dict[int, ProbeResult] = {}
        fds: dict[int, tuple[str, int]] = {}
        for pid in pids:
            token = procfs.probe(pid)
            probes[pid] = ProbeResult(token=token)
            if token is None or pid not in need_fd:
                continue
            try:
                fd = os.pidfd_open(pid)
            except OSError as exc:
                # ESRCH: died since the probe (the next round sees it). Anything else
                # (ENOSYS, EPERM under seccomp): pidfds do not work here, so the tick
                # becomes the only way to learn of a death; stop trying.
                if exc.errno != errno.ESRCH:
                    self._stats.pidfd_unavailable += 1
                    self._use_pidfd = False
                continue
            # The fd pins whatever process held the pid at open time; it is the one
            # we probed only if the token still matches now.
            if procfs.probe(pid) == token:
                fds[pid] = (token, fd)
            else:
                os.close(fd)
        return probes, fds

    def _arm_pidfd(self, pid: int, token: str, fd: int) -> None:
        if self._tg is None or pid in self._pidfds or self._seen.get(pid) != token:
            os.close(fd)
            return
        scope = anyio.CancelScope()
        self._pidfds[pid] = (token, scope)
        self._tg.start_soon(self._wait_exit, pid, token, fd, scope)

    async def _wait_exit(self, pid: int, token: str, fd: int, scope: anyio.CancelScope) -> None:
        """One task per pidfd: readable means the process exited."""
        try:
            with scope:
                await anyio.wait_readable(fd)
                if self._pidfds.get(pid, (None, None))[1] is scope:
                    del self._pidfds[pid]
                if self._seen.get(pid) == token and pid in self._candidates:
                    self._stats.gone_by_pidfd += 1
                    self._end(Ended(pid=pid, token=token, recycled=False), now_ms())
        finally:
            os.close(fd)
            if self._pidfds.get(pid, (None, None))[1] is scope:
                del self._pidfds[pid]

    def _end(self, ended: Ended, now: int) -> None:
        self._candidates.pop(ended.pid, None)
        self._seen.pop(ended.pid, None)
        entry = self._pidfds.pop(ended.pid, None)
        if entry is not None:
            entry[1].cancel()
        if ended.recycled:
            self._stats.recycled += 1
        self._stats.gone_sent += 1
        self._send(
            messages.ProcessGone(
                pid=ended.pid,
                start_token=ended.token,
                recycled=ended.recycled,
                at_ms=now,
                observed_at_ms=now,
            )
        )

    def _send(self, message: messages.Inbound) -> None:
        assert self._sink is not None
        try:
            self._sink.inject_nowait(message)
        except messages.MessageError:
            self._stats.sink_rejected += 1
