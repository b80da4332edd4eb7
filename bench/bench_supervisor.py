"""Supervisor throughput, idle latency and memory against a bare anyio pipeline.

Run: .venv/bin/python bench/bench_supervisor.py [--events N] [--sessions N]

Baseline (measured in the same run): msgspec-decode hook bytes -> one anyio memory
stream -> a dict of state per session -> fan-out to S subscriber tasks (one
memory stream each). Paneward: the same bytes decoded and given to
``Supervisor.inject`` (and ``inject_bytes``) -> session actors (reducer) ->
broadcast hub -> S ``all`` subscribers. Every event changes its session's turn,
so every event is one transition for every subscriber.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from messages import NotifyHook, Transition, decode_inbound
from supervisor import Supervisor

T0 = 1_795_995_000_000


class Closable(Protocol):
    def close(self) -> None: ...


def hook_frames(sessions: int, events: int) -> list[bytes]:
    """Claude hook frames: UserPromptSubmit / Stop alternating per session."""
    frames = []
    for i in range(events):
        n = i % sessions
        event = "UserPromptSubmit" if (i // sessions) % 2 == 0 else "Stop"
        payload = {
            "session_id": f"session-{n:05d}",
            "hook_event_name": event,
            "prompt_id": f"p{i // sessions}",
            "cwd": "/work",
            "transcript_path": "/x",
        }
        msg = NotifyHook(
            harness="claude-code",
            payload=payload,
            at_ms=T0 + i,
            observed_at_ms=T0 + i,
            pid=10_000 + n,
            start_token="123",
        )
        frames.append(msgspec.json.encode(msg))
    return frames


async def baseline(
    frames: list[bytes], subscribers: int, latency_probes: int
) -> tuple[float, list[float]]:
    decoder = msgspec.json.Decoder(NotifyHook)
    state: dict[str, str] = {}
    send, receive = anyio.create_memory_object_stream[NotifyHook](1024)
    outs: list[MemoryObjectSendStream[tuple[str, str]]] = []
    ins: list[MemoryObjectReceiveStream[tuple[str, str]]] = []
    for _ in range(subscribers):
        s, r = anyio.create_memory_object_stream[tuple[str, str]](1024)
        outs.append(s)
        ins.append(r)
    counts = [0] * subscribers
    target = [0]
    reached = [anyio.Event()]

    async def router(_: int) -> None:
        async with receive:
            async for msg in receive:
                sid = msg.payload["session_id"]
                new = "working" if msg.payload["hook_event_name"] == "UserPromptSubmit" else "idle"
                if state.get(sid) != new:
                    state[sid] = new
                    for out in outs:
                        await out.send((sid, new))

    async def subscriber(i: int) -> None:
        async with ins[i]:
            async for _ in ins[i]:
                counts[i] += 1
                if all(c >= target[0] for c in counts):
                    reached[0].set()

    async def feed(batch: list[bytes]) -> None:
        for frame in batch:
            await send.send(decoder.decode(frame))

    return await _drive(
        frames,
        latency_probes,
        subscribers,
        counts,
        target,
        reached,
        feed,
        [(router, 0), *[(subscriber, i) for i in range(subscribers)]],
        [send, *outs],
    )


async def _drive(
    frames: list[bytes],
    latency_probes: int,
    subscribers: int,
    counts: list[int],
    target: list[int],
    reached: list[anyio.Event],
    feed: Callable[[list[bytes]], Awaitable[None]],
    tasks: list[tuple[Callable[[int], Coroutine[Any, Any, None]], int]],
    closers: Sequence[Closable],
) -> tuple[float, list[float]]:
    async with anyio.create_task_group() as tg:
        for task, arg in tasks:
            tg.start_soon(task, arg)
        target[0] = len(frames)
        t0 = time.perf_counter()
        await feed(frames)
        await reached[0].wait()
        elapsed = time.perf_counter() - t0
        latencies = []
        last: dict[bytes, bytes] = {}
        for frame in frames:
            last[json.loads(frame)["payload"]["session_id"].encode()] = frame
        sessions = list(last)
        for k in range(latency_probes):
            reached[0] = anyio.Event()
            target[0] = len(frames) + k + 1
            sid = sessions[k % len(sessions)]
            # flip the current state of one session so the probe is a real change
            probe = _flip(last[sid], len(frames) + k)
            last[sid] = probe
            t1 = time.perf_counter()
            await feed([probe])
            await reached[0].wait()
            latencies.append(time.perf_counter() - t1)
        tg.cancel_scope.cancel()
    for closer in closers:
        closer.close()
    return elapsed, latencies


def _flip(frame: bytes, i: int) -> bytes:
    data = json.loads(frame)
    payload = data["payload"]
    payload["hook_event_name"] = (
        "Stop" if payload["hook_event_name"] == "UserPromptSubmit" else "UserPromptSubmit"
    )
    payload["prompt_id"] = f"probe-{i}"
    data["at_ms"] = data["observed_at_ms"] = T0 + 10_000_000 + i
    return json.dumps(data).encode()


async def paneward(
    frames: list[bytes], subscribers: int, latency_probes: int, via_bytes: bool
) -> tuple[float, list[float]]:
    counts = [0] * subscribers
    target = [0]
    reached = [anyio.Event()]
    async with Supervisor(mailbox_size=1024) as sup:
        subs = [
            sup.subscribe("all", snapshot=False, buffer=len(frames) + 10_000)
            for _ in range(subscribers)
        ]

        async def subscriber(i: int) -> None:
            async for item in subs[i]:
                if isinstance(item, Transition):
                    counts[i] += 1
                    if all(c >= target[0] for c in counts):
                        reached[0].set()

        async def feed(batch: list[bytes]) -> None:
            if via_bytes:
                for frame in batch:
                    await sup.inject_bytes(frame)
            else:
                for frame in batch:
                    await sup.inject(decode_inbound(frame))

        result = await _drive(
            frames,
            latency_probes,
            subscribers,
            counts,
            target,
            reached,
            feed,
            [(subscriber, i) for i in range(subscribers)],
            subs,
        )
        stats = sup.statistics()
        assert stats.transitions == len(frames) + latency_probes, stats
    return result


def _vm_hwm_mb(text: str) -> float:
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def rss_with_live_sessions(sessions: int) -> dict[str, float]:
    """Peak RSS (VmHWM) of a fresh process holding ``sessions`` live session actors.

    ``ru_maxrss`` survives ``exec`` on Linux (a child would report the parent's peak),
    so the high-water mark is read from ``/proc/self/status`` instead.
    """
    root = str(Path(__file__).resolve().parent.parent)
    code = f"""
import sys, anyio
sys.path.insert(0, {root!r})
from bench.bench_supervisor import hook_frames, _vm_hwm_mb
from supervisor import Supervisor
from messages import decode_inbound
from pathlib import Path
async def main():
    frames = hook_frames({sessions}, {sessions})
    base = _vm_hwm_mb(Path("/proc/self/status").read_text())
    async with Supervisor(linger=3600) as sup:
        for f in frames:
            await sup.inject(decode_inbound(f))
        await anyio.wait_all_tasks_blocked()
        assert sup.statistics().sessions == {sessions}, sup.statistics()
        peak = _vm_hwm_mb(Path("/proc/self/status").read_text())
        print(base, peak)
anyio.run(main)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    base, peak = (float(x) for x in out.stdout.split())
    bare = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pathlib;print([l for l in pathlib.Path('/proc/self/status').read_text()"
            ".splitlines() if l.startswith('VmHWM')][0].split()[1])",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return {"peak_mb": peak, "after_imports_mb": base, "python_c_pass_mb": int(bare.stdout) / 1024}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--probes", type=int, default=200)
    args = parser.parse_args()
    frames = hook_frames(args.sessions, args.events)
    rows = []
    for subscribers in (1, 10):
        results = {}
        for name, fn in (
            ("baseline", partial(baseline, frames, subscribers, args.probes)),
            ("inject", partial(paneward, frames, subscribers, args.probes, False)),
            ("inject_bytes", partial(paneward, frames, subscribers, args.probes, True)),
        ):
            gc.collect()
            elapsed, lat = anyio.run(fn)
            results[name] = (
                len(frames) / elapsed,
                statistics.median(lat) * 1e6,
                sorted(lat)[int(len(lat) * 0.99) - 1] * 1e6,
            )
        base = results["baseline"]
        for name, (rate, p50, p99) in results.items():
            rows.append((subscribers, name, rate, rate / base[0], p50, p50 / base[1], p99))
    print(
        f"events={args.events} sessions={args.sessions} probes={args.probes} "
        f"python={sys.version.split()[0]} pid={os.getpid()}"
    )
    print("| S | pipeline | events/s | x baseline | idle p50 µs | x baseline | idle p99 µs |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for s, name, rate, ratio, p50, p50r, p99 in rows:
        print(f"| {s} | {name} | {rate:,.0f} | {ratio:.2f} | {p50:.0f} | {p50r:.2f} | {p99:.0f} |")
    mem = rss_with_live_sessions(args.sessions)
    print(
        f"\npeak RSS with {args.sessions} live session actors: {mem['peak_mb']:.1f} MB "
        f"(after imports {mem['after_imports_mb']:.1f} MB; "
        f"python -c pass {mem['python_c_pass_mb']:.1f} MB)"
    )


if __name__ == "__main__":
    main()
