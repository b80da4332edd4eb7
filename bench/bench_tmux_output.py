"""OSC 7501 read from tmux's own output stream (actors/sinks/tmux_output.py): latency and cost.

Three figures, each against a real ``paneward run --tmux`` on a private tmux server (discovery
off: the pane mapper and the pane's output only):

1. **A record's write -> the pane option visible** (budget p99 <= 20 ms over >= 100 edges). A
   stand-in agent named ``codex`` in a pane writes ``working`` / ``idle`` records alternately when
   the bench asks (a FIFO) and reports the ``CLOCK_MONOTONIC`` time of each write; the bench
   reads ``@paneward_turn`` over a control-mode client in a loop until it shows the new value.
   Baseline, the same run: the floor of that path without paneward -- the bench's own output
   client reads the same pane's records with the same parser and sets a pane option itself,
   polled the same way.
2. **Cost of reading output**: a real Codex TUI byte stream (tests/fixtures/tmux_output/
   codex-tui.jsonl, captured from tmux's ``%output`` of Codex 0.171.0 against the loopback mock:
   start, a turn, an approval, a stalled turn with its spinner redraws, Esc; ``--capture`` makes
   it again) replayed into ``--panes`` panes by stand-ins named ``codex`` at its real rate and
   at 10x. The daemon's CPU (every thread, from ``/proc/<pid>/stat``) and its output clients'
   (``tmux -C`` children), per pane and as a share of one core, against the same replay with
   ``--no-tmux-output`` (baseline: the daemon that reads no output). At 10x: tmux's pauses and
   the longest time tmux held output for the daemon (``%extended-output``'s age), and every
   record read.
3. **Idle agent panes**: after the replay the stand-ins stay alive, silent: over ``--idle-s`` the
   daemon's wake-ups (context switches of every thread) with and without output reading, and the
   output lines tmux sent (0: an idle pane costs nothing).

Run: ``.venv/bin/python bench/bench_tmux_output.py --edges 200 --runs 3 --panes 4``.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.fspath(REPO))

from actors.core.ingress.osc import OscParser, StatusRecord  # noqa: E402
from actors.core.tmux.output import OUTPUT_CLIENT_FLAGS, OutputParser, PaneOutput  # noqa: E402
from actors.core.tmux.protocol import TmuxTarget, quote  # noqa: E402
from actors.sinks.tmux_client import ControlClient  # noqa: E402
from bench.world import process_cpu, thread_cpu  # noqa: E402
from tests.support.daemon import DaemonProcess, daemon_env  # noqa: E402
from tests.support.polling import poll_until  # noqa: E402
from tests.support.tmux import TmuxServer  # noqa: E402

STREAM = REPO / "tests" / "fixtures" / "tmux_output" / "codex-tui.jsonl"

#: A stand-in agent named ``codex``: each line on the FIFO ``argv[2]`` is a record's data,
#: written to the terminal at once; the write's CLOCK_MONOTONIC ns goes to the FIFO ``argv[3]``.
AGENT = r"""
import os, sys, time
open("/proc/self/comm", "w").write("codex")
out = sys.stdout.buffer
out.write(b"ready\r\n"); out.flush()
times = open(sys.argv[2], "w", buffering=1)
for line in open(sys.argv[1]):
    data = b"\x1b]7501;" + line.strip().encode() + b"\x1b\\"
    os.write(1, data)
    times.write(f"{time.monotonic_ns()}\n")
time.sleep(3600)
"""

#: A stand-in named ``codex`` that, once the FIFO ``argv[4]`` is opened (the bench's go, when
#: its pane is read), writes a recorded stream at its recorded times / scale, then stays, silent.
REPLAY = r"""
import base64, json, os, sys, time
open("/proc/self/comm", "w").write("codex")
scale = float(sys.argv[2])
chunks = [json.loads(l) for l in open(sys.argv[1])]
open(sys.argv[4]).close()
start = time.monotonic()
for c in chunks:
    delay = start + c["t"] / scale - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    os.write(1, base64.b64decode(c["data"]))
open(sys.argv[3], "w").write("done")
time.sleep(3600)
"""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _stats(values: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(values), "p99": _pct(values, 0.99), "max": max(values)}


@asynccontextmanager
async def _daemon(server: TmuxServer, root: Path, *extra: str) -> AsyncIterator[DaemonProcess]:
    state = root / f"state-{time.monotonic_ns()}"
    daemon = DaemonProcess(state, env=daemon_env(state),
                    extra_args=["--tmux", "-L", server.name, "--notify", "none", *extra])
    async with daemon:
        yield daemon


async def _output(daemon: DaemonProcess) -> dict[str, Any]:
    out = (await daemon.counters())["tmux"]["output"]
    assert isinstance(out, dict)
    return out


async def _read_option(
    client: ControlClient, pane: str, option: str, want: str, within: float = 10.0
) -> int:
    command = f"show-options -p -q -v -t {pane} {option}"
    with anyio.fail_after(within):
        while True:
            [reply] = await client.run_batch([command])
            if reply.lines and reply.lines[0] == want:
                return time.monotonic_ns()


async def _agent_pane(server: TmuxServer, root: Path) -> tuple[str, Any, Any]:
    script = root / "agent.py"
    script.write_text(AGENT)
    commands, times = root / "commands", root / "times"
    for fifo in (commands, times):
        if not fifo.exists():
            os.mkfifo(fifo)
    line = " ".join(shlex.quote(str(p)) for p in (sys.executable, script, commands, times))
    pane = await server.new_pane(line)
    # Opening a FIFO blocks until its other end opens: in a thread.
    # (in the agent's order: it opens its times FIFO first).
    recv = await anyio.to_thread.run_sync(lambda: open(times))  # noqa: SIM115 - kept open
    send = await anyio.to_thread.run_sync(
        lambda: open(commands, "w", buffering=1)  # noqa: SIM115 - kept open
    )
    return pane, send, recv


async def _warm(client: ControlClient, pane: str, send: Any, recv: Any, option: str) -> None:
    """Until a record reaches ``option``: the reader is attached (what comes before is lost)."""
    for _ in range(100):
        send.write("state=idle:app=codex\n")
        await anyio.to_thread.run_sync(recv.readline)
        try:
            # (the edges start with working: an idle pane shows each first edge as a change)
            await _read_option(client, pane, option, "idle", within=0.5)
            return
        except TimeoutError:
            continue
    raise AssertionError(f"no record reached {option}")


async def _edges(client: ControlClient, pane: str, send: Any, recv: Any, option: str,
                 edges: int) -> list[float]:
    await _warm(client, pane, send, recv, option)
    out: list[float] = []
    for i in range(edges):
        word = "working" if i % 2 == 0 else "idle"
        send.write(f"state={word}:app=codex\n")
        written = int(await anyio.to_thread.run_sync(recv.readline))
        visible = await _read_option(client, pane, option, word)
        out.append((visible - written) / 1e6)
    return out


async def _floor(server: TmuxServer, pane: str, client: ControlClient, send: Any, recv: Any,
                 edges: int) -> list[float]:
    """The path without paneward: our own output client, the same parser, one option write."""
    target = TmuxTarget(server.name, None)
    argv = [*target.argv(), "-u", "-N", "-C", "attach-session", "-t", "main", "-f",
            OUTPUT_CLIENT_FLAGS]
    process = await anyio.open_process(argv)
    assert process.stdout is not None and process.stdin is not None
    parser, feed = OutputParser(), OscParser()

    async def reader() -> None:
        assert process.stdout is not None
        async for data in process.stdout:
            for event in parser.feed(data):
                if isinstance(event, PaneOutput) and event.pane == pane:
                    for record in feed.feed(event.data)[1]:
                        if isinstance(record, StatusRecord):
                            await client.run_batch(
                                [f"set-option -p -t {pane} @bench_turn {quote(record.state)}"])

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            result = await _edges(client, pane, send, recv, "@bench_turn", edges)
            tg.cancel_scope.cancel()
        return result
    finally:
        await process.stdin.aclose()
        with anyio.move_on_after(2):
            await process.wait()
        if process.returncode is None:
            process.kill()
        await process.aclose()


async def latency(edges: int, root: Path) -> dict[str, Any]:
    server = TmuxServer()
    server.start()
    try:
        target = TmuxTarget(server.name, None)
        async with ControlClient(target) as client:
            pane, send, recv = await _agent_pane(server, root)
            floor = await _floor(server, pane, client, send, recv, edges)
            async with _daemon(server, root) as daemon:

                async def on() -> bool:
                    return int((await _output(daemon))["panes_on"]) == 1

                await poll_until(on, "the agent pane read", within=30)
                ours = await _edges(client, pane, send, recv, "@paneward_turn", edges)
                counters = await _output(daemon)
            send.close()
            recv.close()
        return {"daemon_ms": _stats(ours), "floor_ms": _stats(floor),
                "emitted": counters["emitted"], "edges": edges}
    finally:
        server.kill()


def _release(go: Path) -> None:
    """Open a replayer's go FIFO (its read end is open: this does not block)."""
    with open(go, "w"):
        pass


def _children_cpu(pid: int) -> float:
    """CPU seconds of the daemon's live ``tmux -C`` output clients."""
    total = 0.0
    for child in _children(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"pause-after" in cmdline:
                fields = Path(f"/proc/{child}/stat").read_text().rpartition(")")[2].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            continue
    return total


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    return out


def _wakeups(pid: int) -> dict[int, int]:
    return {tid: s.wakeups for tid, s in thread_cpu(pid).items()}


def _woken(before: dict[int, int], after: dict[int, int]) -> int:
    """Context switches between two samples, over the threads alive at both."""
    return sum(after[tid] - before[tid] for tid in before.keys() & after.keys())


async def replay(
    scale: float, panes: int, idle_s: float, root: Path, *extra: str
) -> dict[str, Any]:
    server = TmuxServer()
    server.start()
    try:
        script = root / "replay.py"
        script.write_text(REPLAY)
        async with _daemon(server, root, *extra) as daemon:
            marks = [root / f"done-{i}" for i in range(panes)]
            gos = [root / f"go-{i}" for i in range(panes)]
            for go, mark in zip(gos, marks, strict=True):
                os.mkfifo(go)
                line = " ".join(shlex.quote(str(p))
                                for p in (sys.executable, script, STREAM, scale, mark, go))
                await server.new_pane(line, window=True)
            if not extra:

                async def read() -> bool:
                    return int((await _output(daemon))["panes_on"]) == panes

                await poll_until(read, "every replay pane read", within=60)
            else:
                await anyio.sleep(2)  # as long as the panes take to be bound
            started = time.monotonic()
            cpu0, kids0 = process_cpu(daemon.pid), _children_cpu(daemon.pid)
            for go in gos:
                await anyio.to_thread.run_sync(_release, go)

            async def finished() -> bool:
                return all(m.exists() for m in marks)

            await poll_until(finished, "the replays", within=600, interval=0.2)
            kids = _children_cpu(daemon.pid)
            busy_s = time.monotonic() - started
            cpu = process_cpu(daemon.pid) - cpu0
            out = (await daemon.counters())["tmux"]["output"]
            # Idle: the stand-ins stay, silent.
            wake0, lines0 = _wakeups(daemon.pid), (out or {}).get("output_lines", 0)
            cpu_idle0 = process_cpu(daemon.pid)
            await anyio.sleep(idle_s)
            wake = _woken(wake0, _wakeups(daemon.pid))
            cpu_idle = process_cpu(daemon.pid) - cpu_idle0
            after = (await daemon.counters())["tmux"]["output"]
        return {
            "scale": scale, "panes": panes, "busy_s": busy_s, "daemon_cpu_s": cpu,
            "clients_cpu_s": kids - kids0,
            "per_pane_core_pct": 100 * (cpu + kids) / busy_s / panes,
            "idle_wakeups_per_s": wake / idle_s, "idle_cpu_pct": 100 * cpu_idle / idle_s,
            "idle_output_lines": (after or {}).get("output_lines", 0) - lines0,
            "output": out,
        }
    finally:
        server.kill()


async def capture(path: Path) -> None:
    """Record a real Codex TUI's pane output, as tmux's output client receives it."""
    from tests.support.agents import CODEX_CONFIG, stop_codex_leftovers
    from tests.support.mock_apis import openai_server
    from tests.support.wrap import AgentTmuxServer

    mock = openai_server()
    with tempfile.TemporaryDirectory() as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        (home / ".codex").mkdir(parents=True)
        work.mkdir()
        (home / ".codex" / "config.toml").write_text(CODEX_CONFIG.format(url=mock.url, cwd=work))
        prefix = os.environ.get("PANEWARD_AGENT_PREFIX", str(Path.home() / ".cache/paneward-npm"))
        codex = Path(prefix) / "node_modules" / ".bin" / "codex"
        tmux = AgentTmuxServer(Path(tmp))
        env = {"HOME": str(home), "TMPDIR": tmp, "MOCK_OPENAI_API_KEY": "dummy",
               "PATH": os.environ["PATH"], "TERM": "xterm-256color"}
        tmux.start(["sh", "-c", "exec sleep 3600"], {"PATH": "/usr/bin:/bin"})
        chunks: list[dict[str, Any]] = []
        try:
            # A second's wait, so that our client is attached to the pane's session (tmux sends
            # a client the output of its own session's panes) before Codex's first byte.
            pane = tmux.start(["sh", "-c", f"sleep 1; exec {shlex.quote(str(codex))} --no-daemon"],
                              env, width=160, height=50, cwd=work)
            session = tmux.pane_value(pane, "#{session_id}")
            argv = ["tmux", "-L", tmux.name, "-u", "-C", "attach", "-t", session,
                    "-f", OUTPUT_CLIENT_FLAGS]
            process = await anyio.open_process(argv)
            parser = OutputParser()
            t0 = time.monotonic()

            async def read() -> None:
                assert process.stdout is not None
                async for data in process.stdout:
                    for event in parser.feed(data):
                        if isinstance(event, PaneOutput) and event.pane == pane:
                            chunks.append({"t": round(time.monotonic() - t0, 4),
                                           "data": base64.b64encode(event.data).decode()})

            async def keys(*words: str) -> None:
                tmux.run("send-keys", "-t", pane, *words)

            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                await tmux.wait_text(pane, "Ask Codex to do anything")
                for text, after in (("hello there", 4), ("please WRITE a file", 4)):
                    await keys("-l", text)
                    await anyio.sleep(0.5)
                    await keys("Enter")
                    await anyio.sleep(after)
                await keys("y")
                await anyio.sleep(4)
                await keys("-l", "be SLOW")
                await anyio.sleep(0.5)
                await keys("Enter")
                await anyio.sleep(8)  # the spinner redraws while it works
                await keys("Escape")
                await anyio.sleep(3)
                tg.cancel_scope.cancel()
        finally:
            tmux.kill()
            mock.close()
            stop_codex_leftovers(home)
    await anyio.Path(path).write_text("".join(json.dumps(c) + "\n" for c in chunks))
    print(f"{len(chunks)} chunks, {sum(len(base64.b64decode(c['data'])) for c in chunks)} bytes,"
          f" {chunks[-1]['t']} s -> {path}")


def _summary(runs: list[dict[str, Any]], key: str) -> str:
    values = [r[key] for r in runs]
    return f"{min(values):.3f} / {statistics.median(values):.3f} / {max(values):.3f}"


async def main_async(args: argparse.Namespace) -> None:
    if args.capture:
        await capture(STREAM)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        lat = []
        for i in range(args.runs):
            run_root = root / f"lat-{i}"
            run_root.mkdir()
            lat.append(await latency(args.edges, run_root))
            print("latency", i, json.dumps(lat[-1]), flush=True)
        print(f"write -> option visible, paneward p50 ms (min/median/max over runs): "
              f"{_summary([r['daemon_ms'] for r in lat], 'p50')}")
        print(f"write -> option visible, paneward p99 ms: "
              f"{_summary([r['daemon_ms'] for r in lat], 'p99')}")
        print(f"floor (own output client) p50 ms: {_summary([r['floor_ms'] for r in lat], 'p50')}")
        print(f"floor p99 ms: {_summary([r['floor_ms'] for r in lat], 'p99')}")
        for scale, label in ((1.0, "real rate"), (10.0, "10x")):
            ours: list[dict[str, Any]] = []
            base: list[dict[str, Any]] = []
            for i in range(args.runs):
                for extra, into in (((), ours), (("--no-tmux-output",), base)):
                    run_root = root / f"replay-{scale}-{i}-{len(extra)}"
                    run_root.mkdir()
                    result = await replay(scale, args.panes, args.idle_s, run_root, *extra)
                    into.append(result)
                    print("replay", label, "baseline" if extra else "output", i,
                          json.dumps(result), flush=True)
            for name, runs in (("output read", ours), ("baseline, --no-tmux-output", base)):
                print(f"{label}, {name}: per pane % of a core (min/median/max) "
                      f"{_summary(runs, 'per_pane_core_pct')}; idle wake-ups/s "
                      f"{_summary(runs, 'idle_wakeups_per_s')}; idle output lines "
                      f"{_summary(runs, 'idle_output_lines')}")
            pauses = [r["output"]["pauses"] for r in ours]
            ages = [r["output"]["max_age_ms"] for r in ours]
            records = [r["output"]["emitted"] for r in ours]
            print(f"{label}: pauses {pauses}, longest hold ms {ages}, records read {records}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--panes", type=int, default=4)
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--capture", action="store_true",
                        help="record tests/fixtures/tmux_output/codex-tui.jsonl from a real Codex")
    anyio.run(main_async, parser.parse_args())


if __name__ == "__main__":
    main()
