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
   real TUI started in a pane, which starts the daemon. The daemon binds and listens on its
   socket under ``/tmp/codex-daemon-<uid>/``, then links it into ``app-server-control/``: the
   link is the socket's creation for every client. Latency = the source's
   ``connected_at_ms`` (its WebSocket handshake answered) minus the later of the socket's and
   the link's ctime; p50/p99 over the homes. A file's ctime comes from the kernel's coarse
   clock (one tick: 4 ms at HZ=250), never later than the creation: the figures can only
   overstate. Baseline, in the same homes at the same time: :class:`BareClient`, the least any
   client does -- a thread of its own blocked in inotify's read (no event loop, no worker
   hop), which at the link's creation connects, sends the same WebSocket upgrade (its answer:
   the figure compared) and then ``initialize``. Its steps split the rest: the event read (the
   kernel's wake-up and the ctime's coarseness), the upgrade answered (the Codex daemon's own
   start-up after its socket exists), ``initialize`` answered.

Run: .venv/bin/python bench/bench_codex_daemon.py --rounds 50 --idle-s 30
     .venv/bin/python bench/bench_codex_daemon.py --first-homes 20
(needs the real CLI: $PANEWARD_AGENT_PREFIX or ~/.cache/paneward-npm)
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import inotify_simple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.core.tmux.protocol import TmuxTarget, quote
from actors.harnesses.codex.daemon import RpcStream, control_socket
from actors.harnesses.codex.jsonrpc import Answer, Opened, RpcClient, RpcEvent
from actors.sinks.tmux_client import ControlClient
from actors.sources import fswatch
from tests.support.agents import CODEX_CONFIG, stop_codex_leftovers
from tests.support.daemon import DaemonProcess, daemon_env
from tests.support.mock_apis import openai_server
from tests.support.wrap import AgentTmuxServer, base_env

LAUNCH_WITHOUT_SOURCE = """
import sys
from pathlib import Path
import anyio
import inotify_simple
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
    tmux = AgentTmuxServer(tmp)
    out: dict[str, Any] = {}
    try:
        (home / ".codex" / "config.toml").write_text(CODEX_CONFIG.format(url=mock.url, cwd=work))
        tmux.start(["sh", "-c", "exec sleep 3600"], {"PATH": "/usr/bin:/bin"})
        env = daemon_env(state, HOME=str(home), CODEX_HOME=str(home / ".codex"))
        args = ["--tmux", "-L", tmux.name]
        async with DaemonProcess(state, discovery=True, env=env, extra_args=args) as daemon, \
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


async def _until_edge(tmux: AgentTmuxServer, pane: str, edges: Edges, mark: int, want: str,
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
    tmux: AgentTmuxServer, pane: str, edges: Edges, mark: int,
    wait_turn: Callable[..., Awaitable[float]],
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


class BareClient(threading.Thread):
    """The baseline of the first daemon: the least any client of the control socket does.

    A thread of its own, blocked in inotify's read on the home (then on ``app-server-control/``
    once it exists): no event loop, no worker-thread hop. At the link's creation it connects to
    the link's target, sends the WebSocket upgrade the source sends, then ``initialize``.
    Epoch ms of each step: ``seen_ms`` (the event read), ``open_ms`` (the upgrade answered:
    what the source's ``connected_at_ms`` records), ``init_ms`` (``initialize`` answered).
    ``refused`` counts connects tried before the daemon listened (none where it listens before
    it links). A failure is kept in ``error`` for the caller; ``done`` is set at the end.
    """

    def __init__(self, codex_home: Path) -> None:
        super().__init__(name="bare-client", daemon=True)
        self.link = control_socket(codex_home)
        self.seen_ms = self.open_ms = self.init_ms = 0.0
        self.refused = 0
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.done = threading.Event()
        self._notify = inotify_simple.INotify()
        # Watched before the TUI starts: nothing it makes is missed.
        self._notify.add_watch(self.link.parent.parent, fswatch.APPEARS)

    def run(self) -> None:
        try:
            self._wait_for_link()
            if not self.stop.is_set():
                self._connect()
        except BaseException as exc:  # handed to the caller, which raises it
            self.error = exc
        finally:
            self._notify.close()
            self.done.set()

    def _wait_for_link(self) -> None:
        control = self.link.parent
        watching = False
        while not self.stop.is_set():
            if not watching and control.is_dir():  # watch first, then look
                self._notify.add_watch(control, fswatch.APPEARS)
                watching = True
            if os.path.lexists(self.link):
                self.seen_ms = time.time() * 1000
                return
            self._notify.read(timeout=100)  # an event wakes it; the timeout checks stop

    def _connect(self) -> None:
        target = os.path.realpath(self.link)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            deadline = time.monotonic() + 10
            while True:
                try:
                    sock.connect(target)
                    break
                except (ConnectionRefusedError, FileNotFoundError):
                    if time.monotonic() > deadline:
                        raise
                    self.refused += 1
                    time.sleep(0.0002)  # linked before it listens: try again at once
            rpc = RpcClient()
            sock.sendall(rpc.connect())
            self._until(sock, rpc, lambda e: isinstance(e, Opened))
            self.open_ms = time.time() * 1000
            _, data = rpc.request("initialize", {
                "clientInfo": {"name": "bench", "title": None, "version": "1"},
                "capabilities": None})
            sock.sendall(data)
            self._until(sock, rpc, lambda e: isinstance(e, Answer))
            self.init_ms = time.time() * 1000

    @staticmethod
    def _until(sock: socket.socket, rpc: RpcClient, done: Callable[[RpcEvent], bool]) -> None:
        while True:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("the daemon hung up")
            events = rpc.receive_data(data)
            owed = rpc.data_to_send()
            if owed:
                sock.sendall(owed)
            if any(done(e) for e in events):
                return


class FirstDaemon(NamedTuple):
    """One fresh home's first daemon, epoch ms minus the socket's creation (ctime)."""

    source: float  # the source's connected_at_ms
    seen: float  # the bare client's inotify event read
    opened: float  # the bare client's WebSocket upgrade answered
    initialized: float  # the bare client's initialize answered
    failed_tries: int  # the source's tries before the daemon existed


async def first_daemons(homes: int) -> list[FirstDaemon]:
    """Socket (link) creation -> source connected, and the bare client's steps, one fresh
    home per round."""
    codex = _codex()
    mock = openai_server()
    out: list[FirstDaemon] = []
    try:
        for n in range(homes):
            tmp = Path(tempfile.mkdtemp(prefix="pw-bench-cxd1-"))
            home, work, state = tmp / "home", tmp / "work", tmp / "state"
            for d in (home / ".codex", work, tmp / "tmp"):
                d.mkdir(parents=True)
            (home / ".codex" / "config.toml").write_text(
                CODEX_CONFIG.format(url=mock.url, cwd=work))
            tmux = AgentTmuxServer(tmp)
            bare = BareClient(home / ".codex")
            try:
                tmux.start(["sh", "-c", "exec sleep 3600"], {"PATH": "/usr/bin:/bin"})
                env = daemon_env(state, HOME=str(home), CODEX_HOME=str(home / ".codex"))
                async with DaemonProcess(state, discovery=True, env=env,
                                         extra_args=["--tmux", "-L", tmux.name]) as daemon:
                    with anyio.fail_after(30):
                        while True:  # the source's first look, then its wait
                            if (await daemon.counters())["codex_daemon"]["connect_failures"]:
                                break
                            await anyio.sleep(0.01)
                    link = control_socket(home / ".codex")
                    assert not link.parent.exists()
                    agent_env = base_env(daemon.hook_socket) | {
                        "HOME": str(home), "TMPDIR": str(tmp / "tmp"),
                        "MOCK_OPENAI_API_KEY": "dummy"}
                    bare.start()
                    tmux.start([str(codex)], agent_env, width=160, height=50, cwd=work)
                    with anyio.fail_after(60):
                        # Nothing asks paneward anything until the bare client is done (tens of
                        # ms after the link): a status request is work on paneward's loop, which
                        # the path measured must not share.
                        await anyio.to_thread.run_sync(bare.done.wait, abandon_on_cancel=True)
                        if bare.error is not None:
                            raise bare.error
                        while True:  # the timestamp says when; polling only collects it
                            counters = (await daemon.counters())["codex_daemon"]
                            if counters["connected_at_ms"]:
                                break
                            await anyio.sleep(0.05)
                    created_ms = max(os.lstat(link).st_ctime_ns,
                                     os.stat(link).st_ctime_ns) / 1e6
                    found = FirstDaemon(
                        counters["connected_at_ms"] - created_ms, bare.seen_ms - created_ms,
                        bare.open_ms - created_ms, bare.init_ms - created_ms,
                        counters["connect_failures"])
                    out.append(found)
                    print(f"home {n + 1}: source connected {found.source:.1f} ms; bare client: "
                          f"event read {found.seen:.1f}, upgrade answered {found.opened:.1f}, "
                          f"initialize answered {found.initialized:.1f} ms "
                          f"({found.failed_tries} failed tries, {bare.refused} refused)",
                          flush=True)
            finally:
                bare.stop.set()
                if bare.is_alive():
                    await anyio.to_thread.run_sync(bare.join, 10)
                stop_codex_leftovers(home)
                tmux.kill()
                shutil.rmtree(tmp, ignore_errors=True)
    finally:
        mock.close()
    return out


def _spread(values: list[float]) -> str:
    """min / p50 / p99 / max, ms."""
    lat = sorted(values)
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    return (f"min {lat[0]:.1f}, p50 {statistics.median(lat):.1f}, p99 {p99:.1f}, "
            f"max {lat[-1]:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument("--first-homes", type=int, default=0,
                        help="measure only the first daemon in this many fresh homes")
    args = parser.parse_args()
    if args.first_homes:
        found = anyio.run(first_daemons, args.first_homes)
        print(f"first codex daemon, {len(found)} fresh homes, from the socket's creation:")
        print(f"  source connected:                    {_spread([f.source for f in found])}")
        print(f"  bare client, upgrade answered:       {_spread([f.opened for f in found])}")
        print(f"    its inotify event read:            {_spread([f.seen for f in found])}")
        print(f"    its initialize answered:           "
              f"{_spread([f.initialized for f in found])}")
        print(f"  source minus bare client, per home:  "
              f"{_spread([f.source - f.opened for f in found])}")
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
