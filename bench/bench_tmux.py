"""tmux badge benchmarks (private server, tmux -L pw-bench-<random>), ratios in the same run.

1. 50 badge changes in one tick through TmuxBridge (subscription item -> BadgeBook -> one
   pipelined control-mode batch -> every reply) vs a bare pipelined control-mode batch of
   50 ``set-option`` commands on the same server (our ControlClient, no bridge), and vs the
   exact command lines the bridge wrote (isolates the bridge's own overhead).
2. transition -> pane option visible to ``tmux show -p`` (a separate tmux client), p50/p99 over
   200 events: the bridge alone.
3. hook fired -> pane option visible, p50/p99 over 200 events each, through a real
   ``paneward run --tmux`` daemon: a Claude session whose pid is a pane's process, its turns
   driven by UserPromptSubmit/Stop hooks sent (a) as command hooks, a ``paneward hook`` process
   per event timed from just before the spawn, and (b) as http hooks on a keep-alive
   connection. "Visible" is read by another control-mode client running ``show-options -p``
   every millisecond (a ``tmux show -p`` process per poll would add its own ~3.5 ms spawn).

Run: .venv/bin/python bench/bench_tmux.py
"""

from __future__ import annotations

import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.core.tmux.protocol import TmuxTarget, quote
from actors.sinks.tmux import TmuxBridge
from actors.sinks.tmux_client import ControlClient
from messages import NotifyHook, Transition, encode
from tests.support.daemon import (
    DaemonProcess,
    claude_hook_payload,
    daemon_env,
    raw_send,
    start_token,
    time_hook_events,
)
from tests.support.tmux import TmuxServer, TransitionSource, activity

ROUNDS = 60


async def bench(server: TmuxServer) -> dict[str, float]:
    panes = [
        (await server.arun("new-window", "-d", "-P", "-F", "#{pane_id}", "sleep 600")).strip()
        for _ in range(50)
    ]
    results: dict[str, float] = {}
    turns = ("working", "idle")
    badges = ("● working", "○ idle")
    # -- 1. one tick of 50 badge changes: the bridge vs bare batches, interleaved per round ---
    # The Transitions are built before timing (the hub builds them, not the sink): the timed
    # part is the sink's work — 50 items in, BadgeBook, rendering, one write, every reply.
    source = TransitionSource(*(activity(f"s{i}", p) for i, p in enumerate(panes)))
    ticks = []
    for r in range(ROUNDS):
        tick = []
        for i, pane in enumerate(panes):
            source.seq += 1
            after = activity(f"s{i}", pane, turn=turns[r % 2])
            tick.append(Transition(seq=source.seq, key=after.key, after=after, cause="bench"))
        ticks.append(tick)
    bridge = TmuxBridge(socket_name=server.name, panes=False)
    sink_times: list[float] = []
    bare50: list[float] = []
    same: list[float] = []
    async with anyio.create_task_group() as tg, ControlClient(TmuxTarget(server.name)) as client:
        tg.start_soon(bridge.serve, source.receive, None)
        await bridge.wait_badge_batch()  # the snapshot's batch
        stats_before = bridge.statistics()
        for r in range(ROUNDS):
            start = time.perf_counter()
            for item in ticks[r]:
                source.send.send_nowait(item)
            # Until tmux answered the batch (the bridge's own clock), not until this task is
            # woken: the bare batches below are timed without a task hand-over either.
            answered = await bridge.wait_badge_batch()
            sink_times.append(answered - start)
            # The baseline: the same 50 set-option commands, one per pane, one write.
            commands = [
                f"set-option -p -t {quote(p)} @paneward_badge {quote(badges[r % 2])}"
                for p in panes
            ]
            start = time.perf_counter()
            await client.run_batch(commands)
            bare50.append(time.perf_counter() - start)
            # The exact command lines the bridge wrote for this tick (turn + badge per pane
            # and the summary): tmux's share of the sink's time.
            commands = []
            for p in panes:
                commands.append(f"set-option -p -t {quote(p)} @paneward_turn {quote(turns[r % 2])}")
                commands.append(
                    f"set-option -p -t {quote(p)} @paneward_badge {quote(badges[r % 2])}"
                )
            commands.append(f"set-option -g @paneward_summary {quote(str(r))}")
            start = time.perf_counter()
            await client.run_batch(commands)
            same.append(time.perf_counter() - start)
        stats_after = bridge.statistics()
        tg.cancel_scope.cancel()
    source.close()
    results["sink_50_ms"] = statistics.median(sink_times) * 1e3
    results["bare_50_setoption_ms"] = statistics.median(bare50) * 1e3
    results["bare_same_commands_ms"] = statistics.median(same) * 1e3
    written = stats_after.badge_commands - stats_before.badge_commands
    results["commands_per_tick"] = written / ROUNDS
    results["badge_batches_for_rounds"] = stats_after.badge_batches - stats_before.badge_batches
    ratios = sorted(s / b for s, b in zip(sink_times, bare50, strict=True))
    results["ratio_of_medians"] = results["sink_50_ms"] / results["bare_50_setoption_ms"]
    results["ratio_p50_paired"] = ratios[len(ratios) // 2]
    # -- 2. transition -> visible to another tmux client ----------------------------------------
    source = TransitionSource(activity("lat", panes[0]))
    bridge = TmuxBridge(socket_name=server.name, panes=False)
    latencies: list[float] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(bridge.serve, source.receive, None)
        await bridge.wait_badge_batch()
        for i in range(200):
            turn = turns[i % 2]
            want = "● working" if turn == "working" else "○ idle"
            start = time.perf_counter()
            source.publish(activity("lat", panes[0], turn=turn))
            while True:
                out = await anyio.run_process(
                    server.argv("show-options", "-p", "-v", "-t", panes[0], "@paneward_badge")
                )
                if out.stdout.decode().strip() == want:
                    break
            latencies.append(time.perf_counter() - start)
        tg.cancel_scope.cancel()
    source.close()
    # The floor: one `tmux show` process with nothing to wait for.
    floor: list[float] = []
    for _ in range(50):
        start = time.perf_counter()
        show = server.argv("show-options", "-p", "-q", "-v", "-t", panes[0], "@paneward_badge")
        await anyio.run_process(show, check=False)
        floor.append(time.perf_counter() - start)
    latencies.sort()
    results["visible_p50_ms"] = latencies[len(latencies) // 2] * 1e3
    results["visible_p99_ms"] = latencies[int(len(latencies) * 0.99) - 1] * 1e3
    results["tmux_show_spawn_p50_ms"] = statistics.median(floor) * 1e3
    return results


async def hook_to_tmux(server: TmuxServer, events: int) -> dict[str, list[float]]:
    """Part 3: hook fired -> the pane's badge visible to another control-mode client."""
    row = (await server.arun("new-window", "-d", "-P", "-F", "#{pane_id} #{pane_pid}",
                             "sleep 600")).split()
    pane, pid = row[0], int(row[1])
    token = start_token(pid)
    with tempfile.TemporaryDirectory(prefix="pw-bench-tmux-") as tmp:
        state = Path(tmp) / "state"
        state.mkdir(mode=0o700, parents=True)
        http_token = "bench-" + secrets.token_hex(8)
        (state / "http-token").write_text(http_token + "\n")
        (state / "http-token").chmod(0o600)
        with socket.socket() as s:  # a free loopback port for --http-port
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = daemon_env(state)
        args = ["--tmux", "-L", server.name, "--http-port", str(port)]
        async with DaemonProcess(state, env=env, extra_args=args), \
                ControlClient(TmuxTarget(server.name)) as reader:
            show = f"show-options -p -q -v -t {quote(pane)} @paneward_badge"

            async def wait_badge(want: str) -> None:
                # Polled every 1 ms: a tight loop would take a whole CPU of this 2-vCPU machine
                # from the daemon and the hook process it is timing (the resolution is ~1 ms).
                while True:
                    [reply] = await reader.run_batch([show])
                    if reply.lines and reply.lines[0] == want:
                        return
                    await anyio.sleep(0.001)

            now = time.time_ns() // 1_000_000
            start = claude_hook_payload("SessionStart", 0, session="bench-tmux")
            hello = NotifyHook(
                harness="claude-code",
                payload=start,
                at_ms=now,
                observed_at_ms=now,
                pid=pid,
                start_token=token,
            )
            await raw_send(state / "hook.sock", encode(hello) + b"\n")
            with anyio.fail_after(30):
                await wait_badge("? unknown")  # bound to the pane, no turn yet
            badge = {"UserPromptSubmit": "● working", "Stop": "✔ done"}
            hook_env = {**env, "CLAUDE_PID": str(pid)}

            def arm(event: str) -> Callable[[], Awaitable[object]]:
                async def wait() -> None:
                    with anyio.fail_after(30):
                        await wait_badge(badge[event])

                return wait

            out = await time_hook_events(
                hook_env, port, http_token, events, arm, session="bench-tmux"
            )
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    server = TmuxServer()
    server.name = server.name.replace("pw-", "pw-bench-")
    server.start()
    try:
        r = anyio.run(bench, server)
        hooks = anyio.run(hook_to_tmux, server, 200)
    finally:
        subprocess.run(server.argv("kill-server"), check=False, capture_output=True)
    print(f"tmux {subprocess.run(['tmux', '-V'], capture_output=True, text=True).stdout.strip()}")
    print(f"50 badge changes, one tick, through TmuxBridge: {r['sink_50_ms']:.3f} ms "
          f"(median of {ROUNDS}; {r['commands_per_tick']:.0f} commands, "
          f"{r['badge_batches_for_rounds']:.0f} batches for {ROUNDS} ticks)")
    print(f"bare pipelined batch, 50 set-option:            {r['bare_50_setoption_ms']:.3f} ms "
          f"-> ratio {r['ratio_of_medians']:.2f}x (median of per-round ratios "
          f"{r['ratio_p50_paired']:.2f}x)")
    print(f"bare pipelined batch, the same 101 commands:    {r['bare_same_commands_ms']:.3f} ms "
          f"-> ratio {r['sink_50_ms'] / r['bare_same_commands_ms']:.2f}x")
    print(f"transition -> visible to `tmux show -p`: p50 {r['visible_p50_ms']:.2f} ms, "
          f"p99 {r['visible_p99_ms']:.2f} ms over 200 events "
          f"(one `tmux show` spawn alone: p50 {r['tmux_show_spawn_p50_ms']:.2f} ms)")
    for kind, values in hooks.items():
        print(f"{kind} fired -> badge visible to another tmux client: "
              f"p50 {_pct(values, 0.5):.2f} ms, p99 {_pct(values, 0.99):.2f} ms "
              f"over {len(values)} events")


if __name__ == "__main__":
    main()
