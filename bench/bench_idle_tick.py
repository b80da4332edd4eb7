"""Idle Claude + Codex discovery in one process: CPU of every thread, and what it does to the loop.

Run: .venv/bin/python bench/bench_idle_tick.py [--files 50] [--seconds 20]

Setup (real processes and files): ``files/2`` Claude registry files, each naming a real
live ``sleep`` process with its real start token, and ``files/2`` Codex rollouts held
open by processes renamed to ``codex``. Both discovery actors run exactly as the daemon
runs them (``ClaudeRegistryWatcher`` on inotify with its rare liveness rescan,
``CodexRolloutDiscovery`` on inotify with its rare safety sample), and nothing changes.

Measured for this whole process (every thread: the worker threads that scan and sample
too), against the same process with no actor, in the same run:

* CPU per second of idle: ``time.process_time`` (all threads) over an idle window, minus the
  same window without actors; the periodic rounds run in it (rescans + samples, from the
  actors' own statistics) and the wake-ups of every thread (context switches,
  ``/proc/self/task/*/status``);
* then, in a second window as long, the lateness of a 1 ms periodic timer (p50, p99,
  worst), with and without the actors.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(ROOT))

from actors.harnesses.claude_code.registry import ClaudeRegistryWatcher  # noqa: E402
from actors.harnesses.codex.rollouts import CodexRolloutDiscovery  # noqa: E402
from actors.sources import procfs  # noqa: E402
from bench.world import claude_sleepers  # noqa: E402
from tests.support.sinks import ListSink  # noqa: E402

# Renames itself `codex` and holds the files it is given open, as Codex holds its rollout.
FAKE_CODEX = ROOT / "tests" / "fixtures" / "codex" / "fake_codex.py"


@contextmanager
def world(tmp: Path, files: int) -> Iterator[tuple[Path, Path]]:
    claude_dir = tmp / "claude" / "sessions"
    claude_dir.mkdir(parents=True)
    codex_home = tmp / "codex"
    day = codex_home / "sessions" / "2026" / "11" / "30"
    day.mkdir(parents=True)
    # Records count only when a live `claude` of our uid owns them, as real ones are.
    sleepers = claude_sleepers(tmp / "bin", files // 2)
    holders: list[subprocess.Popen[bytes]] = []
    try:
        for n, proc in enumerate(sleepers):
            token = procfs.start_token(proc.pid)
            record = {
                "pid": proc.pid,
                "sessionId": f"bench-{n}",
                "cwd": "/w",
                "startedAt": 1_796_000_000_000,
                "procStart": token,
                "version": "2.1.332",
                "status": "idle",
                "updatedAt": 1_796_000_000_000,
                "statusUpdatedAt": 1_796_000_000_000,
            }
            (claude_dir / f"{proc.pid}.json").write_text(json.dumps(record))
        rollouts = []
        for n in range(files - files // 2):
            thread = f"01a229ab-0000-7000-8000-{n:012d}"
            path = day / f"rollout-2026-11-30T00-00-00-{thread}.jsonl"
            meta = {
                "timestamp": "2026-11-30T00:00:00.000Z",
                "type": "session_meta",
                "payload": {"id": thread},
            }
            done = {
                "timestamp": "2026-11-30T00:00:01.000Z",
                "type": "event_msg",
                "payload": {"type": "task_complete", "turn_id": "t"},
            }
            path.write_text(json.dumps(meta) + "\n" + json.dumps(done) + "\n")
            rollouts.append(path)
        for chunk in (rollouts[i : i + 5] for i in range(0, len(rollouts), 5)):
            holder = subprocess.Popen(
                [sys.executable, str(FAKE_CODEX), "codex", *map(str, chunk)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            assert holder.stdout is not None and holder.stdout.readline() == b"ready\n"
            holders.append(holder)
        yield claude_dir, codex_home
    finally:
        for proc in [*sleepers, *holders]:
            proc.kill()
            proc.wait()


def wakeups() -> dict[str, int]:
    """Context switches of every live thread of this process so far (each one a wake-up)."""
    out: dict[str, int] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            text = Path(f"/proc/self/task/{tid}/status").read_text()
        except FileNotFoundError:
            continue
        out[tid] = sum(
            int(line.split()[1])
            for line in text.splitlines()
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
        )
    return out


def woken(before: dict[str, int], after: dict[str, int]) -> int:
    """Wake-ups between two samples (threads that exited in between are not counted; threads
    that started count from zero)."""
    return sum(count - before.get(tid, 0) for tid, count in after.items())


async def measure(
    seconds: float, claude_dir: Path | None, codex_home: Path | None
) -> dict[str, float]:
    lateness: list[float] = []
    sink = ListSink()
    claude = ClaudeRegistryWatcher(claude_dir) if claude_dir is not None else None
    codex = CodexRolloutDiscovery(codex_home) if codex_home is not None else None

    def ticks() -> int:
        """Periodic rounds run so far: Claude rescans plus Codex ownership samples."""
        return (claude.statistics().scans if claude else 0) + (
            codex.statistics().samples if codex else 0
        )

    async with anyio.create_task_group() as tg:
        if claude is not None:
            tg.start_soon(claude.run, sink)
        if codex is not None:
            tg.start_soon(codex.run, sink)
        # let discovery settle (first scans emit the initial evidence), then measure idle
        await anyio.sleep(3.0)
        settled = len(sink.items)
        # Phase 1: the process's CPU (every thread) with nothing else going on.
        ticks0 = ticks()
        cpu0, wakes0 = time.process_time(), wakeups()
        await anyio.sleep(seconds)
        cpu = time.process_time() - cpu0
        wakes = woken(wakes0, wakeups())
        rounds = ticks() - ticks0
        # Phase 2: a 1 ms periodic timer, as long again, to see what scans do to it.
        end = time.perf_counter() + seconds
        while (now := time.perf_counter()) < end:
            await anyio.sleep(0.001)
            lateness.append((time.perf_counter() - now - 0.001) * 1000)
        tg.cancel_scope.cancel()
    ordered = sorted(lateness)
    return {
        "ticks": float(rounds),
        "wakeups": float(wakes),
        "loop_cpu_s": cpu,
        "late_p99_ms": ordered[int(0.99 * len(ordered))],
        "late_max_ms": ordered[-1],
        "late_p50_ms": statistics.median(ordered),
        "emitted_while_idle": float(len(sink.items) - settled),
        "emitted_at_start": float(settled),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="pw-idle-") as raw,
        world(Path(raw), args.files) as (claude_dir, codex_home),
    ):
        base = anyio.run(measure, args.seconds, None, None)
        busy = anyio.run(measure, args.seconds, claude_dir, codex_home)
    extra_ms = (busy["loop_cpu_s"] - base["loop_cpu_s"]) * 1000
    per_second_ms = extra_ms / args.seconds
    print(
        f"files={args.files} ({args.files // 2} Claude registry files of live pids, "
        f"{args.files - args.files // 2} Codex rollouts held by 'codex' processes), "
        f"{args.seconds:.0f} s idle after a 3 s settle"
    )
    print(
        f"initial evidence emitted: {busy['emitted_at_start']:.0f}; "
        f"emitted while idle: {busy['emitted_while_idle']:.0f}"
    )
    print(
        f"process CPU (every thread) over {args.seconds:.0f} s: baseline "
        f"{base['loop_cpu_s'] * 1000:.1f} ms, with actors {busy['loop_cpu_s'] * 1000:.1f} ms; "
        f"{busy['ticks']:.0f} periodic rounds (Claude rescans + Codex samples) -> "
        f"{per_second_ms:.3f} ms per second of idle ({per_second_ms / 10:.4f} % of a core); "
        f"wake-ups of every thread: {base['wakeups'] / args.seconds:.1f}/s baseline, "
        f"{busy['wakeups'] / args.seconds:.1f}/s with actors"
    )
    print(
        f"1 ms timer lateness, baseline: p50 {base['late_p50_ms']:.3f} p99 "
        f"{base['late_p99_ms']:.3f} max {base['late_max_ms']:.3f} ms"
    )
    print(
        f"1 ms timer lateness, with actors: p50 {busy['late_p50_ms']:.3f} p99 "
        f"{busy['late_p99_ms']:.3f} max {busy['late_max_ms']:.3f} ms"
    )


if __name__ == "__main__":
    main()
