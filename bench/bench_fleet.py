"""The fleet over real SSH: latency, connections, stale detection, idle CPU.

Run: ``.venv/bin/python bench/bench_fleet.py [--hosts 4] [--sessions 25] [--edges 1000]
[--runs 3] [--keepalive 2] [--idle-seconds 20]``

The world (as the tests build it, :mod:`tests.support.ssh`): ``--hosts`` private ``sshd``
servers on loopback, each in front of a real remote daemon with ``--sessions`` sessions; a
local daemon following all of them through the user's ``ssh`` (``$PANEWARD_SSH``), and a local
``paneward watch --json`` reading its stream; every daemon with discovery on, as a user runs it
(its harness homes empty). Per run, a fresh world:

1. latency: ``--edges`` edges, one at a time, round-robin over hosts and sessions: a frame
   written to a remote daemon's hook socket (its real intake) -> the line of that transition
   read by the local ``watch --json``. p50/p99 per run.
   Baseline: the same edge into the *local* daemon -> the same local watch line (what the
   fleet adds is the remote daemon, ssh both ways, and the follower).
2. connections: established TCP connections to each sshd's port (its side, /proc/net/tcp),
   after 20 ``paneward status`` and one ``paneward fleet check`` (which rides on the host's
   master): at most 1 a host.
3. idle: ``--idle-seconds`` with nothing happening: the CPU (utime + stime) of the local daemon
   (every thread), of its ssh processes and of each host's master ssh (``ControlPersist``:
   not the daemon's child), as a share of one core.
4. stale: one host's sshd and its per-connection processes SIGSTOPped: the time until the
   daemon marks the host ``stale`` (its link's ``since_ms``), and until a polling
   ``status --counters`` shows it, against 2 keepalive intervals.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import anyio.abc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(ROOT))

from actors.sources import procfs  # noqa: E402
from tests.support.daemon import PANEWARD, DaemonProcess, raw_send  # noqa: E402
from tests.support.polling import poll_until  # noqa: E402
from tests.support.sessions import spawned_frame, status_frame  # noqa: E402
from tests.support.ssh import ssh_fleet  # noqa: E402


def _status(env: dict[str, str], *args: str) -> str:
    return subprocess.run([os.fspath(PANEWARD), *args], env=env, capture_output=True, text=True,
                          check=False, timeout=60).stdout


def _cpu_ticks(pid: int, gone: int = 0) -> int:
    """utime + stime of every thread of ``pid``; ``gone`` when it has exited."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return gone
    return int(fields[11]) + int(fields[12])


class Lines:
    def __init__(self, stream: anyio.abc.ByteReceiveStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def until_both(self, a: bytes, b: bytes, c: bytes) -> None:
        """Until a line holding ``a``, ``b`` and ``c`` was read (earlier lines are dropped)."""
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                if a in line and b in line and c in line:
                    return
            self.buffer += await self.stream.receive()


def _masters(root: Path) -> list[int]:
    """The master ssh processes whose ControlPath is under ``root`` (their title names it)."""
    mark = f"ssh: {root}/".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if cmdline.read().startswith(mark):
                        found.append(int(entry))
            except OSError:
                continue
    return found


async def one_run(args: argparse.Namespace, run: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="pwb", dir="/tmp") as name:
        root = Path(name)
        result: dict[str, object] = {"run": run}
        async with ssh_fleet(root, args.hosts, keepalive_s=args.keepalive,
                             discovery=True) as made:
            world, remotes, env = made.world, made.remotes, made.env
            for remote in remotes:
                await raw_send(remote.hook_socket, b"".join(
                    spawned_frame(f"s{j}") + status_frame(f"s{j}", "working", j)
                    for j in range(args.sessions)))
            async with DaemonProcess(made.local_state, env=env, discovery=True) as local:
                want = args.hosts * args.sessions

                async def merged() -> bool:
                    text = await anyio.to_thread.run_sync(_status, env, "status", "--json")
                    return bool(text) and len(json.loads(text)) >= want

                await poll_until(merged, "the merged view", within=120)
                async with await anyio.open_process(
                    [os.fspath(PANEWARD), "watch", "--json"], env=env
                ) as watch:
                    assert watch.stdout is not None
                    reader = Lines(watch.stdout)

                    async def subscribed() -> bool:
                        return int((await local.counters())["control"]["subscribers"]) >= 1

                    await poll_until(subscribed, "the watcher")
                    latencies = []
                    for n in range(args.edges):
                        remote = remotes[n % args.hosts]
                        session = f"s{(n // args.hosts) % args.sessions}"
                        # each (host, session) once a pass; passes alternate idle / working
                        word = "idle" if (n // want) % 2 == 0 else "working"
                        frame = status_frame(session, word, 1000 + n)
                        needle = f'"native_state":"{word}"'.encode()
                        tag = f'"host":"h{n % args.hosts + 1}"'.encode()
                        started = time.perf_counter()
                        await raw_send(remote.hook_socket, frame)
                        await reader.until_both(needle, tag, session.encode())
                        latencies.append((time.perf_counter() - started) * 1000)
                    base = []
                    await raw_send(local.hook_socket, spawned_frame("local")
                                   + status_frame("local", "working", 1))
                    await reader.until_both(b'"session_id":"local"', b"", b"")
                    for n in range(min(args.edges, 300)):
                        word = "idle" if n % 2 == 0 else "working"
                        frame = status_frame("local", word, 5000 + n)
                        started = time.perf_counter()
                        await raw_send(local.hook_socket, frame)
                        await reader.until_both(f'"native_state":"{word}"'.encode(),
                                                b'"session_id":"local"', b"")
                        base.append((time.perf_counter() - started) * 1000)
                    watch.terminate()
                result["p50_ms"] = statistics.median(latencies)
                result["p99_ms"] = statistics.quantiles(latencies, n=100)[98]
                result["base_p50_ms"] = statistics.median(base)
                result["base_p99_ms"] = statistics.quantiles(base, n=100)[98]
                # connections: after many commands, at most one a host
                for _ in range(20):
                    await anyio.to_thread.run_sync(_status, env, "status")
                # the daemon's environment: the same ControlPath directory, so check rides on
                # the links' connections
                check = await anyio.to_thread.run_sync(_status, env, "fleet", "check")
                result["check_ok"] = check.count(" ok:")
                result["connections"] = [s.connections() for s in world.servers.values()]
                # idle
                pid = local.pid
                # the links' ssh clients, and each host's master (ControlPersist: on its own)
                ssh = procfs.children(pid) + _masters(root)
                tick = os.sysconf("SC_CLK_TCK")
                first = {p: _cpu_ticks(p) for p in [pid, *ssh]}
                began = time.monotonic()
                await anyio.sleep(args.idle_seconds)
                # a process gone meanwhile counts what it had at the start (its end unseen)
                spent = sum(_cpu_ticks(p, ticks) - ticks for p, ticks in first.items())
                result["idle_core_pct"] = 100 * spent / tick / (time.monotonic() - began)
                result["ssh_processes"] = len(ssh)
                # stale: SIGSTOP h1's sshd and its sessions
                server = world.servers["h1"]
                assert server.process is not None
                stopped = [server.process.pid, *procfs.children(server.process.pid)]
                stopped_ms = time.time() * 1000
                for p in stopped:
                    os.kill(p, signal.SIGSTOP)
                began = time.monotonic()

                async def stale() -> bool:
                    text = await anyio.to_thread.run_sync(_status, env, "status", "--counters")
                    hosts_ = json.loads(text)["fleet"]["hosts"]
                    for h in hosts_:
                        if h["host"] == "h1" and h["health"] == "stale":
                            # when the daemon marked it (its link's record), not when we looked
                            result["stale_marked_s"] = (h["since_ms"] - stopped_ms) / 1000
                            return True
                    return False

                await poll_until(stale, "h1 stale", within=10 * args.keepalive + 30,
                                 interval=0.05)
                result["stale_s"] = time.monotonic() - began
                for p in stopped:
                    os.kill(p, signal.SIGCONT)
        return result


def spread(values: list[float]) -> str:
    return f"min {min(values):.2f} / median {statistics.median(values):.2f} / max {max(values):.2f}"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=25)
    parser.add_argument("--edges", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keepalive", type=int, default=2)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    args = parser.parse_args()
    results = []
    for run in range(1, args.runs + 1):
        result = await one_run(args, run)
        print(f"run {run}: " + ", ".join(
            f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in result.items()
            if k != "run"), flush=True)
        results.append(result)

    def col(name: str) -> list[float]:
        return [float(r[name]) for r in results]  # type: ignore[arg-type]

    print(f"remote edge -> local watch line ({args.hosts} hosts x {args.sessions} sessions, "
          f"{args.edges} edges a run): p50 {spread(col('p50_ms'))} ms, p99 "
          f"{spread(col('p99_ms'))} ms (budget p99 <= 30 ms)")
    print(f"baseline, local edge -> local watch line: p50 {spread(col('base_p50_ms'))} ms, "
          f"p99 {spread(col('base_p99_ms'))} ms")
    print(f"TCP connections per host (sshd side) after 20 status + fleet check: "
          f"{[r['connections'] for r in results]} (budget <= 1 each)")
    print(f"idle, daemon + its ssh processes + the masters: {spread(col('idle_core_pct'))} % "
          "of a core (budget <= 0.2 %)")
    print(f"sshd SIGSTOPped -> host marked stale by the daemon: {spread(col('stale_marked_s'))}"
          f" s; -> seen stale by a polling `status --counters`: {spread(col('stale_s'))} s "
          f"(keepalive {args.keepalive} s; budget <= {2 * args.keepalive} s)")


if __name__ == "__main__":
    anyio.run(main)
