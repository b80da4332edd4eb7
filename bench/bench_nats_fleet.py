"""The NATS fleet: a hook into a publishing daemon -> the follower's merged view.

Run: ``.venv/bin/python bench/bench_nats_fleet.py [--daemons 10] [--sessions 20]
[--edges 1000] [--burst 200] [--runs 3]``

The world, fresh each run: a real ``nats-server -js`` 2.9.10 on loopback
(tests/support/nats.py); ``--daemons`` real publishing daemons (``paneward run --nats URL
--nats-host dN``), each with ``--sessions`` sessions; one follower daemon whose hosts file has
one ``[[nats]]`` entry for that server, and a ``paneward watch --json`` on the follower; every
daemon with discovery on, as a user runs it (its harness homes empty).

1. **Latency.** ``--edges`` edges, one at a time, round-robin over daemons and sessions: a
   frame written to a publishing daemon's hook socket (its real intake, what ``paneward hook``
   writes) -> the line of that transition read by the follower's ``watch --json``, host and
   session named in it. p50/p99 per run. Budget p99 <= 30 ms on loopback.
   Baseline: the same edge into the follower's own hook socket -> the same watch line (what the
   fleet adds: the publisher, the server, the follower's link).
2. **Per-message costs** (for the scale on paper in docs/fleet.md). ``--burst`` new sessions
   into every daemon at once (two transitions each: spawned, working), until the follower's
   watch printed every one of those transitions: the follower daemon's CPU and the server's
   (utime + stime, every thread) over that time, per transition; the publishers' own cost is
   bench/bench_nats.py's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(ROOT))

from actors.core.fleet import hosts as core  # noqa: E402
from bench.bench_fleet import Lines  # noqa: E402
from bench.world import process_cpu  # noqa: E402
from tests.support.daemon import PANEWARD, DaemonProcess, daemon_env, raw_send  # noqa: E402
from tests.support.nats import nats_server  # noqa: E402
from tests.support.polling import poll_until  # noqa: E402
from tests.support.sessions import spawned_frame, status_frame  # noqa: E402


async def one_run(args: argparse.Namespace, run: int) -> dict[str, float]:
    result: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="pwn", dir="/tmp") as name:
        root = Path(name)
        with nats_server(root / "nats") as server:
            publishers = [
                DaemonProcess(
                    root / f"d{i}" / "state",
                    extra_args=["--nats", server.url, "--nats-host", f"d{i}"], discovery=True,
                )
                for i in range(args.daemons)
            ]
            config = root / "config" / "paneward"
            config.mkdir(parents=True)
            (config / "fleet.toml").write_text(
                core.render_fleet(core.Fleet(nats=(core.NatsEntry(server.url),))))
            follower_state = root / "follower" / "state"
            follower = DaemonProcess(follower_state, env=daemon_env(
                follower_state, XDG_CONFIG_HOME=os.fspath(root / "config")), discovery=True)
            try:
                for daemon in publishers:
                    await daemon.start()
                    await raw_send(daemon.hook_socket, b"".join(
                        spawned_frame(f"s{j}") + status_frame(f"s{j}", "working", j)
                    for j in range(args.sessions)))
                await follower.start()
                want = args.daemons * args.sessions

                async def merged() -> bool:
                    status = await follower.status()
                    return bool(len(status["activities"]) >= want)

                await poll_until(merged, "the merged view", within=120)
                async with await anyio.open_process(
                    [os.fspath(PANEWARD), "watch", "--json"], env=follower.env
                ) as watch:
                    assert watch.stdout is not None
                    reader = Lines(watch.stdout)

                    async def subscribed() -> bool:
                        return int((await follower.counters())["control"]["subscribers"]) >= 1

                    await poll_until(subscribed, "the watcher")
                    latencies = []
                    for n in range(args.edges):
                        daemon = publishers[n % args.daemons]
                        session = f"s{(n // args.daemons) % args.sessions}"
                        word = "idle" if (n // want) % 2 == 0 else "working"
                        frame = status_frame(session, word, 1000 + n)
                        tag = f'"host":"d{n % args.daemons}"'.encode()
                        started = time.perf_counter()
                        await raw_send(daemon.hook_socket, frame)
                        await reader.until_both(f'"native_state":"{word}"'.encode(), tag,
                                                f'"session_id":"{session}"'.encode())
                        latencies.append((time.perf_counter() - started) * 1000)
                    base = []
                    await raw_send(follower.hook_socket, spawned_frame("local")
                                   + status_frame("local", "working", 1))
                    await reader.until_both(b'"session_id":"local"', b"", b"")
                    for n in range(min(args.edges, 300)):
                        word = "idle" if n % 2 == 0 else "working"
                        frame = status_frame("local", word, 5000 + n)
                        started = time.perf_counter()
                        await raw_send(follower.hook_socket, frame)
                        await reader.until_both(f'"native_state":"{word}"'.encode(),
                                                b'"session_id":"local"', b"")
                        base.append((time.perf_counter() - started) * 1000)
                    # the burst: every daemon at once, new sessions (two transitions each)
                    assert server.process is not None
                    seq0 = [int((await d.status())["seq"]) for d in publishers]
                    frames0 = [int((await d.counters())["hook_listener"]["frames_delivered"])
                               for d in publishers]
                    cpu = (process_cpu(follower.pid), process_cpu(server.process.pid))
                    began = time.perf_counter()
                    total: list[int] = []
                    counted = anyio.Event()
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(_count_remote_lines, reader, total, counted)
                        data = b"".join(spawned_frame(f"b{k}")
                                        + status_frame(f"b{k}", "working", 9000 + k)
                                        for k in range(args.burst))
                        async with anyio.create_task_group() as senders:
                            for daemon in publishers:
                                senders.start_soon(raw_send, daemon.hook_socket, data)
                        for daemon, f0 in zip(publishers, frames0, strict=True):
                            await daemon.wait_delivered(f0 + 2 * args.burst, within=120)
                        seqs = [int((await d.status())["seq"]) for d in publishers]
                        total.append(sum(b - a for a, b in zip(seq0, seqs, strict=True)))
                        counted.set()
                    spent = time.perf_counter() - began
                    transitions = total[0]
                    result["follower_us"] = (
                        (process_cpu(follower.pid) - cpu[0]) / transitions * 1e6)
                    result["server_us"] = (
                        (process_cpu(server.process.pid) - cpu[1]) / transitions * 1e6)
                    result["burst_per_s"] = transitions / spent
                    watch.terminate()
                result["p50_ms"] = statistics.median(latencies)
                result["p99_ms"] = statistics.quantiles(latencies, n=100)[98]
                result["base_p50_ms"] = statistics.median(base)
                result["base_p99_ms"] = statistics.quantiles(base, n=100)[98]
            finally:
                with anyio.CancelScope(shield=True):
                    for daemon in (*publishers, follower):
                        if daemon.process is not None and daemon.process.returncode is None:
                            await daemon.stop()
    print(f"run {run}: " + ", ".join(f"{k} {v:.2f}" for k, v in result.items()), flush=True)
    return result


async def _count_remote_lines(reader: Lines, total: list[int], known: anyio.Event) -> None:
    """Read the watch until it printed ``total[0]`` remote lines (set once ``known``)."""
    seen = 0
    while not known.is_set() or seen < total[0]:
        while b"\n" in reader.buffer:
            line, reader.buffer = reader.buffer.split(b"\n", 1)
            if b'"host":"d' in line:
                seen += 1
        if known.is_set() and seen >= total[0]:
            return
        reader.buffer += await reader.stream.receive()


def spread(values: list[float]) -> str:
    return f"min {min(values):.2f} / median {statistics.median(values):.2f} / max {max(values):.2f}"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--daemons", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--edges", type=int, default=1000)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results = [await one_run(args, run) for run in range(1, args.runs + 1)]

    def col(name: str) -> list[float]:
        return [r[name] for r in results]

    print(f"hook into a publishing daemon -> follower's watch line ({args.daemons} daemons x "
          f"{args.sessions} sessions, {args.edges} edges a run): p50 {spread(col('p50_ms'))} ms, "
          f"p99 {spread(col('p99_ms'))} ms (budget p99 <= 30 ms)")
    print(f"baseline, the follower's own edge -> the same watch: p50 "
          f"{spread(col('base_p50_ms'))} ms, p99 {spread(col('base_p99_ms'))} ms")
    print(f"burst of {args.daemons} x {args.burst}: follower CPU per transition "
          f"{spread(col('follower_us'))} µs, nats-server CPU per transition "
          f"{spread(col('server_us'))} µs, {spread(col('burst_per_s'))} transitions/s end to end")


if __name__ == "__main__":
    anyio.run(main)
