"""Benchmark the broadcast hub against a bare anyio memory-stream fan-out in the same run.

Run: ``.venv/bin/python bench/bench_broadcast.py [--n 20000] [--repeat 5]``

Two scenarios, each as publishes per second (median of ``--repeat`` runs) and as a ratio to
its baseline measured in the same process:

``publish``  the synchronous publish path only, S registered subscribers, nobody reading.
             Baseline: build the same ``Transition`` and ``send_nowait`` it into S anyio memory
             object streams (what a hand-rolled fan-out costs). Hub ``all`` and ``latest``.
``live``     a publisher task (one checkpoint per publish) and S reader tasks that
             ``async for`` their subscription. Baseline: the same with S memory streams.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.runtime.hub import BroadcastHub, Mode
from messages import Activity, Evidence, SessionKey, Transition

T0 = 1_750_000_000_000
KEYS = 64
MODES: tuple[Mode, ...] = ("all", "latest")


def _activities(n: int) -> list[Activity]:
    out = []
    for i in range(n):
        key = SessionKey("claude-code", f"s{i % KEYS}")
        ev = Evidence(source="claude_hook", native_state=f"n{i}", observed_at_ms=T0 + i)
        out.append(Activity(key=key, presence="running", turn="working", evidence=ev))
    return out


def _timed(fn: Callable[[], None]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def publish_baseline(acts: list[Activity], subs: int) -> float:
    streams = [anyio.create_memory_object_stream[Transition](len(acts) + 1) for _ in range(subs)]
    current: dict[SessionKey, Activity] = {}

    def run() -> None:
        for seq, after in enumerate(acts, start=1):
            before = current.get(after.key)
            if before is not None and before.visible() == after.visible():
                continue
            current[after.key] = after
            t = Transition(seq=seq, key=after.key, after=after, cause="bench", before=before)
            for send, _ in streams:
                send.send_nowait(t)

    elapsed = _timed(run)
    for send, receive in streams:
        send.close()
        receive.close()
    return len(acts) / elapsed


def publish_hub(acts: list[Activity], subs: int, mode: Mode) -> float:
    hub = BroadcastHub()
    subscriptions = [hub.subscribe(mode, buffer=len(acts) + 1) for _ in range(subs)]

    def run() -> None:
        for after in acts:
            hub.publish(after.key, after, "bench")

    elapsed = _timed(run)
    assert hub.statistics().published == len(acts)
    assert hub.statistics().overflows == 0
    for sub in subscriptions:
        sub.close()
    hub.close()
    return len(acts) / elapsed


async def live_baseline(acts: list[Activity], subs: int) -> float:
    pairs: list[tuple[MemoryObjectSendStream[Transition], MemoryObjectReceiveStream[Transition]]]
    pairs = [anyio.create_memory_object_stream[Transition](1024) for _ in range(subs)]
    counts = [0] * subs

    async def reader(i: int, receive: MemoryObjectReceiveStream[Transition]) -> None:
        with receive:
            async for _ in receive:
                counts[i] += 1

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i, (_, receive) in enumerate(pairs):
            tg.start_soon(reader, i, receive)
        for seq, after in enumerate(acts, start=1):
            t = Transition(seq=seq, key=after.key, after=after, cause="bench")
            for send, _ in pairs:
                send.send_nowait(t)
            await anyio.lowlevel.checkpoint()
        for send, _ in pairs:
            send.close()
    elapsed = time.perf_counter() - start
    assert counts == [len(acts)] * subs
    return len(acts) / elapsed


async def live_hub(acts: list[Activity], subs: int, mode: Mode) -> float:
    hub = BroadcastHub()
    subscriptions = [hub.subscribe(mode, snapshot=False) for _ in range(subs)]
    counts = [0] * subs

    async def reader(i: int) -> None:
        with subscriptions[i] as sub:
            async for _ in sub:
                counts[i] += 1

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(subs):
            tg.start_soon(reader, i)
        for after in acts:
            hub.publish(after.key, after, "bench")
            await anyio.lowlevel.checkpoint()
        hub.close()
    elapsed = time.perf_counter() - start
    assert hub.statistics().overflows == 0
    if mode == "all":
        assert counts == [len(acts)] * subs
    return len(acts) / elapsed


def _report(scenario: str, subs: int, rows: dict[str, list[float]]) -> None:
    """Print medians; ratios are medians of per-round ratios (each round runs the baseline and
    every variant back to back, so load drift on a shared machine hits both sides alike)."""
    base = rows["baseline"]
    for variant, rates in rows.items():
        ratios = [rate / b for rate, b in zip(rates, base, strict=True)]
        print(
            f"{scenario:8s} {subs:4d} {variant:10s} {statistics.median(rates):12,.0f} "
            f"{statistics.median(ratios):6.2f} {min(ratios):6.2f} {max(ratios):6.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="publishes per run")
    parser.add_argument("--repeat", type=int, default=5, help="rounds per figure (median)")
    args = parser.parse_args()
    acts = _activities(args.n)
    live_acts = acts[: max(1, args.n // 4)]
    print(f"n={args.n} publishes per publish run, {len(live_acts)} per live run, {KEYS} keys,")
    print(f"{args.repeat} rounds; ratio = hub / baseline: median, min, max over rounds")
    print(
        f"{'scenario':8s} {'subs':>4s} {'variant':10s} {'publishes/s':>12s} "
        f"{'ratio':>6s} {'min':>6s} {'max':>6s}"
    )
    for subs in (1, 10, 100):
        rows: dict[str, list[float]] = {"baseline": [], "hub all": [], "hub latest": []}
        for _ in range(args.repeat):
            rows["baseline"].append(publish_baseline(acts, subs))
            for mode in MODES:
                rows[f"hub {mode}"].append(publish_hub(acts, subs, mode))
        _report("publish", subs, rows)
    for subs in (1, 10):
        rows = {"baseline": [], "hub all": [], "hub latest": []}
        for _ in range(args.repeat):
            rows["baseline"].append(anyio.run(live_baseline, live_acts, subs))
            for mode in MODES:
                rows[f"hub {mode}"].append(anyio.run(live_hub, live_acts, subs, mode))
        _report("live", subs, rows)


if __name__ == "__main__":
    main()
