"""Benchmark `paneward hook`: start-up vs `python -c pass`, and hook -> listener latency.

Run: ``.venv/bin/python bench/bench_hook.py [--runs 40] [--events 1000]``

1. Wall time of one hook invocation (payload as last argument, like Codex notify), as a ratio to
   ``<venv python> -c pass`` measured interleaved in the same run (medians): the real console
   script ``.venv/bin/paneward`` and ``python -m actors.cli.main``; with no daemon, and with a real
   HookListener listening.
2. Hook fired -> frame received by the listener, p50/p99 over N events:
   - command hooks: from just before spawning ``paneward hook`` to the sink call (includes
     interpreter start-up: what the agent's event costs end to end);
   - http hooks: from sending the POST on a keep-alive connection to the sink call.
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
from pathlib import Path

import anyio

import messages
from actors.harnesses.catalog import HOOKS
from actors.sources.hook_listener import HookListener

VENV_BIN = Path(sys.executable).parent
PAYLOAD = json.dumps({"type": "agent-turn-complete", "thread-id": "t", "cwd": "/w"})


def wall(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdin=subprocess.DEVNULL)
    return time.perf_counter() - start


def startup(runs: int, env: dict[str, str]) -> dict[str, float]:
    variants = {
        "baseline python -c pass": [sys.executable, "-c", "pass"],
        "console script": [os.fspath(VENV_BIN / "paneward"), "hook", "--harness", "codex", PAYLOAD],
        "python -m actors.cli.main": [
            sys.executable,
            "-m",
            "actors.cli.main",
            "hook",
            "--harness",
            "codex",
            PAYLOAD,
        ],
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for argv in variants.values():  # warm the page cache and .pyc files
        wall(argv, env)
    for _ in range(runs):
        for name, argv in variants.items():
            samples[name].append(wall(argv, env))
    return {name: statistics.median(values) for name, values in samples.items()}


class TimedSink:
    def __init__(self) -> None:
        self.times: list[int] = []
        self.event = anyio.Event()

    def inject_nowait(self, message: messages.Inbound) -> None:
        self.times.append(time.perf_counter_ns())
        self.event.set()

    deliver_nowait = inject_nowait  # the listener hands decoded frames over this way


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency(events: int, tmp: Path, env: dict[str, str]) -> dict[str, list[float]]:
    token = tmp / "http-token"
    token.write_text("bench-token\n")
    token.chmod(0o600)
    sink = TimedSink()
    listener = HookListener(
        HOOKS, socket_path=tmp / "rt" / "hook.sock", http_port=0, token_path=token
    )
    command_ms: list[float] = []
    http_ms: list[float] = []
    argv = [os.fspath(VENV_BIN / "paneward"), "hook", "--harness", "codex", PAYLOAD]
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.run, sink)
        await listener.wait_listening()
        for _ in range(events):
            sink.event = anyio.Event()
            start = time.perf_counter_ns()
            process = await anyio.open_process(argv, env=env)
            await sink.event.wait()
            command_ms.append((sink.times[-1] - start) / 1e6)
            await process.wait()
            await process.aclose()
        body = json.dumps({"hook_event_name": "PreToolUse", "session_id": "s"}).encode()
        request = (
            b"POST /hook/claude-code HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Paneward-Token: bench-token"
            b"\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        assert listener.http_port is not None
        async with await anyio.connect_tcp("127.0.0.1", listener.http_port) as stream:
            for _ in range(events):
                sink.event = anyio.Event()
                start = time.perf_counter_ns()
                await stream.send(request)
                await sink.event.wait()
                http_ms.append((sink.times[-1] - start) / 1e6)
                response = b""
                while not response.endswith(b"{}"):
                    response += await stream.receive()
        tg.cancel_scope.cancel()
    return {"command hook": command_ms, "http hook": http_ms}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--events", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pw-bench-") as name:
        tmp = Path(name)
        env = {**os.environ, "PANEWARD_SOCKET": os.fspath(tmp / "rt" / "hook.sock")}
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, runs={args.runs}")
        cold = startup(args.runs, env)
        base = cold["baseline python -c pass"]
        print("\n## start-up, no daemon (median wall time, ratio to baseline)")
        for key, value in cold.items():
            print(f"  {key:28s} {value * 1000:7.1f} ms  x{value / base:.2f}")

        async def with_daemon() -> dict[str, float]:
            listener = HookListener(HOOKS, socket_path=tmp / "rt" / "hook.sock")

            class Null:
                def inject_nowait(self, message: messages.Inbound) -> None:
                    del message

                deliver_nowait = inject_nowait

            async with anyio.create_task_group() as tg:
                tg.start_soon(listener.run, Null())
                await listener.wait_listening()
                result = await anyio.to_thread.run_sync(startup, args.runs, env)
                tg.cancel_scope.cancel()
            return result

        warm = anyio.run(with_daemon)
        base = warm["baseline python -c pass"]
        print("\n## start-up, daemon listening (median wall time, ratio to baseline)")
        for key, value in warm.items():
            print(f"  {key:28s} {value * 1000:7.1f} ms  x{value / base:.2f}")
        results = anyio.run(latency, args.events, tmp, env)
        print(f"\n## hook fired -> frame received by the listener ({args.events} events)")
        for key, values in results.items():
            print(
                f"  {key:14s} p50 {pct(values, 0.5):7.2f} ms  p99 {pct(values, 0.99):7.2f} ms"
                f"  max {max(values):7.2f} ms"
            )


if __name__ == "__main__":
    main()
