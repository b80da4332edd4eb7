"""Benchmark of actors/store.py against raw sqlite3 in the same run.

Run:  .venv/bin/python bench/bench_store.py [--rows 20000] [--repeat 5]

1. Throughput: rows/s of ``record()`` + ``flush()`` through the Store (aiosqlite,
   batched) vs the same rows written by stdlib sqlite3 ``executemany`` in ONE
   transaction (encoding included in both), same schema and pragmas. The journal's
   retention (``--retention`` rows, a quarter of the rows by default) is reached early, so
   the store prunes at every flush after that, as a long-running daemon does; the baseline
   deletes the same excess with the store's own statement in its transaction.
2. Loop blocking: lateness of a 1 ms timer task while the store absorbs the burst,
   vs the same timer on an idle loop, measured in the same run.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.lowlevel

import messages as m
from actors.sinks.store import MIGRATIONS, open_store
from actors.sinks.store.schema import CATALOG_UPSERT_HEAD, CATALOG_UPSERT_TAIL, JOURNAL_PRUNE

T0 = 1_700_000_000_000


def make_transitions(n: int) -> list[m.Transition]:
    out = []
    for seq in range(1, n + 1):
        key = m.SessionKey("claude-code", f"session-{seq % 50:03d}")
        after = m.Activity(
            key=key,
            presence="running",
            turn=("working", "idle", "needs_input")[seq % 3],
            evidence=m.Evidence(source="claude_hook", native_state="PreToolUse",
                                observed_at_ms=T0 + seq, at_ms=T0 + seq,
                                harness_version="2.1.332"),
            pane=f"%{seq % 50}",
        )
        out.append(m.Transition(seq=seq, key=key, after=after, cause="HookHint:PreToolUse"))
    return out


def raw_sqlite(path: Path, transitions: list[m.Transition], retention: int) -> tuple[float, int]:
    """Seconds for stdlib sqlite3 to write the same rows in one transaction, pruning the
    journal to ``retention`` rows, and the rows it pruned."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    for migration in MIGRATIONS:
        for statement in migration.statements:
            conn.execute(statement)

    def journal() -> Iterator[tuple[object, ...]]:
        for t in transitions:
            yield (t.seq, t.key.harness, t.key.session_id, t.after.evidence.at_ms,
                   m.encode(t).decode())

    def catalog() -> Iterator[tuple[object, ...]]:
        newest = {t.key: t for t in transitions}
        for t in newest.values():
            yield (t.key.harness, t.key.session_id, m.encode(t.after).decode(), 1, "tok",
                   t.after.pane, T0, t.seq, None)

    start = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO journal VALUES (?, ?, ?, ?, ?)", journal())
    conn.executemany(CATALOG_UPSERT_HEAD + "(?, ?, ?, ?, ?, ?, ?, ?, ?)" + CATALOG_UPSERT_TAIL,
                     catalog())
    excess = len(transitions) - retention
    pruned = conn.execute(JOURNAL_PRUNE, (excess,)).rowcount if excess > 0 else 0
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed, pruned


async def ticker(lateness: list[float], stop: anyio.Event) -> None:
    while not stop.is_set():
        before = anyio.current_time()
        await anyio.sleep(0.001)
        lateness.append(anyio.current_time() - before - 0.001)


async def through_store(path: Path, transitions: list[m.Transition], chunk: int,
                        retention: int) -> tuple[float, list[float], int, int]:
    """Seconds to record()+flush() everything (a hub-like feed: `chunk` rows per
    loop iteration), the 1 ms timer lateness meanwhile, the batches used and the rows
    pruned."""
    lateness: list[float] = []
    stop = anyio.Event()
    async with open_store(path, batch_ms=50, batch_rows=500,
                          retention_rows=retention) as store:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker, lateness, stop)
            start = time.perf_counter()
            for i in range(0, len(transitions), chunk):
                for t in transitions[i:i + chunk]:
                    store.record(t, owner=(1, "tok"))
                await anyio.lowlevel.checkpoint()
            await store.flush()
            elapsed = time.perf_counter() - start
            stop.set()
        batches = store.statistics().batches
        pruned = store.statistics().pruned
    return elapsed, lateness, batches, pruned


async def idle_lateness(seconds: float) -> list[float]:
    lateness: list[float] = []
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker, lateness, stop)
        await anyio.sleep(seconds)
        stop.set()
    return lateness


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--retention", type=int, default=None,
                        help="journal retention in rows (default: a quarter of --rows)")
    args = parser.parse_args()
    retention = args.retention or args.rows // 4
    pruned: dict[str, int] = {}
    transitions = make_transitions(args.rows)
    raw_rates: list[float] = []
    store_rates: dict[int, list[float]] = {1: [], 50: [], 500: []}
    batches: dict[int, int] = {}
    busy: list[float] = []
    idle: list[float] = []
    busy_max: list[float] = []
    idle_max: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.repeat):
            base = Path(tmp) / f"run{run}"
            raw_s, pruned["raw"] = raw_sqlite(base.with_suffix(".raw.db"), transitions, retention)
            raw_rates.append(args.rows / raw_s)
            for chunk in store_rates:
                elapsed, late, n, pruned[f"store {chunk}"] = await through_store(
                    base.with_suffix(f".store{chunk}.db"), transitions, chunk, retention)
                store_rates[chunk].append(args.rows / elapsed)
                batches[chunk] = n
                if chunk == 50:
                    busy.append(pct(late, 0.99))
                    busy_max.append(max(late))
                    quiet = await idle_lateness(elapsed)
                    idle.append(pct(quiet, 0.99))
                    idle_max.append(max(quiet))
    med = statistics.median
    raw = med(raw_rates)
    print(f"rows={args.rows} repeat={args.repeat} retention={retention} rows (medians over runs);"
          " rows pruned: " + ", ".join(f"{k} {v}" for k, v in pruned.items()))
    print(f"raw sqlite3 executemany, one transaction : {raw:10.0f} rows/s   (baseline 1.00)")
    for chunk, rates in store_rates.items():
        rate = med(rates)
        print(f"Store record()+flush, {chunk:3d} rows/iteration : {rate:10.0f} rows/s   "
              f"ratio {rate / raw:.2f}   batches {batches[chunk]}")
    print(f"1 ms timer lateness p99, idle loop         : {med(idle) * 1e3:7.3f} ms"
          f"   max {med(idle_max) * 1e3:7.3f} ms")
    print(f"1 ms timer lateness p99, store burst (50)  : {med(busy) * 1e3:7.3f} ms"
          f"   max {med(busy_max) * 1e3:7.3f} ms")


if __name__ == "__main__":
    anyio.run(main)
