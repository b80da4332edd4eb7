"""NATS publishing: what it costs the daemon per transition, and idle.

Run: ``.venv/bin/python bench/bench_nats.py [--events 4000] [--idle-s 30] [--runs 3]``

A real ``nats-server -js`` on loopback (tests/support/nats.py) and real daemons
(``paneward run`` with discovery on, its harness homes empty, tests/support/daemon.py),
each run fresh:

- **Publish cost.** The same ``--events`` Claude hooks (each one transition) go over one
  connection to a daemon with ``--nats`` and to one without, in turn. Cost = the daemon's CPU
  (utime + stime of every thread, ``/proc/<pid>/stat``) from the first frame sent until every
  transition is numbered and, with NATS, acked by the server; divided by the transitions. The
  daemon without NATS is the baseline of the same run; the ratio is the figure.
- **Reader.** ``paneward watch --json --nats URL --since 0`` reads those transitions back from
  the stream: its CPU from its first line to its last, per message (its start-up not counted).
- **Idle CPU.** A daemon connected to the server (default heartbeat, 5 s), nothing happening:
  its CPU over ``--idle-s`` (every thread, exited ones too: ``bench.world.process_cpu_ns``),
  beside the same daemon without NATS in the same run. Budget: <= 0.2 % of a core.

The nats-server's own CPU is reported, not counted: it is the server's, on its own machine in a
real fleet.
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

from bench.world import process_cpu, process_cpu_ns  # noqa: E402
from tests.support.daemon import DaemonProcess, raw_send, start_token  # noqa: E402
from tests.support.nats import nats_server  # noqa: E402
from tests.support.polling import poll_until  # noqa: E402
from tests.support.sessions import burst, frames  # noqa: E402


async def _settled(daemon: DaemonProcess, count: int, nats: bool) -> None:
    async def done() -> bool:
        status = await daemon.status()
        if int(status["seq"]) < count:
            return False
        if not nats:
            return True
        pub = status["statistics"]["nats"]
        return bool(pub["buffered"] == 0 and pub["acked_seq"] >= count)

    await poll_until(done, f"{count} transitions", within=300, interval=0.002)


async def reader_cost(url: str, count: int) -> float:
    """µs of CPU per message of ``paneward watch --json --nats URL --since 0`` reading
    ``count`` messages from the stream: its CPU at the last line minus at the first (its
    start-up not counted), over the messages between."""
    import subprocess

    from tests.support.daemon import PANEWARD

    process = await anyio.open_process(
        [os.fspath(PANEWARD), "watch", "--json", "--nats", url, "--since", "0"],
        stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    async with process:
        assert process.stdout is not None
        seen, first_cpu = 0, 0.0
        try:
            with anyio.fail_after(120):
                async for chunk in process.stdout:
                    if seen == 0 and b"\n" in chunk:
                        first_cpu = process_cpu(process.pid)
                    seen += chunk.count(b"\n")
                    if seen >= count:
                        break
            return (process_cpu(process.pid) - first_cpu) / max(seen - 1, 1) * 1e6
        finally:
            process.terminate()


async def publish_cost(root: Path, events: int) -> tuple[float, float, float, float]:
    """(µs of daemon CPU per transition with NATS, without, server CPU µs per transition,
    reader CPU µs per message)."""
    me, token = os.getpid(), start_token(os.getpid())
    hooks = burst([f"b{i}" for i in range(8)], events // 16 + 1, me, token)[:events]
    data = frames(hooks)
    out: dict[bool, float] = {}
    server_us = 0.0
    with nats_server(root / "nats") as server:
        for nats in (True, False):
            extra = ["--nats", server.url, "--nats-host", "bench"] if nats else []
            async with DaemonProcess(root / f"d-{nats}" / "state", extra_args=extra,
                                     discovery=True) as daemon:
                if nats:
                    await _wait_connected(daemon)
                assert server.process is not None
                srv0 = process_cpu(server.process.pid)
                cpu0 = process_cpu(daemon.pid)
                await raw_send(daemon.hook_socket, data)
                await _settled(daemon, len(hooks), nats)
                out[nats] = (process_cpu(daemon.pid) - cpu0) / len(hooks) * 1e6
                if nats:
                    server_us = (process_cpu(server.process.pid) - srv0) / len(hooks) * 1e6
        reader_us = await reader_cost(server.url, len(hooks))
    return out[True], out[False], server_us, reader_us


async def _wait_connected(daemon: DaemonProcess) -> None:
    async def connected() -> bool:
        return bool((await daemon.counters())["nats"]["connected"])

    await poll_until(connected, "the publisher connected")


async def idle_cpu(root: Path, seconds: float) -> tuple[float, float]:
    """(% of a core idle with NATS connected, without), measured over the same window."""
    with nats_server(root / "nats") as server:
        on = DaemonProcess(root / "on" / "state",
                           extra_args=["--nats", server.url, "--nats-host", "i"], discovery=True)
        off = DaemonProcess(root / "off" / "state", discovery=True)
        async with on, off:
            await _wait_connected(on)
            await anyio.sleep(2.0)  # start-up's work done (measuring, not synchronising)
            a0, b0, t0 = process_cpu_ns(on.pid), process_cpu_ns(off.pid), time.monotonic()
            await anyio.sleep(seconds)
            a1, b1, t1 = process_cpu_ns(on.pid), process_cpu_ns(off.pid), time.monotonic()
            wall = (t1 - t0) * 1e9
            return (a1 - a0) / wall * 100, (b1 - b0) / wall * 100


def _spread(values: list[float], fmt: str) -> str:
    return (f"min {format(min(values), fmt)} / median {format(statistics.median(values), fmt)}"
            f" / max {format(max(values), fmt)}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=4000)
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with_nats: list[float] = []
    without: list[float] = []
    ratios: list[float] = []
    server: list[float] = []
    reader: list[float] = []
    idle_on: list[float] = []
    idle_off: list[float] = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="pw-bench-nats-") as tmp:
            on, off, srv, rd = await publish_cost(Path(tmp) / "cost", args.events)
            reader.append(rd)
            with_nats.append(on)
            without.append(off)
            ratios.append(on / off)
            server.append(srv)
            i_on, i_off = await idle_cpu(Path(tmp) / "idle", args.idle_s)
            idle_on.append(i_on)
            idle_off.append(i_off)
        print(f"run {run + 1}: {on:.0f} µs/transition with NATS, {off:.0f} without "
              f"(x{on / off:.2f}); server {srv:.0f} µs; reader {rd:.0f} µs; "
              f"idle {i_on:.3f} % vs {i_off:.3f} %",
              flush=True)
    load = os.getloadavg()
    print(f"\n## NATS publish path, {args.events} transitions, {args.runs} runs "
          f"(load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f})")
    print(f"baseline, the same daemon without NATS: {_spread(without, '.0f')} µs/transition")
    print(f"with --nats:                           {_spread(with_nats, '.0f')} µs/transition")
    print(f"ratio (same run):                      {_spread(ratios, '.2f')}")
    print(f"nats-server (not counted):             {_spread(server, '.0f')} µs/transition")
    print(f"watch --json --nats, per message read:  {_spread(reader, '.0f')} µs")
    print(f"\n## idle, {args.idle_s:g} s (budget: <= 0.2 % of a core with NATS connected)")
    print(f"baseline, without NATS: {_spread(idle_off, '.3f')} % of a core")
    print(f"with NATS connected:    {_spread(idle_on, '.3f')} % of a core")


if __name__ == "__main__":
    anyio.run(main)
