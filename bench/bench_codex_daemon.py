"""Codex daemon status edge -> pane option visible, and the idle cost of following the daemon.

The real Codex 0.171.0 TUI in default (daemon) mode, in a private tmux server, against the
loopback OpenAI mock, with ``paneward run --tmux`` (discovery on, no hooks installed).

1. Edges: each round submits a prompt whose answer is a shell command that needs approval.
   Two status edges per round exist ONLY in the daemon's ``thread/status/changed`` broadcast
   (the rollout records no approval): ``active[waitingOnApproval]`` (the pane's
   ``@paneward_turn`` becomes ``needs_input``) and, after ``y``, ``active[]`` (back to
   ``working``). Latency = the moment another control-mode client sees the option change
   (polled every millisecond, as bench_tmux.py does) minus the daemon's own ``emittedAtMs`` of
   the edge, read by a second, independent client of the daemon's control socket. 50 rounds =
   100 edges; p50/p99.
2. Idle: with the TUI idle and nothing happening, the CPU of the paneward daemon over
   ``--idle-s`` seconds, with the daemon source connected, then the same daemon restarted with
   the source switched off (``DaemonConfig(discovery_off=frozenset({"codex_daemon"}))``): the
   same work otherwise (discovery, rollouts, tmux). The source's own counters (frames and bytes
   received) over the window are printed too.

3. First daemon (``--first-homes N``): N fresh Codex homes (a ``config.toml`` for the mock and
   nothing else: no ``app-server-control/`` directory, as in a home that never ran a daemon),
   each with ``paneward run --tmux`` started first and waiting (its first try failed), then the
   real TUI started in a pane, which starts the daemon. Latency = the source's
   ``connected_at_ms`` (the handshake answered) minus the later of the control socket's and
   its link's creation (their ctime); p50/p99 over the homes. Baseline: the earliest any
   client can be connected -- a second client that, from the moment the TUI starts, tries the
   same connect and WebSocket handshake every millisecond (no waiting on files at all), timed
   the same way (handshake answered, epoch ms); its figure is the daemon's own start-up
   between its socket's creation and its first answer, which no client can beat.

Run: .venv/bin/python bench/bench_codex_daemon.py --rounds 50 --idle-s 30
     .venv/bin/python bench/bench_codex_daemon.py --first-homes 20
(needs the real CLI: $PANEWARD_AGENT_PREFIX or ~/.cache/paneward-npm)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.core.tmux_protocol import TmuxTarget, quote
from actors.harnesses.codex.daemon import RpcStream, control_socket
from actors.harnesses.codex.jsonrpc import RpcProtocolError
from actors.sinks.tmux_client import ControlClient
from tests.support.agents import CODEX_CONFIG, stop_codex_leftovers
from tests.support.daemon import Daemon, daemon_env
from tests.support.mock_apis import openai_server
from tests.support.wrap import Tmux, base_env

LAUNCH_WITHOUT_SOURCE = """
import sys
from pathlib import Path
import anyio
from actors.cli.daemon import DaemonConfig, run_daemon
state = Path(sys.argv[1])
config = DaemonConfig(state_dir=state, socket_path=state / "hook.sock", tmux=True,
                      tmux_socket_name=sys.argv[2],
                      discovery_off=frozenset({"codex_daemon"}))
anyio.run(run_daemon, config)
"""


def _codex() -> Path:
    prefix = os.environ.get("PANEWARD_AGENT_PREFIX") or str(Path.home() / ".cache/paneward-npm")
    binary = Path(prefix) / "node_modules" / ".bin" / "codex"
    if not binary.exists():
        raise SystemExit(f"codex not installed under {prefix}")
    return binary


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Edges:
    """A second client of the Codex daemon's control socket: the edges it broadcasts."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str]] = []  # (emittedAtMs, state word)
        self.delays: list[float] = []  # received here - emittedAtMs
        self.changed = anyio.Event()

    def note(self, body: dict[str, Any]) -> None:
        if body.get("method") != "thread/status/changed":
            return
        status = body["params"]["status"]
        word = status["type"]
        if word == "active":
            word = "needs_input" if "waitingOnApproval" in status.get("activeFlags", []) \
                else "working"
        self.seen.append((int(body["emittedAtMs"]), word))
        self.delays.append(time.time() * 1000 - int(body["emittedAtMs"]))
        self.changed.set()
        self.changed = anyio.Event()


@asynccontextmanager
async def listen(home: Path) -> AsyncIterator[Edges]:
    edges = Edges()
    target = await anyio.to_thread.run_sync(os.path.realpath, control_socket(home / ".codex"))
    stream = await anyio.connect_unix(target)
    async with stream, anyio.create_task_group() as tg:
        rpc = RpcStream(stream)
        await rpc.open()
        tg.start_soon(rpc.serve, edges.note)
        await rpc.call("initialize", {"clientInfo": {"name": "bench", "title": None,
                                                     "version": "1"}, "capabilities": None})
        await rpc.send({"jsonrpc": "2.0", "method": "initialized"})
        yield edges
        tg.cancel_scope.cancel()


async def run(rounds: int, idle_s: float) -> dict[str, Any]:
    codex = _codex()
    tmp = Path(tempfile.mkdtemp(prefix="pw-bench-cxd-"))
    home, work, state = tmp / "home", tmp / "work", tmp / "state"
    for d in (home / ".codex", work, tmp / "tmp"):
        d.mkdir(parents=True)
    mock = openai_server()
    tmux = Tmux(tmp)
    out: dict[str, Any] = {}
    try:
        (home / ".codex" / "config.toml").write_text(CODEX_CONFIG.format(url=mock.url, cwd=work))
        tmux.start(["sh", "-c", "exec sleep 3600"], {"PATH": "/usr/bin:/bin"})
        env = daemon_env(state, HOME=str(home), CODEX_HOME=str(home / ".codex"))
        args = ["--tmux", "-L", tmux.name]
        async with Daemon(state, discovery=True, env=env, extra_args=args) as daemon, \
                ControlClient(TmuxTarget(tmux.name)) as reader:
            agent_env = base_env(daemon.hook_socket) | {
                "HOME": str(home), "TMPDIR": str(tmp / "tmp"), "MOCK_OPENAI_API_KEY": "dummy"}
            pane = tmux.start([str(codex)], agent_env, width=160, height=50, cwd=work)
            show = f"show-options -p -q -v -t {quote(pane)} @paneward_turn"

            async def turn() -> str:
                [reply] = await reader.run_batch([show])
                return reply.lines[0] if reply.lines else ""

            async def wait_turn(want: str, within: float = 60) -> float:
                """Poll every 1 ms; the wall time (ms) at which the option read ``want``."""
                with anyio.fail_after(within):
                    while True:  # a tmux option has no event of its own: poll it
                        if await turn() == want:
                            return time.time() * 1000
                        await anyio.sleep(0.001)

            await tmux.wait_text(pane, "Ask Codex to do anything")
            await wait_turn("idle")
            latencies: list[float] = []
            async with listen(home) as edges:
                for n in range(rounds):
                    mark = len(edges.seen)
                    tmux.run("send-keys", "-t", pane, "-l", f"please WRITE a file {n}")
                    await tmux.wait_text(pane, f"please WRITE a file {n}")
                    visible_wait = await _until_edge(tmux, pane, edges, mark, "needs_input",
                                                     wait_turn)
                    latencies.append(visible_wait)
                    await tmux.wait_text(pane, "Would you like to run")
                    mark = len(edges.seen)
                    latencies.append(await _approve(tmux, pane, edges, mark, wait_turn))
                    await wait_turn("idle")
            out["latencies_ms"] = latencies
            out["observer_delay_ms"] = statistics.median(edges.delays)
            await anyio.sleep(2)  # let the last turn's files and titles settle
            counters = (await daemon.counters())["codex_daemon"]
            before = _cpu_s(daemon.pid)
            await anyio.sleep(idle_s)
            after = _cpu_s(daemon.pid)
            counters_after = (await daemon.counters())["codex_daemon"]
            out["idle_with_source_pct"] = (after - before) / idle_s * 100
            out["idle_frames"] = counters_after["notifications"] - counters["notifications"]
            out["idle_bytes"] = counters_after["bytes_in"] - counters["bytes_in"]
        # the same daemon, the source off, the same TUI idle in its pane
        launcher = await anyio.open_process(
            [sys.executable, "-c", LAUNCH_WITHOUT_SOURCE, str(state), tmux.name], env=env)
        async with launcher:
            async with ControlClient(TmuxTarget(tmux.name)) as reader2:
                show = f"show-options -p -q -v -t {quote(pane)} @paneward_turn"
                with anyio.fail_after(60):
                    while True:  # restored from the store, re-proven: the pane's option is back
                        [reply] = await reader2.run_batch([show])
                        if reply.lines:
                            break
                        await anyio.sleep(0.01)
            await anyio.sleep(2)
            before = _cpu_s(launcher.pid)
            await anyio.sleep(idle_s)
            after = _cpu_s(launcher.pid)
            out["idle_without_source_pct"] = (after - before) / idle_s * 100
            launcher.terminate()
            await launcher.wait()
    finally:
        stop_codex_leftovers(home)
        tmux.kill()
        mock.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


async def _until_edge(tmux: Tmux, pane: str, edges: Edges, mark: int, want: str,
                      wait_turn: Callable[..., Awaitable[float]]) -> float:
    """Press Enter until the turn starts, then time ``want``'s daemon edge -> pane option."""
    for _ in range(10):
        tmux.run("send-keys", "-t", pane, "Enter")
        try:
            visible = await wait_turn(want, within=2)
        except TimeoutError:
            continue
        return visible - await _edge(edges, mark, want)
    raise AssertionError("the prompt never started a turn")


async def _approve(
    tmux: Tmux, pane: str, edges: Edges, mark: int, wait_turn: Callable[..., Awaitable[float]]
) -> float:
    for _ in range(10):
        tmux.run("send-keys", "-t", pane, "y")
        try:
            visible = await wait_turn("working", within=2)
        except TimeoutError:
            continue
        return visible - await _edge(edges, mark, "working")
    raise AssertionError("the approval was never taken")


async def _edge(edges: Edges, mark: int, want: str) -> float:
    with anyio.fail_after(10):
        while True:
            for at, word in edges.seen[mark:]:
                if word == want:
                    return float(at)
            await edges.changed.wait()


async def first_daemons(homes: int) -> tuple[list[float], list[float]]:
    """Socket (or link) creation -> source connected, ms, one fresh home per round; and the
    baseline, a handshake with no wait, ms."""
    codex = _codex()
    mock = openai_server()
    out: list[float] = []
    floor: list[float] = []
    try:
        for n in range(homes):
            tmp = Path(tempfile.mkdtemp(prefix="pw-bench-cxd1-"))
            home, work, state = tmp / "home", tmp / "work", tmp / "state"
            for d in (home / ".codex", work, tmp / "tmp"):
                d.mkdir(parents=True)
            (home / ".codex" / "config.toml").write_text(
                CODEX_CONFIG.format(url=mock.url, cwd=work))
            tmux = Tmux(tmp)
            try:
                tmux.start(["sh", "-c", "exec sleep 3600"], {"PATH": "/usr/bin:/bin"})
                env = daemon_env(state, HOME=str(home), CODEX_HOME=str(home / ".codex"))
                async with Daemon(state, discovery=True, env=env,
                                  extra_args=["--tmux", "-L", tmux.name]) as daemon:
                    with anyio.fail_after(30):
                        while True:  # the source's first look, then its wait
                            if (await daemon.counters())["codex_daemon"]["connect_failures"]:
                                break
                            await anyio.sleep(0.01)
                    assert not control_socket(home / ".codex").parent.exists()
                    agent_env = base_env(daemon.hook_socket) | {
                        "HOME": str(home), "TMPDIR": str(tmp / "tmp"),
                        "MOCK_OPENAI_API_KEY": "dummy"}
                    link = control_socket(home / ".codex")
                    async with anyio.create_task_group() as tg:
                        earliest: list[float] = []
                        tg.start_soon(_earliest_handshake, link, earliest)
                        tmux.start([str(codex)], agent_env, width=160, height=50, cwd=work)
                        with anyio.fail_after(60):
                            while True:  # the timestamp says when; polling only collects it
                                counters = (await daemon.counters())["codex_daemon"]
                                if counters["connected_at_ms"] and earliest:
                                    break
                                await anyio.sleep(0.05)
                    created_ms = max(os.lstat(link).st_ctime_ns,
                                     os.stat(link).st_ctime_ns) / 1e6
                    out.append(counters["connected_at_ms"] - created_ms)
                    floor.append(earliest[0] - created_ms)
                    print(f"home {n + 1}: {out[-1]:.1f} ms, earliest possible {floor[-1]:.1f} ms "
                          f"({counters['connect_failures']} failed tries)", flush=True)
            finally:
                stop_codex_leftovers(home)
                tmux.kill()
                shutil.rmtree(tmp, ignore_errors=True)
    finally:
        mock.close()
    return out, floor


async def _earliest_handshake(link: Path, out: list[float]) -> None:
    """Try to connect and shake hands every millisecond until it works; append the epoch ms
    at which the handshake was answered (what ``connected_at_ms`` records)."""
    while True:
        try:
            target = await anyio.to_thread.run_sync(os.path.realpath, link)
            stream = await anyio.connect_unix(target)
        except OSError:
            await anyio.sleep(0.001)
            continue
        async with stream:
            try:
                await RpcStream(stream).open()
            except (OSError, anyio.EndOfStream, anyio.BrokenResourceError,
                    RpcProtocolError):
                await anyio.sleep(0.001)  # bound, not yet listening or answering: again
                continue
            out.append(time.time() * 1000)
            return


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument("--first-homes", type=int, default=0,
                        help="measure only the first daemon in this many fresh homes")
    args = parser.parse_args()
    if args.first_homes:
        found, floor = anyio.run(first_daemons, args.first_homes)
        lat = sorted(found)
        p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
        print(f"first codex daemon: socket created -> source connected, {len(lat)} fresh "
              f"homes: min {lat[0]:.1f} ms, p50 {statistics.median(lat):.1f} ms, "
              f"p99 {p99:.1f} ms, max {lat[-1]:.1f} ms; baseline, the earliest possible: "
              f"min {min(floor):.1f} ms, p50 {statistics.median(floor):.1f} ms, "
              f"max {max(floor):.1f} ms")
        return
    r = anyio.run(run, args.rounds, args.idle_s)
    lat = sorted(r["latencies_ms"])
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    print(f"codex daemon edge -> @paneward_turn visible, {len(lat)} edges: "
          f"p50 {statistics.median(lat):.1f} ms, p99 {p99:.1f} ms, max {lat[-1]:.1f} ms "
          f"(min {lat[0]:.1f} ms; emittedAtMs has 1 ms resolution; the daemon's broadcast "
          f"reached an independent client {r['observer_delay_ms']:.1f} ms after it, median)")
    print(f"idle {args.idle_s:.0f} s, one idle TUI: paneward daemon CPU "
          f"{r['idle_with_source_pct']:.3f} % of a core with the daemon source connected "
          f"({r['idle_frames']} frames, {r['idle_bytes']} bytes received), "
          f"{r['idle_without_source_pct']:.3f} % with it off")


if __name__ == "__main__":
    main()
