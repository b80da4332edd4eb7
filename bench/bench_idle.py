"""Idle CPU of the whole daemon, every thread, discovery and ``--tmux`` on.

Run: ``.venv/bin/python bench/bench_idle.py [--claude 50] [--codex 50] [--seconds 60]
[--runs 3]``

The world (:mod:`bench.world`): a private tmux server, ``--claude`` panes whose process is a
live ``claude`` with its registry record, ``--codex`` panes whose process is a live ``codex``
holding its rollout open; ``paneward run --tmux -L <server>`` with discovery on. Once every
session is ``running`` and bound to its pane, and a settle of ``--settle`` seconds has passed,
nothing changes in the world for ``--seconds``: the daemon's CPU over that window is read from
``/proc/<pid>/stat`` (utime + stime of every thread, exited ones included), and per thread
from ``/proc/<pid>/task/<tid>/schedstat`` with its wake-ups (context switches).

Baseline, measured in the same window: a bare ``anyio.run(anyio.sleep_forever)`` process of the
same interpreter (the floor of an idle asyncio process: nothing to do, no wake-up).

What the daemon makes tmux do is reported beside it: the tmux server's CPU (schedstat, every
thread) over the same window, and over a window of ``min(--seconds, 15)`` s before the daemon
started (the same panes, no client: tmux's own floor). The difference is paneward's control-mode
client, mostly its pane subscription (``actors/core/tmux/panes.py``), which tmux re-evaluates
over every pane once a second.

Each run is a fresh world and a fresh daemon: first with no session at all, then with the
sessions, ``--runs`` times each, interleaved.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(ROOT))

from bench.world import process_cpu, thread_cpu, threads_cpu_ns, world  # noqa: E402

BARE = "import anyio\nanyio.run(anyio.sleep_forever)\n"


@dataclass
class Idle:
    percent: float  # of one core, the whole daemon process
    bare_percent: float  # the bare anyio process, same window
    wakeups_per_s: float
    threads: list[tuple[int, float, float, bool]]  # tid, % of a core, wake-ups/s, new
    pidfds: int
    elapsed: float
    tmux_percent: float  # the tmux server, same window
    tmux_alone_percent: float  # the tmux server before the daemon started


async def one_run(claude: int, codex: int, seconds: float, settle: float) -> Idle:
    with tempfile.TemporaryDirectory(prefix="pw-bench-idle-") as raw:
        async with world(Path(raw)) as w:
            w.add_claude(claude)
            w.add_codex(codex)
            tmux = w.tmux_pid()
            alone0, alone_t0 = threads_cpu_ns(tmux), time.monotonic()
            await anyio.sleep(min(seconds, 15.0))
            alone1, alone_t1 = threads_cpu_ns(tmux), time.monotonic()
            daemon = await w.start_daemon()
            await w.wait_bound()
            async with await anyio.open_process([sys.executable, "-c", BARE]) as bare:
                await anyio.sleep(settle)
                threads0 = thread_cpu(daemon.pid)
                cpu0, bare0, t0 = process_cpu(daemon.pid), process_cpu(bare.pid), time.monotonic()
                tmux0 = threads_cpu_ns(tmux)
                await anyio.sleep(seconds)
                cpu1, bare1, t1 = process_cpu(daemon.pid), process_cpu(bare.pid), time.monotonic()
                tmux1 = threads_cpu_ns(tmux)
                threads1 = thread_cpu(daemon.pid)
                bare.kill()
            stats = (await daemon.counters())["pid_watcher"]
    elapsed = t1 - t0
    per_thread = []
    for tid, end in sorted(threads1.items()):
        start = threads0.get(tid)
        cpu_ns = end.cpu_ns - (start.cpu_ns if start else 0)
        wakeups = end.wakeups - (start.wakeups if start else 0)
        per_thread.append((tid, cpu_ns / 1e9 / elapsed * 100, wakeups / elapsed, start is None))
    return Idle(
        percent=(cpu1 - cpu0) / elapsed * 100,
        bare_percent=(bare1 - bare0) / elapsed * 100,
        wakeups_per_s=sum(t[2] for t in per_thread),
        threads=per_thread,
        pidfds=int(stats["pidfds_open"]),
        elapsed=elapsed,
        tmux_percent=(tmux1 - tmux0) / 1e9 / elapsed * 100,
        tmux_alone_percent=(alone1 - alone0) / 1e9 / (alone_t1 - alone_t0) * 100,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--claude", type=int, default=50)
    parser.add_argument("--codex", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--settle", type=float, default=15.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    label = f"{args.claude} Claude + {args.codex} Codex"
    worlds = {"no session": (0, 0), label: (args.claude, args.codex)}
    results: dict[str, list[Idle]] = {name: [] for name in worlds}
    for _ in range(args.runs):
        for name, (claude, codex) in worlds.items():
            r = anyio.run(one_run, claude, codex, args.seconds, args.settle)
            results[name].append(r)
            print(
                f"{name}: daemon {r.percent:.3f} % of a core over {r.elapsed:.0f} s, "
                f"{r.wakeups_per_s:.1f} wake-ups/s over {len(r.threads)} threads "
                f"(pidfds {r.pidfds}); bare anyio process {r.bare_percent:.3f} %; tmux server "
                f"{r.tmux_percent:.3f} % (before the daemon: {r.tmux_alone_percent:.3f} %)",
                flush=True,
            )
            for tid, pct, wakes, new in r.threads:
                print(f"    thread {tid}{' (new)' if new else ''}: {pct:.3f} %, {wakes:.1f}/s")
    for name, runs in results.items():
        values = sorted(r.percent for r in runs)
        wakes = statistics.median(r.wakeups_per_s for r in runs)
        bare = statistics.median(r.bare_percent for r in runs)
        print(
            f"idle, {name}: % of a core min {values[0]:.3f} / median "
            f"{statistics.median(values):.3f} / max {values[-1]:.3f} over {len(runs)} runs; "
            f"wake-ups/s median {wakes:.1f}; baseline (bare anyio process) median {bare:.3f} %"
        )
        tmux = sorted(r.tmux_percent for r in runs)
        alone = statistics.median(r.tmux_alone_percent for r in runs)
        print(
            f"tmux server, {name}: % of a core min {tmux[0]:.3f} / median "
            f"{statistics.median(tmux):.3f} / max {tmux[-1]:.3f} with the daemon; median "
            f"{alone:.3f} % before it (same panes, no client)"
        )


if __name__ == "__main__":
    main()
