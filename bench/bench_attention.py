"""Attention open -> desktop notification, and ``paneward next`` wall time.

1. A real daemon (``paneward run --no-discovery --notify-via desktop --notify-interval 0``) on a
   private ``dbus-daemon --session`` with the test notification server (tests/support/dbus.py).
   A running session's attention opens (an OSC 7501 ``blocked`` record sent as one frame on
   the hook socket, as ``paneward wrap`` sends it) and closes (``working``), alternately; each
   open is timed from the frame's send to the server's ``Notify``. Baseline, in the same run:
   the same notification sent by desktop-notifier from this process (the D-Bus work alone).
2. ``paneward next -L NAME -q`` against a private tmux server, the daemon holding one
   ``needs_input`` bound to a pane; wall time per run. Baseline, interleaved: ``python -c pass``
   plus the same two tmux invocations ``next`` makes (``list-clients``; ``select-window ;
   select-pane``).

Run: ``.venv/bin/python bench/bench_attention.py --events 200 --runs 30``.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import messages
from messages import ProgramStatus, PtySpawned, SessionKey
from tests.support.daemon import PANEWARD, DaemonProcess, daemon_env, start_token
from tests.support.dbus import notification_server, session_bus
from tests.support.tmux import TmuxServer

KEY = SessionKey("terminal", "bench")


def _now() -> int:
    return time.time_ns() // 1_000_000


def _frame(message: messages.Inbound) -> bytes:
    return messages.encode(message) + b"\n"


def _status(state: str) -> bytes:
    now = _now()
    return _frame(ProgramStatus(
        key=KEY, state=state, kind="permission" if state == "blocked" else None,  # type: ignore[arg-type]
        message="approve Bash: make test" if state == "blocked" else None,
        at_ms=now, observed_at_ms=now,
    ))


def _spawned(pane: str | None = None) -> bytes:
    now = _now()
    pid = os.getpid()
    return _frame(PtySpawned(key=KEY, pid=pid, start_token=start_token(pid), at_ms=now,
                             observed_at_ms=now, pane=pane))


def _send(path: Path, data: bytes) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(os.fspath(path))
        sock.sendall(data)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def notification_latency(events: int) -> tuple[list[float], list[float]]:
    from actors.sinks.notify import DesktopNotifications

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        async with session_bus(root) as address, notification_server(address) as server:
            os.environ["DBUS_SESSION_BUS_ADDRESS"] = address
            state = root / "state"
            env = daemon_env(state, DBUS_SESSION_BUS_ADDRESS=address)
            args = ["--notify-via", "desktop", "--notify-interval", "0"]
            measured: list[float] = []
            async with DaemonProcess(state, env=env, extra_args=args) as daemon:
                _send(daemon.hook_socket, _spawned())
                for i in range(events):
                    begin = time.perf_counter()
                    _send(daemon.hook_socket, _status("blocked"))
                    with anyio.fail_after(20):
                        await server.wait_for(i + 1)
                    measured.append((server.arrived[-1] - begin) * 1000)
                    _send(daemon.hook_socket, _status("working"))
                    await anyio.sleep(0.005)  # let the close land before the next open
            baseline: list[float] = []
            desktop = DesktopNotifications()
            for i in range(events):
                begin = time.perf_counter()
                await desktop.send("terminal needs you", "approve Bash: make …")
                with anyio.fail_after(20):
                    await server.wait_for(events + i + 1)
                baseline.append((server.arrived[-1] - begin) * 1000)
    return measured, baseline


async def next_wall_time(runs: int) -> tuple[list[float], list[float]]:
    server = TmuxServer()
    server.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            state = Path(tmp) / "state"
            env = {k: v for k, v in daemon_env(state).items() if k not in ("TMUX", "TMUX_PANE")}
            async with DaemonProcess(state, env=env) as daemon:
                _send(daemon.hook_socket, _spawned("%0") + _status("blocked"))
                await anyio.sleep(0.2)
                nxt = [os.fspath(PANEWARD), "next", "-L", server.name, "-q"]
                base = [
                    [sys.executable, "-c", "pass"],
                    server.argv("-N", "list-clients", "-F", "#{client_name}"),
                    server.argv("-N", "select-window", "-t", "%0", ";", "select-pane", "-t", "%0"),
                ]
                return await anyio.to_thread.run_sync(_time_next, nxt, base, env, runs)
    finally:
        server.kill()


def _time_next(
    nxt: list[str], base: list[list[str]], env: dict[str, str], runs: int
) -> tuple[list[float], list[float]]:
    """Worker thread: the interleaved runs (measured, baseline), milliseconds."""
    measured: list[float] = []
    baseline: list[float] = []
    for _ in range(runs):
        begin = time.perf_counter()
        done = subprocess.run(nxt, env=env, capture_output=True)
        measured.append((time.perf_counter() - begin) * 1000)
        assert done.returncode == 0, done.stderr
        begin = time.perf_counter()
        for argv in base:
            subprocess.run(argv, env=env, capture_output=True, check=True)
        baseline.append((time.perf_counter() - begin) * 1000)
    return measured, baseline


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    measured, baseline = anyio.run(notification_latency, args.events)
    print(f"attention open -> desktop Notify (daemon): n={len(measured)} "
          f"p50 {_pct(measured, 0.5):.2f} ms, p99 {_pct(measured, 0.99):.2f} ms, "
          f"max {max(measured):.2f} ms")
    print(f"baseline, desktop-notifier send alone: p50 {_pct(baseline, 0.5):.2f} ms, "
          f"p99 {_pct(baseline, 0.99):.2f} ms")
    measured, baseline = anyio.run(next_wall_time, args.runs)
    print(f"paneward next wall time: n={len(measured)} min {min(measured):.1f} / median "
          f"{statistics.median(measured):.1f} / max {max(measured):.1f} ms")
    print(f"baseline python -c pass + the same tmux commands: median "
          f"{statistics.median(baseline):.1f} ms -> ratio "
          f"{statistics.median(measured) / statistics.median(baseline):.2f}x")


if __name__ == "__main__":
    main()
