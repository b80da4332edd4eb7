"""Hardening benchmark: hook intake while idle connections are held; the kill -9 loss window.

Run: ``.venv/bin/python bench/bench_hardening.py [--runs 3] [--hooks 500] [--idle 1000]
[--burst 10000]``

1. **Hook intake with 1,000 idle connections held.** A real ``paneward run``; the bench reads
   transitions from its control socket (``watch``) and sends real Claude hook frames, each on a
   new Unix connection, as ``paneward hook`` does, one at a time; latency is from the connect to
   the transition arriving. First unloaded (the baseline: the same hooks, the same daemon, no
   idle connections), then while a helper process holds ``--idle`` connections that never send
   a byte on the hook socket (the same uid) -- re-opening each one the daemon closes, so the
   pressure never drops -- and then the same on the http port (any uid can). Budget: no real
   hook lost, p99 within 2x of the unloaded p99.
2. **kill -9 loss window under the 10k burst.** ``--burst`` hooks (prompt/stop alternating over
   four sessions: one transition each) on one connection, 100 frames per 10 ms (10,000/s, the
   daemon test's burst). While it runs the bench asks ``status`` as fast as it answers: each
   answer is one consistent instant of the daemon's loop, and ``seq - store.last_flushed_seq``
   is exactly what a ``kill -9`` at that instant would lose. Then it kills the daemon with
   SIGKILL mid-burst and checks the database (integrity, a gap-free prefix holding at least the
   last committed seq it was told about). Budget: at most one bounded batch (500 rows).
   Baseline: the budget itself (a flush of everything pending in one transaction leaves
   seconds with nothing committed under this burst, and a kill loses thousands of rows).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(ROOT))

import messages  # noqa: E402 - after the sys.path line above
from tests.support.daemon import HOLDER_SCRIPT, DaemonProcess, start_token  # noqa: E402

ME = os.getpid()
TOKEN = start_token(ME)
AT = time.time_ns() // 1_000_000


def frame(session: str, n: int) -> bytes:
    event = "UserPromptSubmit" if n % 2 == 0 else "Stop"
    payload = {"session_id": session, "hook_event_name": event, "prompt_id": f"p{n}",
               "cwd": "/w", "transcript_path": "/w/t.jsonl"}
    hook = messages.NotifyHook(harness="claude-code", payload=payload, at_ms=AT + n,
                               observed_at_ms=AT + n, pid=ME, start_token=TOKEN)
    return messages.encode(hook) + b"\n"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class WatchStream:
    """Transitions from the daemon's control socket, read in this process."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self._stream = stream
        self._buffer = b""

    @classmethod
    async def open(cls, control: Path) -> WatchStream:
        stream = await anyio.connect_unix(control)
        await stream.send(b'{"op": "watch"}\n')
        return cls(stream)

    async def next(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            self._buffer += await self._stream.receive(1 << 16)
        line, _, self._buffer = self._buffer.partition(b"\n")
        item: dict[str, Any] = json.loads(line)
        return item

    async def aclose(self) -> None:
        await self._stream.aclose()


async def send_one(path: Path, data: bytes) -> None:
    async with await anyio.connect_unix(path) as stream:
        await stream.send(data)
        await stream.send_eof()


def http_request(token: str, session: str, n: int) -> bytes:
    payload = {"session_id": session, "hook_event_name": "UserPromptSubmit" if n % 2 == 0
               else "Stop", "prompt_id": f"p{n}", "cwd": "/w", "transcript_path": "/w/t.jsonl"}
    body = json.dumps(payload).encode()
    return (b"POST /hook/claude-code HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Paneward-Token: "
            + token.encode() + b"\r\nConnection: close\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


async def post_one(port: int, data: bytes) -> None:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(data)
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
            while True:
                await stream.receive()


async def intake(
    daemon: DaemonProcess, hooks: int, session: str, interval: float,
    http: tuple[int, str] | None = None,
) -> tuple[list[float], int]:
    """Latencies (ms) of ``hooks`` hooks, one every ``interval`` s (on the Unix socket, or as
    http hooks to ``http`` = (port, token)), and how many never showed up."""
    watch = await WatchStream.open(daemon.control_socket)
    out: list[float] = []
    lost = 0
    try:
        for n in range(hooks):
            await anyio.sleep(interval)  # hooks arrive over time: this spreads the samples
            begin = time.perf_counter()
            if http is None:
                await send_one(daemon.hook_socket, frame(session, n))
            else:
                await post_one(http[0], http_request(http[1], session, n))
            with anyio.move_on_after(5) as scope:
                while True:
                    item = await watch.next()
                    after = item.get("after", {})
                    if item.get("type") == "Transition" and after["key"]["session_id"] == session:
                        break
            if scope.cancelled_caught:
                lost += 1
                continue
            out.append((time.perf_counter() - begin) * 1000)
    finally:
        await watch.aclose()
    return out, lost


async def hold(
    kind: str, where: str, count: int
) -> tuple[anyio.abc.Process, BufferedByteReceiveStream]:
    process = await anyio.open_process(
        [sys.executable, "-c", HOLDER_SCRIPT, kind, where, str(count)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    lines = BufferedByteReceiveStream(process.stdout)
    line = (await lines.receive_until(b"\n", 256)).decode()
    assert line.startswith("held "), line
    return process, lines


async def release(holder: tuple[anyio.abc.Process, BufferedByteReceiveStream]) -> str:
    process, lines = holder
    assert process.stdin is not None
    await process.stdin.aclose()
    tail = (await lines.receive_until(b"\n", 256)).decode()
    await process.wait()
    await process.aclose()
    return tail.strip()


async def run_intake(args: argparse.Namespace, tmp: Path, run: int) -> dict[str, Any]:
    state = tmp / f"intake-{run}"
    state.mkdir(mode=0o700)
    token = "bench-token-" + "x" * 16
    (state / "http-token").write_text(token + "\n")
    (state / "http-token").chmod(0o600)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result: dict[str, Any] = {}
    every = args.interval
    async with DaemonProcess(state, extra_args=["--http-port", str(port)]) as daemon:
        await intake(daemon, 20, "warm-up", 0)
        result["unloaded"] = await intake(daemon, args.hooks, "unloaded", every)
        result["http unloaded"] = await intake(daemon, args.hooks, "http", every, (port, token))
        for kind, where in (("unix", os.fspath(daemon.hook_socket)), ("http", str(port))):
            holder = await hold(kind, where, args.idle)
            try:
                result[f"{kind} idle"] = await intake(daemon, args.hooks, f"{kind}-idle", every)
                if kind == "http":
                    result["http idle, http hooks"] = await intake(
                        daemon, args.hooks, "http-http", every, (port, token)
                    )
            finally:
                result[f"{kind} holder"] = await release(holder)
        result["counters"] = (await daemon.counters())["hook_listener"]
    return result


def committed(db: Path) -> tuple[str, list[int]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        seqs = [row[0] for row in conn.execute("SELECT seq FROM journal ORDER BY seq")]
    finally:
        conn.close()
    return integrity, seqs


def burst_sender(path: Path, data: bytes) -> None:
    lines = data.splitlines(keepends=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(os.fspath(path))
        try:
            for start in range(0, len(lines), 100):
                sock.sendall(b"".join(lines[start : start + 100]))
                time.sleep(0.01)  # 10,000 hooks/s: paces the burst, synchronises nothing
        except OSError:
            pass  # killed under us


async def run_kill(args: argparse.Namespace, tmp: Path, run: int) -> dict[str, Any]:
    state = tmp / f"kill-{run}"
    sessions = [f"burst-{run}-{i}" for i in range(4)]
    data = b"".join(frame(sessions[n % 4], n // 4) for n in range(args.burst))
    windows: list[int] = []
    last_committed = 0
    async with DaemonProcess(state) as daemon, anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, burst_sender, daemon.hook_socket, data)
        kill_after = args.burst * (0.35 + 0.1 * run)  # a different point each run
        while True:
            status = await daemon.status()
            store = status["statistics"]["store"]
            windows.append(int(status["seq"]) - int(store["last_flushed_seq"]))
            last_committed = int(store["last_flushed_seq"])
            if int(status["seq"]) >= kill_after:
                break
        os.kill(daemon.pid, signal.SIGKILL)
        await daemon.kill()
    integrity, seqs = await anyio.to_thread.run_sync(committed, state / "paneward.db")
    top = seqs[-1] if seqs else 0
    return {
        "samples": len(windows), "max window": max(windows), "median window":
        statistics.median(windows), "integrity": integrity,
        "prefix": seqs == list(range(1, top + 1)), "committed": top,
        "told committed": last_committed, "kept what it told": top >= last_committed,
    }


def summary(values: list[float]) -> str:
    return f"min {min(values):.2f} / median {statistics.median(values):.2f} / max {max(values):.2f}"


async def amain(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="pw-bench-hardening-") as name:
        tmp = Path(name)  # mkdtemp makes it 0700
        ratios: dict[str, list[float]] = {"unix idle": [], "http idle": []}
        lost_total = 0
        for run in range(args.runs):
            result = await run_intake(args, tmp, run)
            base, base_lost = result["unloaded"]
            line = [f"run {run + 1}: unloaded p50 {pct(base, .5):.2f} ms p99 {pct(base, .99):.2f}"
                    f" ms lost {base_lost}"]
            lost_total += base_lost
            http_base, http_lost = result["http unloaded"]
            lost_total += http_lost
            line.append(f"http hooks unloaded: p50 {pct(http_base, .5):.2f} ms p99 "
                        f"{pct(http_base, .99):.2f} ms lost {http_lost}")
            for kind in ("unix idle", "http idle", "http idle, http hooks"):
                values, lost = result[kind]
                lost_total += lost
                reference = http_base if kind.endswith("http hooks") else base
                ratio = pct(values, .99) / pct(reference, .99)
                ratios.setdefault(kind, []).append(ratio)
                line.append(f"{kind} ({args.idle} held; {result[kind.split()[0] + ' holder']}):"
                            f" p50 {pct(values, .5):.2f} ms p99 {pct(values, .99):.2f} ms "
                            f"lost {lost}, p99 x{ratio:.2f}")
            counters = result["counters"]
            line.append(f"  unix admission {counters['unix']}; http admission {counters['http']}")
            print("\n  ".join(line), flush=True)
        for kind, values in ratios.items():
            print(f"hook intake, {kind}: p99 ratio to unloaded {summary(values)} "
                  f"(budget <= 2x); real hooks lost in all runs: {lost_total} (budget 0)")
        windows: list[float] = []
        for run in range(args.runs):
            result = await run_kill(args, tmp, run)
            windows.append(result["max window"])
            print(f"kill run {run + 1}: {result}", flush=True)
        print(f"kill -9 loss window under the {args.burst} burst, max over each run's samples:"
              f" {summary(windows)} rows (budget <= 500, one bounded batch)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hooks", type=int, default=500)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=0.01,
                        help="seconds between two hooks (the loaded phases span several "
                        "2 s head deadlines: the daemon keeps closing idle connections and "
                        "the helper keeps re-opening them)")
    parser.add_argument("--burst", type=int, default=10_000)
    anyio.run(amain, parser.parse_args())


if __name__ == "__main__":
    main()
