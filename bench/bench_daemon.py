"""Benchmark the real daemon: hook start-up ratio, hook -> watch latency.

Run: ``.venv/bin/python bench/bench_daemon.py [--runs 40] [--events 1000]``

The daemons run as users run them: ``paneward run`` with discovery on (the harness homes are
empty directories of the run). Idle CPU is bench/bench_idle.py's (the whole daemon, every
thread, discovery and ``--tmux`` on, live sessions in panes).

1. ``paneward hook`` wall time (payload as last argument, like Codex notify) as a ratio to
   ``<venv python> -c pass``, medians of interleaved runs, with no daemon and with a real
   ``paneward run`` listening.
2. Hook fired -> transition line printed by a ``paneward watch --json`` process, p50/p99 over
   N events (each event is a real transition: UserPromptSubmit/Stop alternating):
   command hooks (a ``paneward hook`` process per event, timed from just before the spawn)
   and http hooks (``--http-port``, keep-alive connection, timed from the send).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(ROOT))

import messages  # noqa: E402 - after the sys.path line above
from tests.support.daemon import (  # noqa: E402
    PANEWARD,
    DaemonProcess,
    claude_hook_payload,
    daemon_env,
    owner,
    raw_send,
    time_hook_events,
    watching,
)

PAYLOAD = json.dumps({"type": "agent-turn-complete", "thread-id": "t", "cwd": "/w"})


def wall(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdin=subprocess.DEVNULL)
    return time.perf_counter() - start


def installed_venv(where: Path) -> Path:
    """A venv with paneward installed as users install it (``pip install .``, not editable).

    The development venv's editable install adds a meta-path finder that makes every
    ``import actors...`` cost milliseconds; users of ``pip install .`` do not pay it. The
    current (modern) pip installs into it with ``--python``, so the console script is
    today's template (older pips generated one that imports ``re``, ~10 ms here).
    """
    import venv

    venv.create(where, with_pip=False)
    python = where / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            os.fspath(python),
            "install",
            "-q",
            "--no-deps",
            os.fspath(ROOT),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return where / "bin"


def startup(runs: int, env: dict[str, str], bin_dir: Path | None = None) -> dict[str, float]:
    python = os.fspath(bin_dir / "python") if bin_dir else sys.executable
    script = os.fspath(bin_dir / "paneward") if bin_dir else os.fspath(PANEWARD)
    variants = {
        "python -c pass": [python, "-c", "pass"],
        "paneward hook": [script, "hook", "--harness", "codex", PAYLOAD],
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for argv in variants.values():
        wall(argv, env)
    for _ in range(runs):
        for name, argv in variants.items():
            samples[name].append(wall(argv, env))
    return {name: statistics.median(values) for name, values in samples.items()}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency(events: int, tmp: Path) -> dict[str, list[float]]:
    state = tmp / "state"
    state.mkdir(mode=0o700, parents=True)
    token = "bench-" + secrets.token_hex(8)
    (state / "http-token").write_text(token + "\n")
    (state / "http-token").chmod(0o600)
    port = 0
    import socket

    with socket.socket() as s:  # a free loopback port for --http-port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out: dict[str, list[float]] = {"command hook": [], "http hook": []}
    async with (
        DaemonProcess(state, discovery=True, extra_args=["--http-port", str(port)]) as daemon,
        owner() as agent,
    ):
        env = daemon_env(state, CLAUDE_PID=str(agent.pid))
        async with watching(daemon) as watcher:
            now = time.time_ns() // 1_000_000
            start_hook = messages.NotifyHook(
                harness="claude-code",
                payload=claude_hook_payload("SessionStart", 0),
                at_ms=now,
                observed_at_ms=now,
                pid=agent.pid,
                start_token=agent.token,
            )
            await raw_send(daemon.hook_socket, messages.encode(start_hook) + b"\n")
            await watcher.wait_for(lambda items: len(items) >= 1, "SessionStart")

            def arm(event: str) -> Callable[[], Awaitable[object]]:
                want = len(watcher.items) + 1
                return lambda: watcher.wait_for(at_least(want), f"{event} transition")

            out = await time_hook_events(env, port, token, events, arm)
    return out


def at_least(count: int) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda items: len(items) >= count


EMITTER = (
    "import sys\n"
    "for n, line in enumerate(sys.stdin):\n"
    "    state = 'working' if n % 2 == 0 else 'done'\n"
    "    sys.stdout.write('\\x1b]7501;state=' + state + ':app=codex\\x1b\\\\')\n"
    "    sys.stdout.flush()\n"
)


async def wrap_latency(records: int, tmp: Path) -> list[float]:
    """OSC 7501 record written by a program under ``paneward wrap`` -> ``watch`` line (ms).

    The program prints one record per line it reads; timing starts when the line is
    written to the wrapper's stdin, so it includes the PTY hop to the child, the child's
    print, the wrapper's parse and report, the daemon and the watch process.
    """
    state = tmp / "wrap-state"
    state.mkdir(mode=0o700, parents=True)
    out: list[float] = []
    async with DaemonProcess(state, discovery=True) as daemon, watching(daemon) as watcher:
        argv = [
            os.fspath(PANEWARD),
            "wrap",
            "--harness",
            "codex",
            "--",
            sys.executable,
            "-c",
            EMITTER,
        ]
        async with await anyio.open_process(argv, env=daemon.env) as wrapper:
            assert wrapper.stdin is not None and wrapper.stdout is not None

            async def drain() -> None:
                assert wrapper.stdout is not None
                async for _ in wrapper.stdout:
                    pass

            async with anyio.create_task_group() as tg:
                tg.start_soon(drain)
                # PtySpawned: the session exists (running, turn unknown)
                await watcher.wait_for(lambda items: len(items) >= 1, "PtySpawned")
                for _ in range(records):
                    want = len(watcher.items) + 1
                    begin = time.perf_counter()
                    await wrapper.stdin.send(b"x\n")
                    await watcher.wait_for(at_least(want), "ProgramStatus")
                    out.append((time.perf_counter() - begin) * 1000)
                await wrapper.stdin.aclose()
                await wrapper.wait()
                tg.cancel_scope.cancel()
    return out


async def amain(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="pw-bench-daemon-") as raw:
        tmp = Path(raw)
        env = daemon_env(tmp / "nodaemon")
        installed = installed_venv(tmp / "venv")
        none = startup(args.runs, env)
        none_installed = startup(args.runs, env, installed)
        async with DaemonProcess(tmp / "s1", discovery=True) as daemon:
            listening = startup(args.runs, daemon.env)
            listening_installed = startup(args.runs, daemon.env, installed)
        for label, result in (
            ("pip install ., no daemon", none_installed),
            ("pip install ., daemon listening", listening_installed),
            ("editable dev venv, no daemon", none),
            ("editable dev venv, daemon listening", listening),
        ):
            ratio = result["paneward hook"] / result["python -c pass"]
            print(
                f"start-up ({label}): python -c pass {result['python -c pass'] * 1000:.1f} ms, "
                f"paneward hook {result['paneward hook'] * 1000:.1f} ms, ratio {ratio:.3f}x"
            )
        lat = await latency(args.events, tmp)
        for name, values in lat.items():
            print(
                f"{name} -> watch: n={len(values)} p50 {pct(values, 0.5):.2f} ms, "
                f"p99 {pct(values, 0.99):.2f} ms"
            )
        wrapped = await wrap_latency(min(args.events, 200), tmp)
        print(
            f"wrap OSC 7501 record -> watch: n={len(wrapped)} p50 {pct(wrapped, 0.5):.2f} ms, "
            f"p99 {pct(wrapped, 0.99):.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--events", type=int, default=1000)
    anyio.run(amain, parser.parse_args())


if __name__ == "__main__":
    main()
