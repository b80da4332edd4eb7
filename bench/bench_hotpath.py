"""Where the daemon's CPU per hook goes: its hot path in one process, part by part.

Run: ``.venv/bin/python bench/bench_hotpath.py [--frames 40000] [--watchers 10] [--runs 3]``

``bench_watch.py``'s rate is bound by one core: the interpreter's (the GIL). This bench runs the
same hook frames through the daemon's own objects in one process, without the sockets, tmux and
processes around them, and reports per frame the CPU of the event loop's thread, the CPU of
every thread (the store's writer commits in a worker thread), the wall time, and the cyclic
garbage collector's collections and time.

The path, as the daemon takes each hook frame: ``check_frame`` (decode and validate) ->
``restamp`` -> ``Supervisor.deliver_nowait`` (normalize, route, reducer, hub) -> the store
(``follow`` records every transition; its writer commits bounded transactions in a worker
thread; intake waits at its backpressure gate, as the hook listener does) and the watch fan-out
to ``--watchers`` joined watchers, whose writes are taken and dropped (no socket: the kernel's
copies are ``bench_watch.py``'s). Frames are handed over 100 at a time with one yield between
(about a socket read's worth). Parts: ``all``; ``no store`` (no follow, no gate: the difference
is the store's share); ``no fan-out``.

There is no baseline: the figures are an absolute breakdown (no budget of their own). The
``all`` row's frames per second is what the interpreter allows before the kernel's work
(sockets to the sender and to every watcher) and the other sinks (tmux, notifications).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(ROOT))

from actors.core.clock import now_ms  # noqa: E402
from actors.core.ingress.frames import Rejection, check_frame, restamp  # noqa: E402
from actors.sinks.store import open_store  # noqa: E402
from actors.sources.watch_fanout import Watcher, WatchFanout  # noqa: E402
from bench.bench_watch import SESSIONS, frames  # noqa: E402
from supervisor import Supervisor  # noqa: E402
from tests.support.daemon import start_token  # noqa: E402
from tests.support.polling import poll_until  # noqa: E402

PARTS = ("all", "no store", "no fan-out")
HANDOVER = 100  # frames per yield, about one read of the hook socket


class Collector:
    """Collections of the cyclic garbage collector and their time, while armed."""

    def __init__(self) -> None:
        self.collections = 0
        self.seconds = 0.0
        self._started = 0.0
        self.armed = False

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if not self.armed:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.collections += 1
            self.seconds += time.perf_counter() - self._started


async def _drain(watcher: Watcher) -> None:
    while await watcher.next_write() is not None:
        pass


async def one_run(part: str, lines: list[bytes], watchers: int) -> dict[str, float]:
    collector = Collector()
    gc.collect()
    gc.callbacks.append(collector)
    try:
        with tempfile.TemporaryDirectory(prefix="pw-bench-hotpath-") as raw:
            return await _run(part, lines, watchers, collector, Path(raw))
    finally:
        gc.callbacks.remove(collector)


async def _run(
    part: str, lines: list[bytes], watchers: int, collector: Collector, root: Path
) -> dict[str, float]:
    count = len(lines)
    async with (
        Supervisor() as sup,
        open_store(root / "paneward.db") as store,
        anyio.create_task_group() as tg,
    ):
        if part != "no store":
            await tg.start(store.follow, sup)
        if part != "no fan-out":
            fanout = WatchFanout(sup, 16_384, 512)
            tg.start_soon(fanout.run)
            for _ in range(watchers):
                tg.start_soon(_drain, fanout.join())
        gate = store.backpressure(lambda: sup.seq + sup.queued)
        await anyio.wait_all_tasks_blocked()
        collector.armed = True
        wall0, cpu0, loop0 = time.perf_counter(), time.process_time(), time.thread_time()
        for start in range(0, count, HANDOVER):
            for line in lines[start : start + HANDOVER]:
                if part != "no store" and gate.closed():
                    await gate.wait()
                message = check_frame(line)
                if isinstance(message, Rejection):
                    raise SystemExit(f"bench frame refused: {message}")
                sup.deliver_nowait(restamp(message, now_ms()))
            await anyio.lowlevel.checkpoint()
        await poll_until(
            lambda: sup.statistics().transitions >= count, "every transition", interval=0.001
        )
        if part != "no store":
            await store.flush()
        if part != "no fan-out":
            await poll_until(
                lambda: fanout.statistics().pumped >= count, "every pumped", interval=0.001
            )
        wall1, cpu1, loop1 = time.perf_counter(), time.process_time(), time.thread_time()
        collector.armed = False
        tg.cancel_scope.cancel()
    return {
        "loop_us": (loop1 - loop0) / count * 1e6,
        "all_us": (cpu1 - cpu0) / count * 1e6,
        "wall_us": (wall1 - wall0) / count * 1e6,
        "collections": collector.collections,
        "gc_us": collector.seconds / count * 1e6,
    }


def _cell(values: list[float], digits: int = 1) -> str:
    return " / ".join(
        f"{v:,.{digits}f}" for v in (min(values), statistics.median(values), max(values))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--frames", type=int, default=40_000)
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    # Every session has its own live owner (a `sleep`), as in bench_watch.py.
    sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(SESSIONS)]
    try:
        owners = [(p.pid, start_token(p.pid)) for p in sleepers]
        lines = [f.rstrip(b"\n") for f in frames(args.frames, 0, owners)]
        results: dict[str, list[dict[str, float]]] = {part: [] for part in PARTS}
        for _ in range(args.runs):
            for part in PARTS:  # interleaved: the machine's drift spreads over every part
                results[part].append(anyio.run(one_run, part, lines, args.watchers))
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
    print(
        f"frames={args.frames} watchers={args.watchers} runs={args.runs} "
        f"python={sys.version.split()[0]}; min / median / max per frame"
    )
    print(
        "| part | loop thread CPU µs | all threads CPU µs | wall µs | frames/s (wall) "
        "| GC collections | GC µs |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for part in PARTS:
        rows = results[part]
        print(
            f"| {part} | {_cell([r['loop_us'] for r in rows])} "
            f"| {_cell([r['all_us'] for r in rows])} | {_cell([r['wall_us'] for r in rows])} "
            f"| {_cell([1e6 / r['wall_us'] for r in rows], 0)} "
            f"| {_cell([r['collections'] for r in rows], 0)} "
            f"| {_cell([r['gc_us'] for r in rows], 2)} |"
        )


if __name__ == "__main__":
    main()
