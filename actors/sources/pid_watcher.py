"""The pid watcher: proves that the owners of live sessions are still alive, and says when not.

Functional core: :func:`plan` decides, from plain data, what one probe round means
(the omni-dev ``pid_watcher`` plan, seed-internals §2.9, behaviours 32-37):

- each distinct candidate pid is probed once per round;
- a pid found gone ends its sessions only if *this watcher* saw it alive before
  (a pid never seen alive, e.g. a per-hook shell, ends nothing);
- an alive pid whose start token differs from the expected (or last seen) one is
  a recycled pid: the incarnation we watched is dead (``recycled=True``);
- pids that are no longer candidates are forgotten.

Imperative shell: :class:`PidWatcher`. Its candidate set is fed with the sync
methods :meth:`PidWatcher.watch` / :meth:`PidWatcher.unwatch` (or
:meth:`PidWatcher.observe` for evidence that names an owner pid). It probes every
candidate on a tick (default 1 s) in a worker thread, and for each pid it saw alive
opens a pidfd (Linux ``os.pidfd_open``) and waits for it to become readable on the
event loop, so an exit is reported within milliseconds; the tick is the fallback
where pidfds are unavailable (and catches pid recycling, which a pidfd cannot miss
anyway since it pins one incarnation).

Messages sent (through the sink, handled by the supervisor, routed to the
sessions owned by the pid): :class:`messages.ProcessSeen` the first time a pid is
seen alive with a token (again only if the token changes),
:class:`messages.ProcessGone` when a seen-alive pid dies or was recycled.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Mapping

import anyio
import msgspec

import messages
from actors.runtime.mailbox import EvidenceSink
from actors.sources import procfs

__all__ = [
    "Ended",
    "EvidenceSink",
    "PidWatcher",
    "PidWatcherStatistics",
    "Plan",
    "ProbeResult",
    "Seen",
    "plan",
]


# ---------------------------------------------------------------- pure core


class ProbeResult(msgspec.Struct, frozen=True):
    """One probe of one pid: its current start token, or ``None`` if gone (or a zombie)."""

    token: str | None

    @property
    def alive(self) -> bool:
        return self.token is not None


class Seen(msgspec.Struct, frozen=True):
    """Decision: ``pid`` is alive with ``token`` and this is news (send ``ProcessSeen``)."""

    pid: int
    token: str


class Ended(msgspec.Struct, frozen=True):
    """Decision: the watched incarnation ``token`` of ``pid`` is dead (send ``ProcessGone``)."""

    pid: int
    token: str | None
    recycled: bool


class Plan(msgspec.Struct, frozen=True):
    """The outcome of one round.

    ``seen``/``ended`` are the messages to send; ``dropped`` are candidates found
    dead that were never seen alive (stop watching them, send nothing);
    ``seen_alive`` is the new confirmed-alive table (pid -> token);
    ``forgotten`` are confirmed pids that are no longer candidates.
    """

    seen: tuple[Seen, ...]
    ended: tuple[Ended, ...]
    dropped: tuple[int, ...]
    seen_alive: dict[int, str]
    forgotten: tuple[int, ...]


def plan(
    candidates: Mapping[int, str | None],
    seen_alive: Mapping[int, str],
    probes: Mapping[int, ProbeResult],
) -> Plan:
    """Decide what one probe round means. Pure; see the module docstring for the rules.

    ``candidates`` maps each watched pid to the start token of the incarnation we
    care about (``None``: whichever incarnation we first see alive);
    ``seen_alive`` maps pids this watcher has confirmed alive to the token it saw;
    ``probes`` holds this round's probe results (a candidate without a result was
    not probed and nothing is decided for it).
    """
    alive = {pid: tok for pid, tok in seen_alive.items() if pid in candidates}
    forgotten = tuple(sorted(pid for pid in seen_alive if pid not in candidates))
    seen: list[Seen] = []
    ended: list[Ended] = []
    dropped: list[int] = []
    for pid in sorted(candidates):
        result = probes.get(pid)
        if result is None:
            continue
        expected = candidates[pid]
        known = alive.get(pid)
        if result.token is None:
            if known is not None:
                ended.append(Ended(pid=pid, token=known, recycled=False))
                del alive[pid]
            else:
                # Never seen alive (a per-hook shell, a stale claim): ends nothing.
                dropped.append(pid)
            continue
        claimed = expected if expected is not None else known
        if claimed is not None and result.token != claimed:
            # Same pid, another process: the incarnation we watched is dead.
            ended.append(Ended(pid=pid, token=claimed, recycled=True))
            alive.pop(pid, None)
            continue
        if known != result.token:
            seen.append(Seen(pid=pid, token=result.token))
            alive[pid] = result.token
    return Plan(
        seen=tuple(seen),
        ended=tuple(ended),
        dropped=tuple(dropped),
        seen_alive=alive,
        forgotten=forgotten,
    )


# ---------------------------------------------------------------- shell


class PidWatcherStatistics(msgspec.Struct, frozen=True):
    """Counters of one :class:`PidWatcher` (all monotonic)."""

    candidates: int
    confirmed_alive: int
    pidfds_open: int
    rounds: int
    probes: int
    seen_sent: int
    gone_sent: int
    gone_by_pidfd: int
    recycled: int
    never_seen_dropped: int
    rejected_watch: int
    sink_rejected: int
    pidfd_unavailable: int


_MISSING = object()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _pidfd_supported() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open")


class PidWatcher:
    """Actor: probes watched pids on a tick and reports their death via pidfd at once.

    Fed by whoever learns owner pids (the supervisor, from ``RegistryStatus``,
    ``RolloutOwned``, ``PtySpawned``, hook pids) through :meth:`watch`,
    :meth:`unwatch` or :meth:`observe`; sends ``ProcessSeen`` / ``ProcessGone``
    to the sink. A dead or recycled pid is unwatched by the watcher itself.
    """

    def __init__(self, *, tick: float = 1.0, use_pidfd: bool | None = None) -> None:
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
        self._rounds = 0
        self._probes = 0
        self._seen_sent = 0
        self._gone_sent = 0
        self._gone_by_pidfd = 0
        self._recycled = 0
        self._dropped = 0
        self._rejected_watch = 0
        self._sink_rejected = 0
        self._pidfd_unavailable = 0

    # -- feeding (sync, never blocks) --

    def watch(self, pid: int, start_token: str | None = None) -> None:
        """Watch ``pid`` (the incarnation ``start_token``, or any if ``None``).

        Watching a pid again replaces its expected token. Triggers an early round
        so a new owner is confirmed without waiting a full tick.

        :raises ValueError: for a pid outside ``1 .. 2**31-1`` (counted).
        """
        if not 1 <= pid <= 2**31 - 1:
            self._rejected_watch += 1
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

    def observe(self, message: messages.Inbound) -> None:
        """Watch the owner pid named by a piece of evidence, if any.

        ``RegistryStatus``, ``RolloutOwned``, ``PtySpawned`` (pid + token),
        ``HookHint`` / ``NotifyHook`` with a pid. Other messages are ignored.
        """
        if isinstance(
            message, messages.RegistryStatus | messages.RolloutOwned | messages.PtySpawned
        ):
            self.watch(message.pid, message.start_token)
        elif isinstance(message, messages.HookHint | messages.NotifyHook):
            pid = message.pid
            if pid is not None:
                self.watch(pid, message.start_token)

    def statistics(self) -> PidWatcherStatistics:
        return PidWatcherStatistics(
            candidates=len(self._candidates),
            confirmed_alive=len(self._seen),
            pidfds_open=len(self._pidfds),
            rounds=self._rounds,
            probes=self._probes,
            seen_sent=self._seen_sent,
            gone_sent=self._gone_sent,
            gone_by_pidfd=self._gone_by_pidfd,
            recycled=self._recycled,
            never_seen_dropped=self._dropped,
            rejected_watch=self._rejected_watch,
            sink_rejected=self._sink_rejected,
            pidfd_unavailable=self._pidfd_unavailable,
        )

    async def wait_rounds(self, count: int) -> None:
        """Wait until at least ``count`` probe rounds have completed since construction.

        For tests and benchmarks that must not sleep to synchronise.
        """
        while self._rounds < count:
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
                    with anyio.move_on_after(self._tick):
                        await self._wake.wait()
        finally:
            self._tg = None
            self._wake = None
            for _, scope in self._pidfds.values():
                scope.cancel()
            self._pidfds.clear()

    async def _round(self) -> None:
        candidates = dict(self._candidates)
        if not candidates:
            return
        need_fd = (
            {pid for pid in candidates if pid not in self._pidfds} if self._use_pidfd else set()
        )
        probes, fds = await anyio.to_thread.run_sync(self._probe_all, sorted(candidates), need_fd)
        self._rounds += 1
        self._probes += len(probes)
        if self._round_done is not None:
            self._round_done.set()
            self._round_done = None
        decision = plan(candidates, self._seen, probes)
        now = _now_ms()
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
            self._seen_sent += 1
        for ended in decision.ended:
            if self._candidates.get(ended.pid, _MISSING) != candidates[ended.pid]:
                continue
            self._end(ended, now)
        for pid in decision.dropped:
            if self._candidates.get(pid, _MISSING) == candidates[pid]:
                self._dropped += 1
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
                    self._pidfd_unavailable += 1
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
                    self._gone_by_pidfd += 1
                    self._end(Ended(pid=pid, token=token, recycled=False), _now_ms())
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
            self._recycled += 1
        self._gone_sent += 1
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
            self._sink_rejected += 1
