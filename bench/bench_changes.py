"""Cost follows changes: a change -> the pane's badge, at N = 10 and N = 200 sessions.

Run: ``.venv/bin/python bench/bench_changes.py [--sizes 10 200] [--events 200] [--runs 3]
[--load-s 20]``

Each run builds a fresh world (:mod:`bench.world`) of N sessions (half Claude, half Codex, each
in its own tmux pane) under ``paneward run --tmux`` with discovery on, waits until every session
is bound to its pane, then:

1. **registry rewrite -> badge**: rewrites one Claude session's ``sessions/<pid>.json`` (write
   + rename, as Claude does; ``busy`` and ``idle`` alternating, sessions in turn) and times
   until another control-mode client of the tmux server reads the new ``@paneward_badge`` on
   that pane (``show-options`` every 1 ms);
2. **rollout append -> badge**: the same for one Codex session's rollout (``task_started`` /
   ``task_complete`` appended);
3. **load**: every session changes once a second (registry rewrites, rollout appends) for
   ``--load-s`` seconds; the daemon's CPU (every thread, ``/proc/<pid>/stat``) over that time.

The floors, measured in the same world, each sent by a third control-mode client and read by the
same 1 ms poll (what tmux and the poll add whatever paneward does): ``floor``, one
``set-option`` of a pane option; ``floor batch``, the batch paneward itself writes for one
busy <-> idle flip -- five pane options (turn, attention, badge, reason, age) and the global
summary, in paneward's order, polled on the badge's. tmux makes every ``set-option`` cost
O(sessions + windows + clients): each one refreshes every session's status cache,
recalculates every window's size and redraws every client (``options_push_changes`` in tmux's
``options.c``), so what grows with N in tmux grows with the number of commands too.

Every size's world of a run is up at once (its own tmux server and daemon), and each timed
event happens at every size in turn, the order flipping from one event to the next; the load
then runs at one size at a time. The machine's speed drifts in phases of about a second
(bench/RESULTS.md): timing one size after the other let such a phase fall on one
size only, and the ratio of the p99s then told the hour, not paneward. The idle world meanwhile
costs its daemon ~0.1 % of a core (the idle budget's figure). ``--runs`` runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(ROOT))

from actors.core.tmux.badges import (  # noqa: E402
    BADGE_OPTION,
    HARNESS_OPTION,
    OPTION_NAMES,
    PRESENCE_OPTION,
    SUMMARY_OPTION,
)
from actors.core.tmux.protocol import quote  # noqa: E402
from actors.sinks.tmux_client import ControlClient  # noqa: E402
from bench.world import ClaudeSession, CodexSession, World, process_cpu, world  # noqa: E402

#: registry/rollout: change -> badge read by another tmux client; "watch": change -> the
#: transition line on a control-socket watch; floor: a bare set-option -> read by the same poll;
#: floor batch: the same commands as paneward's batch for one flip, bare.
KINDS = ("registry", "registry watch", "rollout", "rollout watch", "floor", "floor batch")
#: What a registry busy <-> idle flip changes on the pane, in paneward's option order
#: (presence and harness stay): 5 pane options plus the summary, as counted on the daemon
#: (225 badge commands in 40 flips, the summary unchanged in some).
FLIP_OPTIONS = tuple(
    name for name in OPTION_NAMES if name not in (PRESENCE_OPTION, HARNESS_OPTION)
)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def read_badge(client: ControlClient, pane: str) -> str | None:
    [reply] = await client.run_batch([f"show-options -p -q -v -t {quote(pane)} @paneward_badge"])
    return reply.lines[0] if reply.lines else None


class WatchLines:
    """A ``watch`` subscription on the daemon's control socket: when each session's next
    transition line arrives (the daemon's own latency, without tmux)."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self._lines = BufferedByteReceiveStream(stream)
        self._waiting: dict[str, tuple[anyio.Event, list[float]]] = {}

    async def read(self) -> None:
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
            while True:
                item = json.loads(await self._lines.receive_until(b"\n", 1 << 24))
                if item.get("type") != "Transition":
                    continue
                waiter = self._waiting.pop(item["key"]["session_id"], None)
                if waiter is not None:
                    waiter[1].append(time.perf_counter())
                    waiter[0].set()

    def arm(self, session_id: str) -> tuple[anyio.Event, list[float]]:
        waiter: tuple[anyio.Event, list[float]] = (anyio.Event(), [])
        self._waiting[session_id] = waiter
        return waiter


async def time_change(
    client: ControlClient,
    watch: WatchLines,
    session_id: str,
    pane: str,
    change: Callable[[], None],
) -> tuple[float, float]:
    """Milliseconds from ``change()`` to the transition line on ``watch`` and to a different
    badge on ``pane``."""
    before = await read_badge(client, pane)
    seen, at = watch.arm(session_id)
    start = time.perf_counter()
    change()
    with anyio.fail_after(30):
        while True:  # a tmux option has no event: polled every 1 ms
            if await read_badge(client, pane) != before:
                break
            await anyio.sleep(0.001)
        badge = time.perf_counter()
        await seen.wait()
    return (at[0] - start) * 1000, (badge - start) * 1000


async def floor_once(
    writer: ControlClient, client: ControlClient, pane: str, i: int, *, batch: bool = False
) -> float:
    """One bare write into tmux, timed until the poll reads it back: one ``set-option``
    (``batch=False``) or paneward's whole batch for one flip."""
    target = quote(pane)
    names = [f"{name}_floor" for name in FLIP_OPTIONS] if batch else ["@paneward_floor"]
    polled = names[FLIP_OPTIONS.index(BADGE_OPTION)] if batch else names[0]
    value = f"floor-{i}"
    commands = [f"set-option -p -t {target} {name} {value}" for name in names]
    if batch:
        commands.append(f"set-option -g {SUMMARY_OPTION}_floor {value}")
    start = time.perf_counter()
    await writer.run_batch(commands)
    show = f"show-options -p -q -v -t {target} {polled}"
    while True:
        [reply] = await client.run_batch([show])
        if reply.lines and reply.lines[0] == value:
            break
        await anyio.sleep(0.001)
    return (time.perf_counter() - start) * 1000


@dataclass
class Side:
    """One size's world in a run: its daemon, a reader and a writer client of its tmux
    server, its watch subscription, and what was timed there (kind -> milliseconds)."""

    size: int
    world: World
    pid: int
    client: ControlClient
    writer: ControlClient
    watch: WatchLines
    results: dict[str, list[float]] = field(default_factory=dict)

    def add(self, kind: str, ms: float) -> None:
        self.results.setdefault(kind, []).append(ms)


async def one_run(sizes: list[int], events: int, load_s: float) -> dict[int, dict[str, object]]:
    """One world per size, all up at once; every timed event happens at every size in turn."""
    async with AsyncExitStack() as stack:
        worlds = []
        for size in sizes:
            raw = stack.enter_context(tempfile.TemporaryDirectory(prefix="pw-bench-changes-"))
            w = await stack.enter_async_context(world(Path(raw)))
            w.add_claude(size // 2)
            w.add_codex(size - size // 2)
            worlds.append((size, w, await w.start_daemon()))
        for _, w, _ in worlds:
            await w.wait_bound()
        await anyio.sleep(2)  # let the start-up work settle
        # The connections close first: each watch reader then ends at its stream's end.
        async with anyio.create_task_group() as tg, AsyncExitStack() as conns:
            sides = []
            for size, w, daemon in worlds:
                client = await conns.enter_async_context(w.reader())
                writer = await conns.enter_async_context(w.reader())
                stream = await anyio.connect_unix(daemon.control_socket)
                conns.push_async_callback(stream.aclose)
                await stream.send(b'{"op": "watch"}\n')
                watch = WatchLines(stream)
                tg.start_soon(watch.read)
                sides.append(Side(size, w, daemon.pid, client, writer, watch))
            for i in range(events):
                # The order flips every event: neither size always follows the other.
                for side in sides if i % 2 == 0 else sides[::-1]:
                    w = side.world
                    session = w.claude[i % len(w.claude)]
                    status = "busy" if session.status == "idle" else "idle"
                    rewrite = partial(session.write, status, time.time_ns() // 1_000_000)
                    seen, badge = await time_change(
                        side.client, side.watch, session.session_id, session.pane, rewrite
                    )
                    side.add("registry", badge)
                    side.add("registry watch", seen)
            for i in range(events):
                for side in sides if i % 2 == 0 else sides[::-1]:
                    w = side.world
                    codex = w.codex[i % len(w.codex)]
                    codex.turns += 1 if i % 2 == 0 else 0
                    boundary = "task_started" if (i // len(w.codex)) % 2 == 0 else "task_complete"
                    append = partial(codex.append, boundary, time.time_ns() // 1_000_000)
                    seen, badge = await time_change(
                        side.client, side.watch, codex.thread_id, codex.pane, append
                    )
                    side.add("rollout", badge)
                    side.add("rollout watch", seen)
            for kind, batch in (("floor", False), ("floor batch", True)):
                for i in range(events):
                    for side in sides if i % 2 == 0 else sides[::-1]:
                        pane = side.world.claude[0].pane
                        side.add(
                            kind, await floor_once(side.writer, side.client, pane, i, batch=batch)
                        )
        out: dict[int, dict[str, object]] = {}
        for side in sides:
            # The load runs at one size at a time: the other world is idle meanwhile.
            loaded = await load(side.world, side.pid, load_s) if load_s > 0 else None
            out[side.size] = {**side.results, "load": loaded}
    return out


def flip_claude(session: ClaudeSession) -> Callable[[], None]:
    def change() -> None:
        session.write("busy" if session.status == "idle" else "idle", time.time_ns() // 1_000_000)

    return change


def flip_codex(session: CodexSession) -> Callable[[], None]:
    def change() -> None:
        session.turns += 1
        boundary = "task_started" if session.turns % 2 else "task_complete"
        session.append(boundary, time.time_ns() // 1_000_000)

    return change


async def load(w: World, pid: int, seconds: float) -> float:
    """Every session changes once a second for ``seconds``: the daemon's % of a core."""
    sessions: list[Callable[[], None]] = [*map(flip_claude, w.claude), *map(flip_codex, w.codex)]
    gap = 1.0 / len(sessions)
    cpu0, t0 = process_cpu(pid), time.monotonic()
    n = 0
    while time.monotonic() - t0 < seconds:
        sessions[n % len(sessions)]()
        n += 1
        await anyio.sleep(max(0.0, t0 + n * gap - time.monotonic()))
    cpu1, t1 = process_cpu(pid), time.monotonic()
    return (cpu1 - cpu0) / (t1 - t0) * 100


def summary(values: list[float]) -> str:
    return (
        f"p50 {pct(values, 0.5):.2f} ms, p99 {pct(values, 0.99):.2f} ms, "
        f"max {max(values):.2f} ms (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 200])
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load-s", type=float, default=20.0)
    args = parser.parse_args()
    p99: dict[tuple[str, int], list[float]] = {}
    loads: dict[int, list[float]] = {}
    for run in range(args.runs):
        by_size = anyio.run(one_run, args.sizes, args.events, args.load_s)
        for size in args.sizes:
            r = by_size[size]
            for kind in KINDS:
                values = r[kind]
                assert isinstance(values, list)
                p99.setdefault((kind, size), []).append(pct(values, 0.99))
                print(f"run {run + 1} N={size} {kind}: {summary(values)}", flush=True)
            if isinstance(r["load"], float):
                loads.setdefault(size, []).append(r["load"])
                print(f"run {run + 1} N={size} load (every session changes once a second): "
                      f"daemon {r['load']:.2f} % of a core", flush=True)
    print()
    for kind in KINDS:
        for size in args.sizes:
            values = sorted(p99[(kind, size)])
            print(f"{kind} p99, N={size}: min {values[0]:.2f} / median "
                  f"{statistics.median(values):.2f} / max {values[-1]:.2f} ms "
                  f"over {len(values)} runs")
        if len(args.sizes) >= 2:
            small, large = min(args.sizes), max(args.sizes)
            ratios = sorted(
                b / a for a, b in zip(p99[(kind, small)], p99[(kind, large)], strict=True)
            )
            print(f"{kind}: p99 N={large} / N={small} per run: "
                  + ", ".join(f"{x:.2f}x" for x in ratios))
    for size, values in sorted(loads.items()):
        values.sort()
        print(f"load, N={size} (one change per second per session): daemon % of a core min "
              f"{values[0]:.2f} / median {statistics.median(values):.2f} / max {values[-1]:.2f}")


if __name__ == "__main__":
    main()
