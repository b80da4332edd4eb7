"""Supervisor throughput, idle latency and memory against a bare anyio pipeline of the same shape.

Run: .venv/bin/python bench/bench_supervisor.py [--events 20000] [--sessions 1000] [--rounds 5]

The input: Claude hook frames (``NotifyHook`` JSON, UserPromptSubmit / Stop alternating per
session, so every event is a transition for every subscriber) over ``--sessions`` sessions.

The paneward path, as the daemon runs it: ``deliver_nowait`` (what the hook listener calls for
every frame it decoded with :func:`messages.decode_inbound`) or ``await inject`` (a message built
in Python: validated again) -> normalize (the harness maps the payload) -> route -> the
session's actor (applied at once by the delivering task while nothing is queued for it, else
through its bounded mailbox of 256 and its task) -> reducer -> hub publish -> S ``all``
subscriptions (buffer 1024) -> S subscriber tasks.

The baseline, in the same run, does the same work and the same routing with bare anyio: the
same bytes decoded by a msgspec decoder -> one memory object stream (buffer 256) fed with
``send_nowait`` -> one consumer task that calls the same pure functions the supervisor does
(the harness's normalize, ``RoutingIndex.route`` and ``update``, the catalog's reducer with
what each harness can prove, ``cause_of``), keeping every session's state in a dict -> on a
published step, ``send_nowait`` of one Transition into S memory object streams (buffer 1024)
-> S subscriber tasks. Producers are the same code on both sides: the producer hands over
``--batch`` frames then yields once (as the hook listener does per read of its socket), or, for
``inject``, awaits a send per frame (``await stream.send``: the baseline counterpart). Every
subscriber takes what is pending at each wake-up, each with what its channel offers: a hub
subscription in one ``receive_many`` call, a memory object stream by ``receive`` then
``receive_nowait`` until it would block. Nothing is dropped on either side (checked).

Rounds are interleaved (baseline, paneward, baseline, ...); ratios are medians of per-round
ratios. Idle latency: one event at a time, until every subscriber has it.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.lowlevel
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.core.session.causes import cause_of
from actors.core.session.reducer import SessionState, initial_state
from actors.core.session.routing import RoutingIndex
from actors.harnesses.catalog import normalize
from actors.runtime.hub import DEFAULT_BUFFER
from messages import HookHint, Inbound, NotifyHook, SessionKey, Transition, decode_inbound
from supervisor import CATALOG_REDUCER, Supervisor

T0 = 1_795_995_000_000
MAILBOX = 256  # the supervisor's default mailbox_size


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


def probe_frames(frames: list[bytes], count: int) -> list[bytes]:
    """``count`` more frames, each flipping one session's turn (a transition each)."""
    last: dict[str, dict[str, Any]] = {}
    for frame in frames:
        data = json.loads(frame)
        last[data["payload"]["session_id"]] = data
    sessions = list(last)
    out = []
    for k in range(count):
        data = json.loads(json.dumps(last[sessions[k % len(sessions)]]))
        payload = data["payload"]
        payload["hook_event_name"] = (
            "Stop" if payload["hook_event_name"] == "UserPromptSubmit" else "UserPromptSubmit"
        )
        payload["prompt_id"] = f"probe-{k}"
        data["at_ms"] = data["observed_at_ms"] = T0 + 10_000_000 + k
        last[payload["session_id"]] = data
        out.append(json.dumps(data).encode())
    return out


class Receiver(Protocol):
    async def receive(self) -> Any: ...

    def receive_nowait(self) -> Any: ...


class Counter:
    """S subscriber tasks, each taking everything pending at each wake-up."""

    def __init__(self, subscribers: int) -> None:
        self.counts = [0] * subscribers
        self.target = 0
        self.reached = anyio.Event()

    def expect(self, total: int) -> anyio.Event:
        self.target = total
        self.reached = anyio.Event()
        if min(self.counts) >= total:
            self.reached.set()
        return self.reached

    async def run(self, index: int, source: Receiver) -> None:
        counts = self.counts
        receive_many = getattr(source, "receive_many", None)
        if receive_many is not None:  # a hub subscription: one call per wake-up
            while True:
                try:
                    taken = len(await receive_many())
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    return
                counts[index] += taken
                if counts[index] >= self.target and min(counts) >= self.target:
                    self.reached.set()
        while True:  # a memory object stream: receive, then what receive_nowait has
            try:
                await source.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return
            taken = 1
            while True:
                try:
                    source.receive_nowait()
                except anyio.WouldBlock:
                    break
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    return
                taken += 1
            counts[index] += taken
            if counts[index] >= self.target and min(counts) >= self.target:
                self.reached.set()


Feed = Callable[[list[bytes]], Awaitable[None]]
#: events per CPU second of each run (this process, one thread): steadier than wall time on a
#: shared machine, where another process may take the CPU in the middle of a run.
CPU_RATES: list[float] = []


async def drive(
    frames: list[bytes], probes: list[bytes], counter: Counter, feed: Feed
) -> tuple[float, list[float]]:
    """Throughput (events/s) of ``frames``, then the idle latency of each probe (s)."""
    done = counter.expect(len(frames))
    start, cpu = time.perf_counter(), time.process_time()
    await feed(frames)
    await done.wait()
    rate = len(frames) / (time.perf_counter() - start)
    CPU_RATES.append(len(frames) / (time.process_time() - cpu))
    latencies = []
    for k, probe in enumerate(probes):
        done = counter.expect(len(frames) + k + 1)
        start = time.perf_counter()
        await feed([probe])
        await done.wait()
        latencies.append(time.perf_counter() - start)
    return rate, latencies


def batched_feed(hand: Callable[[bytes], None], batch: int) -> Feed:
    async def feed(frames: list[bytes]) -> None:
        for i, frame in enumerate(frames):
            hand(frame)
            if i % batch == batch - 1:
                await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()

    return feed


async def baseline(
    frames: list[bytes],
    probes: list[bytes],
    subscribers: int,
    batch: int,
    awaited: bool,
    domain: bool = True,
) -> tuple[float, list[float]]:
    """The bare pipeline: decode -> one stream (buffer 256) -> one consumer -> on a change,
    ``send_nowait`` of one record into S streams (buffer 1024) -> S subscriber tasks.

    ``domain``: the consumer does paneward's domain work and routing, with the same pure
    functions the supervisor calls: the harness's normalize, the routing index (``route``,
    and ``update`` after each step), the catalog's reducer (what each harness can prove
    included; its states in a dict), the transition's cause, and a Transition per published
    step, so that the ratio is the framework's overhead (actors and mailboxes, supervision,
    the hub). Without it: a dict of one word per session (no domain work and no routing at
    all: a reference, not the budget's baseline).
    """
    counter = Counter(subscribers)
    outs: list[MemoryObjectSendStream[object]] = []
    ins: list[MemoryObjectReceiveStream[object]] = []
    for _ in range(subscribers):
        send, receive = anyio.create_memory_object_stream[object](DEFAULT_BUFFER)
        outs.append(send)
        ins.append(receive)
    inbox, receive_inbox = anyio.create_memory_object_stream[Inbound](MAILBOX)
    words: dict[str, str] = {}
    states: dict[SessionKey, SessionState] = {}
    index = RoutingIndex()
    seq = [0]

    def handle_word(message: Inbound) -> None:
        payload = message.payload  # type: ignore[union-attr]
        sid = payload["session_id"]
        new = "working" if payload["hook_event_name"] == "UserPromptSubmit" else "idle"
        if words.get(sid) != new:
            words[sid] = new
            seq[0] += 1
            record = (sid, new, seq[0])
            for out in outs:
                out.send_nowait(record)  # raises WouldBlock: a drop, the run fails

    def handle_domain(message: Inbound) -> None:
        hint = normalize(message)
        assert isinstance(hint, HookHint)
        for delivery in index.route(hint):
            key = delivery.key
            state = states.get(key) or initial_state(key)
            step = CATALOG_REDUCER(state, delivery.message)
            states[key] = step.state
            index.update(state, step.state)
            if step.publish is not None:
                seq[0] += 1
                record = Transition(
                    seq=seq[0],
                    key=key,
                    after=step.publish,
                    cause=cause_of(delivery.message),
                    before=state.activity,
                )
                for out in outs:
                    out.send_nowait(record)  # raises WouldBlock: a drop, the run fails

    handle = handle_domain if domain else handle_word

    async def consumer() -> None:
        while True:
            handle(await receive_inbox.receive())
            while True:  # what is queued, without a scheduler round each
                try:
                    handle(receive_inbox.receive_nowait())
                except anyio.WouldBlock:
                    break

    async def awaited_feed(batch_: list[bytes]) -> None:
        for frame in batch_:
            await inbox.send(decode_inbound(frame))

    async with anyio.create_task_group() as tg:
        tg.start_soon(consumer)
        for i, receive in enumerate(ins):
            tg.start_soon(counter.run, i, receive)
        feed = awaited_feed if awaited else batched_feed(
            lambda frame: inbox.send_nowait(decode_inbound(frame)), batch
        )
        result = await drive(frames, probes, counter, feed)
        tg.cancel_scope.cancel()
    return result


async def bare(
    frames: list[bytes], probes: list[bytes], subscribers: int, batch: int, awaited: bool
) -> tuple[float, list[float]]:
    return await baseline(frames, probes, subscribers, batch, awaited, domain=False)


async def paneward(
    frames: list[bytes], probes: list[bytes], subscribers: int, batch: int, awaited: bool
) -> tuple[float, list[float]]:
    counter = Counter(subscribers)
    async with Supervisor() as sup, anyio.create_task_group() as tg:
        subs = [sup.subscribe("all", snapshot=False) for _ in range(subscribers)]
        for i, sub in enumerate(subs):
            tg.start_soon(counter.run, i, sub)

        def hand(frame: bytes) -> None:
            sup.deliver_nowait(decode_inbound(frame))

        async def inject_feed(batch_: list[bytes]) -> None:
            for frame in batch_:
                await sup.inject(decode_inbound(frame))

        result = await drive(
            frames, probes, counter, inject_feed if awaited else batched_feed(hand, batch)
        )
        stats = sup.statistics()
        assert stats.transitions == len(frames) + len(probes), stats
        assert stats.drops == stats.overflows == 0, stats
        assert all(not s.statistics().overflowed for s in subs)
        tg.cancel_scope.cancel()
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


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument(
        "--batch", type=int, nargs="+", default=[1, 64],
        help="frames deliver_nowait is given per yield (1: one hook per connection)",
    )
    parser.add_argument("--subscribers", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--paths", nargs="+", default=["inject", "deliver_nowait"],
                        choices=["inject", "deliver_nowait"])
    parser.add_argument("--no-rss", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    frames = hook_frames(args.sessions, args.events)
    probes = probe_frames(frames, args.probes)
    print(
        f"events={args.events} sessions={args.sessions} probes={args.probes} "
        f"rounds={args.rounds} python={sys.version.split()[0]}"
    )
    print("| S | pipeline | producer | events/s (median) | x baseline: min / median / max "
          "| per CPU-second x baseline | idle p50 µs | x baseline | idle p99 µs |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    runs = [
        (path, batch)
        for path in args.paths
        for batch in (args.batch if path == "deliver_nowait" else [1])
    ]
    for subscribers in args.subscribers:
        for path, batch in runs:
            awaited = path == "inject"
            feed = "await send per frame" if awaited else f"send_nowait, yield every {batch}"
            names = ("baseline", "no domain work", path)
            fns = (baseline, bare, paneward)
            rates: dict[str, list[float]] = {name: [] for name in names}
            cpu_rates: dict[str, list[float]] = {name: [] for name in names}
            lat: dict[str, list[float]] = {name: [] for name in names}
            for _ in range(args.rounds):
                for name, fn in zip(names, fns, strict=True):
                    gc.collect()
                    rate, latencies = anyio.run(fn, frames, probes, subscribers, batch, awaited)
                    rates[name].append(rate)
                    cpu_rates[name].append(CPU_RATES[-1])
                    lat[name].extend(latencies)
            b50 = statistics.median(lat["baseline"]) * 1e6
            for name in names:
                ratios = sorted(
                    p / b for p, b in zip(rates[name], rates["baseline"], strict=True)
                )
                cpu_ratios = sorted(
                    p / b for p, b in zip(cpu_rates[name], cpu_rates["baseline"], strict=True)
                )
                p50 = statistics.median(lat[name]) * 1e6
                print(
                    f"| {subscribers} | {name} | {feed} | {statistics.median(rates[name]):,.0f} | "
                    f"{ratios[0]:.2f} / {statistics.median(ratios):.2f} / {ratios[-1]:.2f} | "
                    f"{cpu_ratios[0]:.2f} / {statistics.median(cpu_ratios):.2f} / "
                    f"{cpu_ratios[-1]:.2f} | "
                    f"{p50:.0f} | {p50 / b50:.2f} | {p99(lat[name]) * 1e6:.0f} |",
                    flush=True,
                )
    if args.no_rss:
        return
    mem = rss_with_live_sessions(args.sessions)
    print(
        f"\npeak RSS with {args.sessions} live session actors: {mem['peak_mb']:.1f} MB "
        f"(after imports {mem['after_imports_mb']:.1f} MB; "
        f"python -c pass {mem['python_c_pass_mb']:.1f} MB)"
    )


if __name__ == "__main__":
    main()
