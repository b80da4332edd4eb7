"""``paneward watch`` keeps up: 10 watch clients of a daemon taking 10,000 events a second.

Run: ``.venv/bin/python bench/bench_watch.py [--clients 10] [--rate 10000] [--seconds 10]
[--runs 3]``

The daemon runs as users run it (:mod:`bench.world`: ``paneward run --tmux`` with discovery on,
the store journaling every transition). ``--clients`` real ``paneward watch --json`` processes
follow it; their output is read by this process, which counts lines and looks for an
``Overflow`` marker. Claude hook frames (UserPromptSubmit / Stop alternating over 200 sessions,
so every frame is a transition) are written to the hook socket on one connection, ``rate/100``
frames every 10 ms, for ``--seconds``. Then it waits (at most 30 s) until every watcher has
printed every transition.

Kept up means: the daemon took ``--rate`` frames a second in (the hook socket applies
backpressure, so a daemon that cannot slows the sender down: the rate achieved is printed), every
watcher printed every transition, none got an overflow marker, and the last line reached them
promptly after the last frame was sent (the lag is printed). The daemon's
CPU over the window (every thread, ``/proc/<pid>/stat``) is printed too, and per frame: the
window ends when the last line is out, so it holds all of every frame's work. The event loop's
thread alone (``schedstat``) is what bounds the rate: at 10,000 frames a second it has 100 µs
for each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import anyio.abc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(ROOT))

import messages  # noqa: E402
from bench.world import process_cpu, thread_cpu, world  # noqa: E402
from tests.support.daemon import PANEWARD, claude_hook_payload, poll_until, start_token  # noqa: E402

SESSIONS = 200


def frames(count: int, offset: int, owners: list[tuple[int, str]]) -> list[bytes]:
    out = []
    for i in range(offset, offset + count):
        n = i % SESSIONS
        event = "UserPromptSubmit" if (i // SESSIONS) % 2 == 0 else "Stop"
        now = time.time_ns() // 1_000_000
        payload = claude_hook_payload(event, i, session=f"watch-{n:04d}")
        pid, token = owners[n]
        hook = messages.NotifyHook(
            harness="claude-code",
            payload=payload,
            at_ms=now,
            observed_at_ms=now,
            pid=pid,
            start_token=token,
        )
        out.append(messages.encode(hook) + b"\n")
    return out


class Reader:
    def __init__(self) -> None:
        self.lines = 0
        self.overflows = 0
        self.last_at = 0.0
        self.want = 0
        self.done = anyio.Event()

    async def run(self, process: anyio.abc.Process) -> None:
        assert process.stdout is not None
        async for chunk in process.stdout:
            self.lines += chunk.count(b"\n")
            self.overflows += chunk.count(b'"type":"Overflow"')
            self.last_at = time.perf_counter()
            if self.want and self.lines >= self.want:
                self.done.set()
        self.done.set()  # the watcher ended (overflowed and disconnected, or killed)


async def one_run(clients: int, rate: int, seconds: float) -> dict[str, float]:
    # Every session has its own live owner (a `sleep`), as every Claude session has its pid.
    async with AsyncExitStack() as stack:
        sleepers = [
            await stack.enter_async_context(await anyio.open_process(["sleep", "600"]))
            for _ in range(SESSIONS)
        ]
        for sleeper in sleepers:
            stack.callback(sleeper.kill)
        owners = [(p.pid, start_token(p.pid)) for p in sleepers]
        return await _run(clients, rate, seconds, owners)


async def _run(
    clients: int, rate: int, seconds: float, owners: list[tuple[int, str]]
) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="pw-bench-watch-") as raw:
        async with world(Path(raw)) as w:
            daemon = await w.start_daemon()
            readers = [Reader() for _ in range(clients)]
            async with anyio.create_task_group() as tg:
                procs = []
                for reader in readers:
                    proc = await anyio.open_process(
                        [os.fspath(PANEWARD), "watch", "--json"], env=daemon.env
                    )
                    procs.append(proc)
                    tg.start_soon(reader.run, proc)

                async def subscribed() -> bool:
                    return int((await daemon.counters())["control"]["watches"]) >= clients

                await poll_until(subscribed, "every watcher's subscription")
                per_tick = max(1, rate // 100)
                ticks = int(seconds * 100)
                batches = [
                    b"".join(frames(per_tick, t * per_tick, owners)) for t in range(ticks)
                ]
                sent = per_tick * ticks
                async with await anyio.connect_unix(daemon.hook_socket) as hook:
                    cpu0, t0 = process_cpu(daemon.pid), time.perf_counter()
                    loop0 = thread_cpu(daemon.pid)[daemon.pid].cpu_ns
                    for t, batch in enumerate(batches):
                        await hook.send(batch)
                        await anyio.sleep(max(0.0, t0 + (t + 1) * 0.01 - time.perf_counter()))
                    end = time.perf_counter()
                    with anyio.move_on_after(30):
                        for reader in readers:
                            reader.want = sent
                            if reader.lines >= sent:
                                reader.done.set()
                            await reader.done.wait()
                    cpu1, t1 = process_cpu(daemon.pid), time.perf_counter()
                    loop1 = thread_cpu(daemon.pid)[daemon.pid].cpu_ns
                stats = (await daemon.counters())["supervisor"]
                for proc in procs:
                    if proc.returncode is None:
                        proc.terminate()
                for proc in procs:
                    await proc.wait()
                tg.cancel_scope.cancel()
    return {
        "sent": sent,
        "send_rate": sent / (end - t0),
        "received_min": min(r.lines for r in readers),
        "overflows": sum(r.overflows for r in readers),
        "lag_ms": (max(r.last_at for r in readers) - end) * 1000,
        "cpu_percent": (cpu1 - cpu0) / (t1 - t0) * 100,
        # The window holds the whole of every frame's work (it ends when the last line is out).
        "cpu_us": (cpu1 - cpu0) / sent * 1e6,
        "loop_us": (loop1 - loop0) / sent / 1e3,
        "transitions": stats["transitions"],
        "hub_overflows": stats["overflows"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    lags = []
    for run in range(args.runs):
        r = anyio.run(one_run, args.clients, args.rate, args.seconds)
        lags.append(r["lag_ms"])
        kept = r["received_min"] >= r["sent"] and r["overflows"] == 0
        # The hook socket applies backpressure: a daemon that cannot take `rate` in slows the
        # sender down, and its watchers keeping up then proves nothing about `rate`.
        took = r["send_rate"] >= 0.95 * args.rate
        verdict = (
            "kept up" if kept and took
            else f"FELL BEHIND at {r['send_rate']:,.0f}/s" if not kept
            else f"kept up at {r['send_rate']:,.0f}/s, but the daemon took only that much in"
        )
        print(
            f"run {run + 1}: sent {r['sent']:.0f} frames at {r['send_rate']:,.0f}/s; "
            f"{args.clients} watchers each printed >= {r['received_min']:.0f} transitions, "
            f"overflow markers {r['overflows']:.0f} (hub overflows {r['hub_overflows']}); "
            f"last line {r['lag_ms']:.0f} ms after the last frame; daemon "
            f"{r['cpu_percent']:.0f} % of a core ({r['cpu_us']:.0f} µs a frame, the event "
            f"loop's thread {r['loop_us']:.1f} µs) -> {verdict}",
            flush=True,
        )
    lags.sort()
    print(f"lag after the last frame: min {lags[0]:.0f} / median {statistics.median(lags):.0f} / "
          f"max {lags[-1]:.0f} ms over {len(lags)} runs")


if __name__ == "__main__":
    main()
