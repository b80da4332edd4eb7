"""Benchmarks for process identity, the pid watcher and the Claude registry watcher.

Run: ``.venv/bin/python bench/bench_process_discovery.py`` (about a minute; spawns and
kills its own ``sleep`` processes and writes only under a temporary directory).
Every figure is a ratio or a latency measured in this run, next to its baseline.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(ROOT))

import messages  # noqa: E402
from actors.harnesses.claude_code.registry import ClaudeRegistryWatcher  # noqa: E402
from actors.sources import procfs  # noqa: E402
from actors.sources.pid_watcher import PidWatcher  # noqa: E402
from bench.world import claude_sleepers  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def raw_proc_scan() -> int:
    """Baseline: listdir(/proc) and read every stat file with the same system calls as the
    scan (``os.open``, one ``os.read`` of 4096 bytes, ``os.close``: no buffered file object),
    and nothing else (no parsing, no records)."""
    n = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            except OSError:
                continue
            try:
                os.read(fd, 4096)
                n += 1
            except OSError:
                pass
            finally:
                os.close(fd)
    return n


def discovery_tick() -> int:
    table = procfs.scan_processes()
    procfs.children_map(table)
    return len(table)


def time_many(fn: Callable[[], int], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


class EventSink:
    def __init__(self) -> None:
        self.items: list[tuple[float, messages.Inbound]] = []
        self.changed: anyio.Event | None = None

    def inject_nowait(self, message: messages.Inbound) -> None:
        self.items.append((time.perf_counter(), message))
        if self.changed is not None:
            self.changed.set()

    deliver_nowait = inject_nowait

    async def wait_for(self, pred: Callable[[messages.Inbound], bool]) -> float:
        while True:
            for at, m in self.items:
                if pred(m):
                    self.items.clear()
                    return at
            self.changed = anyio.Event()
            await self.changed.wait()


def status_at(at_ms: int) -> Callable[[messages.Inbound], bool]:
    def match(m: messages.Inbound) -> bool:
        return isinstance(m, messages.RegistryStatus) and m.at_ms == at_ms

    return match


def pid_message(
    kind: type[messages.ProcessSeen | messages.ProcessGone], pid: int
) -> Callable[[messages.Inbound], bool]:
    def match(m: messages.Inbound) -> bool:
        return isinstance(m, kind) and m.pid == pid

    return match


def spawn_sleepers(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen(["sleep", "600"]) for _ in range(n)]


async def registry_latency(mode: str, events: int, poll_interval: float) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        sessions = Path(tmp) / "sessions"
        sessions.mkdir()
        # The record's owner must be a live `claude` of our uid, as a real one is.
        [owner] = claude_sleepers(Path(tmp) / "bin", 1)
        pid = owner.pid
        token = procfs.start_token(pid)
        path = sessions / f"{pid}.json"
        record: dict[str, object] = {"pid": pid, "sessionId": "bench", "procStart": token}

        def write(i: int) -> None:
            record["status"] = "busy" if i % 2 else "idle"
            record["statusUpdatedAt"] = 1_800_000_000_000 + i
            tmpfile = sessions / f"{pid}.json.tmp"
            tmpfile.write_text(json.dumps(record))
            os.replace(tmpfile, path)

        sink = EventSink()
        watcher = ClaudeRegistryWatcher(
            sessions,
            mode=mode,  # type: ignore[arg-type]
            poll_interval=poll_interval,
            liveness_interval=3600,
        )
        out: list[float] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher.run, sink)
            await watcher.wait_scans(1)
            for i in range(events + 1):
                t0 = time.perf_counter()
                await anyio.to_thread.run_sync(write, i)
                at = await sink.wait_for(status_at(1_800_000_000_000 + i))
                if i:  # the first event also pays for watcher start-up
                    out.append(at - t0)
            tg.cancel_scope.cancel()
        owner.kill()
        owner.wait()
        return out


async def exit_latency(use_pidfd: bool, events: int, tick: float) -> list[float]:
    sink = EventSink()
    watcher = PidWatcher(tick=tick, use_pidfd=use_pidfd)
    out: list[float] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run, sink)
        for _ in range(events):
            proc = await anyio.open_process(["sleep", "60"])
            async with proc:
                watcher.watch(proc.pid, procfs.start_token(proc.pid))
                await sink.wait_for(pid_message(messages.ProcessSeen, proc.pid))
                t0 = time.perf_counter()
                proc.kill()
                at = await sink.wait_for(pid_message(messages.ProcessGone, proc.pid))
                out.append(at - t0)
                await proc.wait()
        tg.cancel_scope.cancel()
    return out


async def loop_lateness(
    work: Callable[[], object], repeats: int
) -> tuple[list[float], list[float]]:
    """Lateness samples of a 1 ms timer while ``work`` runs ``repeats`` times in a worker
    thread, and of the same timer for as long again without work (baseline)."""

    async def measure(samples: list[float], done: Callable[[], bool]) -> None:
        while not done():
            t0 = time.perf_counter()
            await anyio.sleep(0.001)
            samples.append(time.perf_counter() - t0 - 0.001)

    busy_samples: list[float] = []
    stop = anyio.Event()
    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(measure, busy_samples, stop.is_set)
        for _ in range(repeats):
            await anyio.to_thread.run_sync(work)
        stop.set()
    busy = time.perf_counter() - t0
    idle_samples: list[float] = []
    end = time.perf_counter() + busy
    await measure(idle_samples, lambda: time.perf_counter() > end)
    return busy_samples, idle_samples


async def main() -> None:
    sleepers = await anyio.to_thread.run_sync(spawn_sleepers, 300)
    try:
        table_size = raw_proc_scan()
        rounds = 60
        raw: list[float] = []
        ours: list[float] = []
        for _ in range(rounds):  # interleaved so both see the same machine state
            raw.extend(time_many(raw_proc_scan, 1))
            ours.extend(time_many(discovery_tick, 1))
        raw_med, ours_med = statistics.median(raw), statistics.median(ours)
        print(f"process table: {table_size} processes (incl. 300 extra sleep)")
        print(
            f"discovery tick (scan_processes + children_map): median {ours_med * 1e3:.2f} ms; "
            f"raw /proc scan: median {raw_med * 1e3:.2f} ms; ratio {ours_med / raw_med:.2f}x "
            "(budget <= 1.5x)"
        )
        late, base = await loop_lateness(discovery_tick, 30)
        # The floor of any worker-thread hop here: a worker that only sleeps as long as a
        # discovery tick takes (it holds no GIL and touches nothing), hopped to 30 times.
        floor, _ = await loop_lateness(lambda: time.sleep(ours_med), 30)
        print(
            "event-loop 1 ms timer while 30 discovery ticks ran in a worker thread: "
            f"worst {max(late) * 1e3:.2f} ms, p99 {pct(late, 99) * 1e3:.2f} ms late; "
            f"same timer without work: worst {max(base) * 1e3:.2f} ms, "
            f"p99 {pct(base, 99) * 1e3:.2f} ms; while a worker only slept as long, 30 times: "
            f"worst {max(floor) * 1e3:.2f} ms, p99 {pct(floor, 99) * 1e3:.2f} ms "
            "(budget worst <= 2 ms)"
        )
    finally:
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()

    for mode, interval in (("watch", 0.25), ("poll", 0.25), ("poll", 0.02)):
        lat = await registry_latency(mode, 200, interval)
        label = "inotify on the loop" if mode == "watch" else f"poll {interval}s"
        print(
            f"registry rewrite -> RegistryStatus, {label}: p50 {pct(lat, 50) * 1e3:.2f} ms, "
            f"p99 {pct(lat, 99) * 1e3:.2f} ms, max {max(lat) * 1e3:.2f} ms over {len(lat)} "
            "(budget p99 <= 50 ms)"
        )
    lat = await exit_latency(True, 200, tick=1.0)
    print(
        f"process exit -> ProcessGone, pidfd (tick 1 s): p50 {pct(lat, 50) * 1e3:.2f} ms, "
        f"p99 {pct(lat, 99) * 1e3:.2f} ms over {len(lat)}"
    )
    for tick, n in ((0.1, 100), (1.0, 20)):
        lat = await exit_latency(False, n, tick=tick)
        print(
            f"process exit -> ProcessGone, pidfd disabled (tick {tick} s): "
            f"p50 {pct(lat, 50) * 1e3:.2f} ms, p99 {pct(lat, 99) * 1e3:.2f} ms over {len(lat)}"
        )


if __name__ == "__main__":
    anyio.run(main)
