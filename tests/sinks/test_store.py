"""Tests of actors/sinks/store/: real SQLite files, real processes, real SIGKILL.

The pure re-proof decision is tested without an event loop; everything else opens
real databases under ``tmp_path`` and checks them with an independent stdlib
``sqlite3`` connection.
"""

from __future__ import annotations

import inspect
import os
import shutil
import signal
import sqlite3
import stat
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

import messages as m
from actors.cli.daemon import _probe_owners
from actors.core.seq_mark import (
    MARK_BYTES,
    SLOT_BYTES,
    MarkDamaged,
    Resume,
    SeqMark,
    decode_mark,
    encode_slot,
    resume,
    slot_offset,
)
from actors.core.session.reducer import SessionState, from_activity, reprove
from actors.runtime.hub import StateSnapshot, StateTransition
from actors.sinks.store import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    Owner,
    Restored,
    Store,
    StoreError,
    open_store,
)
from actors.sources import procfs
from tests.support.polling import poll_until

T0 = 1_700_000_000_000


def key(n: int, harness: m.Harness = "claude-code") -> m.SessionKey:
    return m.SessionKey(harness, f"s{n:03d}")


def activity(
    k: m.SessionKey,
    *,
    presence: m.Presence = "running",
    turn: m.Turn = "working",
    attention: m.Attention | None = None,
    at: int = T0,
    native: str | None = None,
    pane: str | None = None,
) -> m.Activity:
    return m.Activity(
        key=k,
        presence=presence,
        turn=turn,
        attention=attention,
        pane=pane,
        evidence=m.Evidence(
            source="claude_registry",
            native_state=native,
            observed_at_ms=at,
            at_ms=at,
            harness_version="2.1.332",
        ),
    )


def transition(seq: int, k: m.SessionKey, **kw: Any) -> m.Transition:
    turns: tuple[m.Turn, ...] = ("working", "idle", "needs_input", "unknown")
    kw.setdefault("turn", turns[seq % 4])
    kw.setdefault("at", T0 + seq)
    kw.setdefault("native", f"n{seq}")
    return m.Transition(seq=seq, key=k, after=activity(k, **kw), cause=f"test:{seq}")


def db_query(path: Path, sql: str, params: tuple[object, ...] = ()) -> list[Any]:
    """An independent stdlib connection: what is really on disk (committed)."""
    conn = sqlite3.connect(path, isolation_level=None)  # autocommit: writes land at once
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


async def wait_until(predicate: Callable[[], bool], what: str) -> None:
    """The store exposes counters, not events: poll them (tests.support.polling)."""
    await poll_until(predicate, what, within=10)


def stat_token(pid: int) -> str:
    """Field 22 of /proc/<pid>/stat, read independently of actors.sources.procfs."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()[19]


# ----------------------------------------------- re-proof (pure:
# actors.core.session.reducer.reprove)


def state_of(a: m.Activity, owner: Owner | None) -> SessionState:
    """A restored state as the store gives it back: its activity and recorded owner."""
    state = from_activity(a)
    if owner is not None:
        state = msgspec.structs.replace(state, owner_pid=owner[0], owner_token=owner[1])
    return state


def test_reprove_keeps_live_same_incarnation_and_persisted_silently() -> None:
    live = activity(key(1), turn="working", pane="%1")
    down = activity(key(2), presence="persisted", turn="unknown")
    stopping = activity(key(3), presence="shutting_down", turn="unknown")
    tokens = {100: "tok100"}
    proofs = [
        reprove(state_of(a, o), tokens.get(o[0]), T0)
        for a, o in ((live, (100, "tok100")), (down, (555, "x")), (stopping, (100, "tok100")))
    ]
    assert [p.step.publish for p in proofs] == [None, None, None]
    assert [p.step.state.activity for p in proofs] == [live, down, stopping]
    assert [p.live for p in proofs] == [True, False, True]
    # The daemon probes each distinct owner pid once, and never a persisted session's.
    restored = Restored(
        (state_of(live, (100, "tok100")), state_of(down, (555, "x")),
         state_of(stopping, (100, "tok100"))),
        last_seq=7,
    )
    assert set(_probe_owners(restored)) == {100}


@pytest.mark.parametrize(
    ("probed", "reason"),
    [(None, "owner_dead"), ("other-token", "owner_recycled")],
)
def test_reprove_corrects_dead_or_recycled_owner(probed: str | None, reason: str) -> None:
    needs = activity(
        key(1),
        turn="needs_input",
        attention=m.Attention(kind="needs_input", reason="permission: Bash", since_ms=T0),
        pane="%4",
    )
    done = activity(
        key(2), turn="idle", attention=m.Attention(kind="turn_done", reason="done", since_ms=T0)
    )
    failed = activity(
        key(3), turn="idle", attention=m.Attention(kind="failed", reason="exit 1", since_ms=T0)
    )
    proofs = [reprove(state_of(a, (9, "t")), probed, T0 + 5) for a in (needs, done, failed)]
    assert [p.live for p in proofs] == [False] * 3
    assert [p.cause for p in proofs] == [f"persisted_store:{reason}"] * 3
    ev = m.Evidence(source="persisted_store", observed_at_ms=T0 + 5)
    assert [p.step.publish for p in proofs] == [
        # needs_input cannot outlive its process; the other attention items stay open
        msgspec.structs.replace(needs, presence="persisted", turn="unknown", attention=None,
                                evidence=ev),
        msgspec.structs.replace(done, presence="persisted", turn="unknown", evidence=ev),
        msgspec.structs.replace(failed, presence="persisted", turn="unknown", evidence=ev),
    ]
    assert proofs[0].step.state.pane == "%4"


def test_reprove_without_recorded_owner_cannot_prove_running() -> None:
    proof = reprove(state_of(activity(key(1)), None), None, T0)
    assert proof.cause == "persisted_store:owner_unknown"
    assert proof.step.publish is not None
    assert (proof.step.publish.presence, proof.step.publish.turn) == ("persisted", "unknown")


def test_reprove_with_a_real_child_process() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        token = stat_token(child.pid)
        a = activity(key(1), turn="working")
        restored = state_of(a, (child.pid, token))

        alive = reprove(restored, procfs.probe(child.pid), T0)
        assert alive.live and alive.step.publish is None
        assert alive.step.state.activity == a

        # Same live pid, but the recorded token is another incarnation's (our own,
        # a real token): exactly what a recycled pid looks like to the probe.
        other = state_of(a, (child.pid, stat_token(os.getpid())))
        recycled = reprove(other, procfs.probe(child.pid), T0)
        assert recycled.cause == "persisted_store:owner_recycled"
        assert recycled.step.publish is not None
        assert recycled.step.publish.presence == "persisted"
    finally:
        assert child.stdin is not None
        child.stdin.close()
        assert child.wait(timeout=30) == 0

    dead = reprove(restored, procfs.probe(child.pid), T0)
    assert dead.cause == "persisted_store:owner_dead"
    assert dead.step.publish == msgspec.structs.replace(
        a,
        presence="persisted",
        turn="unknown",
        evidence=m.Evidence(source="persisted_store", observed_at_ms=T0),
    )


# --------------------------------------------------------------------------- round trip


async def test_round_trip_1000_transitions_over_50_keys(tmp_path: Path) -> None:
    path = tmp_path / "state" / "paneward" / "paneward.db"
    sent = [transition(seq, key(seq % 50)) for seq in range(1, 1001)]
    owners = {key(n): (10_000 + n, f"tok{n}") for n in range(50)}
    with anyio.fail_after(30):
        async with open_store(path, batch_ms=10, batch_rows=64) as store:
            for i, t in enumerate(sent):
                store.record(t, owner=owners[t.key])
                if i % 100 == 99:
                    await anyio.lowlevel.checkpoint()  # the writer interleaves, as with a live hub
        # Reopen: everything must have been flushed by the close.
        async with open_store(path) as store:
            restored = await store.load()
            since_0 = await store.journal_since(0, limit=5_000)
            since_990 = await store.journal_since(990)
            paged = await store.journal_since(500, limit=3)
            bounds = await store.journal_bounds()

    newest = {t.key: t.after for t in sent}  # later seq wins
    assert len(restored.activities) == 50
    assert {a.key: a for a in restored.activities} == newest
    assert dict(restored.owners) == owners
    assert restored.last_seq == 1000
    assert restored.skipped == 0
    assert since_0 == sent
    assert since_990 == sent[990:]
    assert [t.seq for t in paged] == [501, 502, 503]
    assert bounds == (1, 1000)
    # The catalog rows are what the issue names, with the newest seq per key.
    rows = db_query(path, "SELECT harness, session_id, owner_pid, owner_start_token, "
                    "last_seen_ms, seq FROM sessions ORDER BY session_id")
    assert rows[0] == ("claude-code", "s000", 10_000, "tok0", T0 + 1000, 1000)
    assert rows[49] == ("claude-code", "s049", 10_049, "tok49", T0 + 999, 999)


async def test_seq_before_finds_where_a_time_window_starts(tmp_path: Path) -> None:
    """``paneward top``'s last hour: the seq after which the rows of ``at_ms`` and later start,
    by the evidence time each row is filed under, unflushed rows included (it flushes)."""
    path = tmp_path / "state" / "paneward" / "paneward.db"
    with anyio.fail_after(30):
        async with open_store(path, batch_ms=60_000) as store:
            assert await store.seq_before(T0) == 0  # an empty journal
            for seq in range(1, 11):
                store.record(transition(seq, key(seq % 3), at=T0 + 1000 * seq))
            # A row filed under an older time after newer ones (a focus keeps its evidence's
            # time): the window starts at the first row in it, and later ones follow by seq.
            store.record(transition(11, key(1), at=T0 + 1000))
            at_5 = await store.seq_before(T0 + 5000)
            at_5_and_a_bit = await store.seq_before(T0 + 5001)
            before_all = await store.seq_before(T0)
            after_all = await store.seq_before(T0 + 60_000)
            journal = await store.journal_since(at_5)
    assert (at_5, at_5_and_a_bit, before_all, after_all) == (4, 5, 0, 11)
    assert [t.seq for t in journal] == [5, 6, 7, 8, 9, 10, 11]


async def test_retention_keeps_at_most_the_newest_rows(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    with anyio.fail_after(30):
        async with open_store(path, batch_ms=60_000, batch_rows=10**6,
                              retention_rows=100) as store:
            for seq in range(1, 1001):
                store.record(transition(seq, key(seq % 7)))
                if seq % 37 == 0:
                    await store.flush()
                    count, low, high = db_query(
                        path, "SELECT count(*), min(seq), max(seq) FROM journal")[0]
                    assert count == min(seq, 100)
                    assert (low, high) == (max(1, seq - 99), seq)
            await store.flush()
            assert await store.journal_bounds() == (901, 1000)
            assert store.statistics().pruned == 900
            assert store.statistics().written == 1000
        # The bound holds across a reopen with a smaller retention: the existing rows count.
        async with open_store(path, retention_rows=50) as store:
            store.record(transition(1001, key(1)))
            await store.flush()
            assert await store.journal_bounds() == (952, 1001)
            assert store.statistics().pruned == 51  # 100 old + 1 new - 50 kept
    assert db_query(path, "SELECT count(*) FROM journal") == [(50,)]
    # Retention never touches the catalog: all 7 keys are still known.
    assert db_query(path, "SELECT count(*) FROM sessions") == [(7,)]


# --------------------------------------------------------------------------- batching


async def test_record_is_sync_and_writes_are_batched(tmp_path: Path) -> None:
    assert not inspect.iscoroutinefunction(Store.record)
    assert inspect.signature(Store.record).return_annotation == "None"
    path = tmp_path / "b.db"
    with anyio.fail_after(30):
        # Size trigger only (the time window is a minute): every flush the writer
        # makes holds at least batch_rows rows.
        async with open_store(path, batch_ms=60_000, batch_rows=500) as store:
            for seq in range(1, 5001):
                store.record(transition(seq, key(seq % 50)))
                if seq % 100 == 0:
                    await anyio.lowlevel.checkpoint()
            await wait_until(lambda: store.statistics().written >= 4500, "size-triggered flushes")
            await store.flush()
            st = store.statistics()
    assert st.recorded == st.written == 5000
    assert 1 <= st.batches <= 11  # 5000 rows in at most 10 full batches + the final one
    assert st.catalog_writes <= 50 * st.batches
    assert (st.pending, st.in_flight, st.dropped, st.flush_errors) == (0, 0, 0, 0)
    assert st.last_flushed_seq == 5000
    assert db_query(path, "SELECT count(*) FROM journal") == [(5000,)]


async def test_transactions_are_bounded_and_follow_each_other_at_once(tmp_path: Path) -> None:
    """5,250 rows recorded in one go: the writer commits them 500 at a time, the next
    transaction at once while rows wait (the window is a minute: only the size and the
    rows left over start them), never everything pending in one transaction, which a
    kill -9 could lose all of."""
    path = tmp_path / "bounded.db"
    sizes: list[int] = []
    with anyio.fail_after(30):
        async with open_store(path, batch_ms=60_000, batch_rows=500) as store:
            commit = store._writer._commit

            def spy(rows: Any, gaps: Any, count: int) -> tuple[int, int, int]:
                sizes.append(len(rows))
                return commit(rows, gaps, count)

            store._writer._commit = spy  # type: ignore[method-assign, assignment]
            for seq in range(1, 5251):
                store.record(transition(seq, key(seq % 50)))
            await wait_until(lambda: store.statistics().written == 5250, "every row")
            st = store.statistics()
    assert sizes == [500] * 10 + [250]
    assert st.batches == 11 and st.in_flight == 0


async def test_a_batch_that_cannot_be_written_is_dropped_as_a_gap(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    with anyio.fail_after(30):
        async with open_store(path, batch_ms=10, busy_timeout_ms=20) as store:
            locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            try:
                await anyio.to_thread.run_sync(locker.execute, "BEGIN IMMEDIATE")
                for seq in range(1, 8):
                    store.record(transition(seq, key(seq)))
                await wait_until(lambda: store.statistics().dropped == 7, "the dropped batch")
                # Still locked: the gap is known in memory already.
                pending = await store.gaps_between(0, 10)
                await anyio.to_thread.run_sync(locker.execute, "ROLLBACK")
            finally:
                locker.close()
            store.record(transition(8, key(8)))
            await store.flush()
            stored = await store.gaps_between(0, 10)
            st = store.statistics()
    assert [(g.next_seq, g.dropped, g.reason) for g in pending] == [(1, 7, "write_failed")]
    assert [(g.next_seq, g.dropped, g.reason) for g in stored] == [(1, 7, "write_failed")]
    assert st.flush_errors >= 3 and st.written == 1
    assert db_query(path, "SELECT next_seq, dropped, reason FROM gaps") == [
        (1, 7, "write_failed")
    ]


async def test_backpressure_holds_intake_one_batch_behind_and_never_forever(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bp.db"
    published = 0
    with anyio.fail_after(30):
        async with open_store(path, batch_ms=60_000, batch_rows=100,
                              busy_timeout_ms=20) as store:
            gate = store.backpressure(lambda: published, stall_s=0.3)
            # A locker holds the write lock: nothing can commit.
            locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            try:
                await anyio.to_thread.run_sync(locker.execute, "BEGIN IMMEDIATE")
                for seq in range(1, 100):
                    published = seq
                    store.record(transition(seq, key(seq % 5)))
                assert not gate.closed()  # 99 ahead: less than one batch
                published = 100
                store.record(transition(100, key(0)))
                assert gate.closed()  # one batch ahead
                await gate.wait()  # returns although nothing committed: the store is stuck
                assert (gate.waits, gate.stalls) == (1, 1)
                assert store.statistics().backpressure_stalls == 1
                assert not gate.closed()  # and stays open until the store moves again
                await anyio.to_thread.run_sync(locker.execute, "ROLLBACK")
            finally:
                locker.close()
            await store.flush()
            assert store.handled_seq == 100 and not gate.closed()
            for seq in range(101, 201):
                published = seq
                store.record(transition(seq, key(seq % 5)))
            assert gate.closed()
            await gate.wait()  # the size trigger commits the batch: intake may go on
            assert gate.stalls == 1 and not gate.closed()
            assert store.handled_seq == 200


async def test_retention_shows_as_a_gap_from_since(tmp_path: Path) -> None:
    path = tmp_path / "rg.db"
    with anyio.fail_after(30):
        async with open_store(path, retention_rows=10) as store:
            for seq in range(1, 31):
                store.record(transition(seq, key(seq % 3)))
            await store.flush()
            assert [(g.next_seq, g.dropped, g.reason) for g in await store.gaps_between(5, 30)
                    ] == [(6, 15, "retention")]
            assert await store.gaps_between(20, 30) == []


async def test_time_window_flushes_without_being_asked(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    with anyio.fail_after(30):
        async with open_store(path, batch_ms=20, batch_rows=500) as store:
            for seq in (1, 2, 3):
                store.record(transition(seq, key(seq)))
            assert store.statistics().pending == 3
            await wait_until(lambda: store.statistics().written == 3, "window flush")
            assert db_query(path, "SELECT seq FROM journal ORDER BY seq") == [(1,), (2,), (3,)]
            assert store.statistics().batches == 1


async def test_pending_cap_counts_drops(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        async with open_store(tmp_path / "c.db", batch_ms=60_000, max_pending=10) as store:
            for seq in range(1, 16):
                store.record(transition(seq, key(0)))
            st = store.statistics()
            # 10 rows wait, and one gap row saying which 5 were dropped.
            assert (st.recorded, st.pending, st.dropped) == (15, 11, 5)
            await store.flush()
            assert store.statistics().written == 10
            assert [t.seq for t in await store.journal_since(0)] == list(range(1, 11))
            (gap,) = await store.gaps_between(0, 15)
            assert (gap.next_seq, gap.dropped, gap.reason) == (11, 5, "store_full")


async def test_close_flushes_even_when_cancelled(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    with anyio.fail_after(30):
        with anyio.CancelScope() as scope:
            async with open_store(path, batch_ms=60_000) as store:
                for seq in range(1, 101):
                    store.record(transition(seq, key(seq % 3)))
                scope.cancel()
                await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert db_query(path, "SELECT count(*), max(seq) FROM journal") == [(100, 100)]
    assert store.statistics().written == 100
    with pytest.raises(StoreError, match="closed store"):
        store.record(transition(101, key(0)))


async def test_duplicate_and_regressing_seq_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    first = transition(2, key(1), turn="working")
    with anyio.fail_after(30):
        async with open_store(path) as store:
            store.record(transition(1, key(1)))
            store.record(first)
            await store.flush()
            store.record(transition(2, key(1), turn="idle"))  # the same seq again
            await store.flush()
            st = store.statistics()
            assert (st.written, st.duplicates, st.seq_regressions) == (2, 1, 1)
            assert await store.journal_since(1) == [first]  # the journal kept the first one


async def test_invalid_input_is_rejected_counted_and_changes_nothing(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        async with open_store(tmp_path / "i.db") as store:
            bad: list[tuple[Callable[[], None], type[Exception], str]] = [
                (lambda: store.record("nope"), m.MessageError, "takes a Transition"),  # type: ignore[arg-type]
                (lambda: store.record(transition(1, key(1)), owner=(0, "t")), m.MessageError,
                 "invalid owner"),
                (lambda: store.record(transition(1, key(1)), owner=(True, "t")), m.MessageError,
                 "invalid owner"),
                (lambda: store.record(transition(1, key(1)), owner=(5, "")), m.MessageError,
                 "invalid owner"),
                (lambda: store.record_snapshot(transition(1, key(1))),  # type: ignore[arg-type]
                 m.MessageError, "takes a Snapshot"),
                (lambda: store.record_gap(None), m.MessageError,  # type: ignore[arg-type]
                 "takes an Overflow"),
            ]
            for call, exc, text in bad:
                with pytest.raises(exc, match=text):
                    call()
            st = store.statistics()
            assert (st.rejected, st.recorded, st.pending) == (len(bad), 0, 0)
            with pytest.raises(ValueError, match="limit"):
                await store.journal_since(0, limit=0)
    with pytest.raises(ValueError, match="batch_rows"):
        async with open_store(tmp_path / "j.db", batch_rows=0):
            pass


# --------------------------------------------------------------------------- subscription


async def test_run_subscription_snapshot_transition_overflow(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    snap = m.Snapshot(seq=10, activities=(activity(key(1)), activity(key(2)), activity(key(3))))
    t11 = transition(11, key(2))
    owners = {key(1): (41, "a"), key(2): (42, "b")}
    # The items of a states subscription: each activity with the reducer state behind it
    # (key(3) was published without one: it is kept without an owner).
    items: list[object] = [
        StateSnapshot(
            snap,
            (state_of(snap.activities[0], owners[key(1)]),
             state_of(snap.activities[1], owners[key(2)]), None),
        ),
        StateTransition(t11, state_of(t11.after, owners[key(2)])),
        m.Unmapped(harness="codex", event="x", keys=("a",), at_ms=T0),
        m.Overflow(next_seq=12, dropped=5, reason="subscriber lagged"),
    ]

    send, receive = anyio.create_memory_object_stream[object](10)
    with anyio.fail_after(30):
        async with open_store(path) as store:
            with send:
                for item in items:
                    send.send_nowait(item)
            with receive:
                await store.run_subscription(receive)
            restored = await store.load()
            st = store.statistics()
    assert (st.snapshot_rows, st.recorded, st.ignored, st.gaps, st.gap_transitions) == (
        3, 1, 1, 1, 5)
    assert {a.key: a for a in restored.activities} == {
        key(1): snap.activities[0], key(2): t11.after, key(3): snap.activities[2]}
    assert dict(restored.owners) == owners
    assert restored.last_seq == 11
    assert db_query(path, "SELECT next_seq, dropped, reason FROM gaps") == [
        (12, 5, "subscriber lagged")]
    assert db_query(path, "SELECT session_id, seq FROM sessions ORDER BY session_id") == [
        ("s001", 10), ("s002", 11), ("s003", 10)]


# --------------------------------------------------------------------------- files, schema


V1_SCHEMA = (
    # What a version-1 paneward database holds, written out literally: the test
    # must not build "v1" with the code under test.
    f"PRAGMA application_id = {APPLICATION_ID}",
    """CREATE TABLE sessions (harness TEXT NOT NULL, session_id TEXT NOT NULL,
       activity TEXT NOT NULL, owner_pid INTEGER, owner_start_token TEXT, pane TEXT,
       last_seen_ms INTEGER NOT NULL, seq INTEGER NOT NULL,
       PRIMARY KEY (harness, session_id)) WITHOUT ROWID""",
    """CREATE TABLE journal (seq INTEGER PRIMARY KEY, harness TEXT NOT NULL,
       session_id TEXT NOT NULL, at_ms INTEGER, transition TEXT NOT NULL)""",
    "PRAGMA user_version = 1",
)


def write_v1(path: Path, t: m.Transition, owner: Owner) -> None:
    conn = sqlite3.connect(path)
    try:
        for statement in V1_SCHEMA:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO journal VALUES (?, ?, ?, ?, ?)",
            (t.seq, t.key.harness, t.key.session_id, T0, m.encode(t).decode()),
        )
        conn.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (t.key.harness, t.key.session_id, m.encode(t.after).decode(), *owner, None, T0,
             t.seq),
        )
        conn.commit()
    finally:
        conn.close()


async def test_v1_database_migrates_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    t = transition(41, key(1))
    write_v1(path, t, (77, "tok"))
    with anyio.fail_after(30):
        async with open_store(path) as store:
            restored = await store.load()
            assert restored.activities == (t.after,)
            assert dict(restored.owners) == {key(1): (77, "tok")}
            assert restored.last_seq == 41
            assert await store.journal_since(0) == [t]
            store.record_gap(m.Overflow(next_seq=42, dropped=1, reason="lag"))  # v2 table
            await store.flush()
    assert db_query(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert SCHEMA_VERSION == 4
    assert db_query(path, "SELECT next_seq FROM gaps") == [(42,)]
    assert db_query(path, "PRAGMA journal_mode") == [("wal",)]
    # v4: the catalog is a rowid table (its rows are over a kilobyte), still one row per key.
    [(sql,)] = db_query(path, "SELECT sql FROM sqlite_master WHERE name = 'sessions'")
    assert "WITHOUT ROWID" not in sql and "UNIQUE (harness, session_id)" in sql
    assert db_query(path, "SELECT harness, session_id, owner_pid FROM sessions") == [
        (key(1).harness, key(1).session_id, 77)
    ]


async def test_a_v3_catalog_moves_to_v4_whole(tmp_path: Path) -> None:
    """A v3 store (the WITHOUT ROWID catalog with its states) opened by this version: every
    catalog row, state included, and every journal row come back as they were."""
    path = tmp_path / "v3.db"
    with anyio.fail_after(30):
        async with open_store(path) as store:
            for seq in range(1, 21):
                store.record(transition(seq, key(seq % 5)), owner=(100 + seq % 5, "t"))
            await store.flush()
        before = db_query(path, "SELECT * FROM sessions ORDER BY harness, session_id")
        # Back to v3 as v3 wrote it (the WITHOUT ROWID table), then reopen: migration 4 runs.
        db_query(path, "ALTER TABLE sessions RENAME TO sessions_v4_made")
        db_query(path, """CREATE TABLE sessions (harness TEXT NOT NULL,
            session_id TEXT NOT NULL, activity TEXT NOT NULL, owner_pid INTEGER,
            owner_start_token TEXT, pane TEXT, last_seen_ms INTEGER NOT NULL,
            seq INTEGER NOT NULL, state TEXT, PRIMARY KEY (harness, session_id)) WITHOUT ROWID""")
        db_query(path, "INSERT INTO sessions SELECT * FROM sessions_v4_made")
        db_query(path, "DROP TABLE sessions_v4_made")
        db_query(path, "PRAGMA user_version = 3")
        async with open_store(path) as store:
            restored = await store.load()
            journal = await store.journal_since(0)
    assert db_query(path, "PRAGMA user_version") == [(4,)]
    assert db_query(path, "SELECT * FROM sessions ORDER BY harness, session_id") == before
    assert len(restored.activities) == 5 and [t.seq for t in journal] == list(range(1, 21))


async def test_failed_migration_leaves_the_old_version_intact(tmp_path: Path) -> None:
    path = tmp_path / "v1-broken.db"
    write_v1(path, transition(1, key(1)), (77, "tok"))
    # A v1 file that (against the rules) already has a `gaps` table: step 2 fails.
    db_query(path, "CREATE TABLE gaps (x)")
    with anyio.fail_after(30), pytest.raises(StoreError, match="already exists"):
        async with open_store(path):
            pass
    assert db_query(path, "PRAGMA user_version") == [(1,)]
    assert db_query(path, "SELECT count(*) FROM journal") == [(1,)]


async def test_newer_schema_refuses_to_open(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with anyio.fail_after(30):
        async with open_store(path):
            pass
    db_query(path, f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    newer = rf"schema version {SCHEMA_VERSION + 5}, newer"
    with anyio.fail_after(30), pytest.raises(StoreError, match=newer):
        async with open_store(path):
            pass
    assert db_query(path, "PRAGMA user_version") == [(SCHEMA_VERSION + 5,)]


async def test_garbage_file_gives_a_clear_error_and_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    junk = b"this is not sqlite\n" * 300
    path.write_bytes(junk)
    with anyio.fail_after(30):
        for _ in range(2):  # a retrying daemon gets the same clear error, no crash loop
            with pytest.raises(StoreError, match=r"not a usable paneward store.*move it aside"):
                async with open_store(path):
                    pass
    assert path.read_bytes() == junk


async def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    db_query(path, "CREATE TABLE notes (body TEXT)")
    before = path.read_bytes()
    with anyio.fail_after(30), pytest.raises(StoreError, match="did not create"):
        async with open_store(path):
            pass
    assert db_query(path, "PRAGMA user_version") == [(0,)]
    # Checked before anything is written: the file was not even switched to WAL (header
    # bytes 18-19 are 1 for a rollback journal, 2 for WAL), and no byte of it changed.
    assert path.read_bytes() == before
    assert before[18:20] == b"\x01\x01"
    assert not path.with_name(path.name + "-wal").exists()


async def test_creates_private_dirs_and_file_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "state" / "paneward" / "paneward.db"
    old = os.umask(0o022)
    try:
        with anyio.fail_after(30):
            async with open_store(path) as store:
                store.record(transition(1, key(1)))
                await store.flush()
                wal = path.with_name(path.name + "-wal")
                assert wal.exists()
                assert stat.S_IMODE(wal.stat().st_mode) == 0o600
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert db_query(path, "PRAGMA journal_mode") == [("wal",)]
    assert db_query(path, "PRAGMA application_id") == [(APPLICATION_ID,)]


async def test_undecodable_rows_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "u.db"
    with anyio.fail_after(30):
        async with open_store(path) as store:
            for seq in (1, 2, 3):
                store.record(transition(seq, key(seq)))
    db_query(path, "UPDATE sessions SET activity = '{\"type\":\"Activity\"}' WHERE seq = 2")
    conn = sqlite3.connect(path)
    conn.execute("UPDATE journal SET transition = 'garbage' WHERE seq = 3")
    conn.commit()
    conn.close()
    with anyio.fail_after(30):
        async with open_store(path) as store:
            restored = await store.load()
            journal = await store.journal_since(0)
            assert store.statistics().decode_errors == 2
    assert restored.skipped == 1
    assert [a.key for a in restored.activities] == [key(1), key(3)]
    assert restored.last_seq == 3
    assert [t.seq for t in journal] == [1, 2]


# --------------------------------------------------------------------------- failures


async def test_locked_database_flush_fails_is_counted_and_retried(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with anyio.fail_after(30):
        async with open_store(path, batch_ms=60_000, busy_timeout_ms=50) as store:
            # A real second writer holds the write lock (another process would do the same).
            locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            try:
                await anyio.to_thread.run_sync(locker.execute, "BEGIN IMMEDIATE")
                for seq in (1, 2, 3):
                    store.record(transition(seq, key(seq)))
                await store.flush()  # one attempt, fails on the lock, keeps the rows
                st = store.statistics()
                assert (st.flush_errors, st.written, st.pending, st.dropped) == (1, 0, 3, 0)
                await anyio.to_thread.run_sync(locker.execute, "ROLLBACK")
            finally:
                locker.close()
            await store.flush()
            st = store.statistics()
            assert (st.flush_errors, st.written, st.pending, st.batches) == (1, 3, 0, 1)
    assert db_query(path, "SELECT seq FROM journal ORDER BY seq") == [(1,), (2,), (3,)]


# --------------------------------------------------------------------------- kill -9

CHILD = r"""
import mmap, os, struct, sys
from pathlib import Path

import anyio

import messages as m
from actors.sinks.store import open_store

T0 = 1_700_000_000_000


async def main() -> None:
    fd = os.open(sys.argv[2], os.O_RDWR)
    shared = mmap.mmap(fd, 16)
    async with open_store(Path(sys.argv[1]), batch_ms=20, batch_rows=500,
                          retention_rows=1_000_000) as store:
        batches = 0
        for seq in range(1, 10_001):
            key = m.SessionKey("codex", f"k{seq % 50}")
            after = m.Activity(key=key, presence="running", turn="working",
                               evidence=m.Evidence(source="codex_rollout", native_state=str(seq),
                                                   observed_at_ms=T0 + seq))
            store.record(m.Transition(seq=seq, key=key, after=after, cause="burst"),
                         owner=(os.getpid(), "tok"))
            # What a kill right now could lose, according to the store itself.
            struct.pack_into("<qq", shared, 0, seq, store.statistics().unflushed)
            if seq % 50 == 0:
                # Hook events arrive over time, not all at once: this paces the
                # workload (it synchronises nothing).
                await anyio.sleep(0.002)
                st = store.statistics()
                if st.batches != batches:
                    batches = st.batches
                    print("ack", st.last_flushed_seq, flush=True)
        print("done", flush=True)
        await anyio.sleep_forever()


anyio.run(main)
"""


async def test_kill_9_during_a_burst_loses_at_most_the_unflushed_window(tmp_path: Path) -> None:
    db = tmp_path / "kill.db"
    shm = tmp_path / "progress"
    shm.write_bytes(bytes(16))
    acks: list[int] = []
    with anyio.fail_after(60):
        async with await anyio.open_process(
            [sys.executable, "-c", CHILD, str(db), str(shm)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as proc:
            killed = False
            try:
                assert proc.stdout is not None
                lines = BufferedByteReceiveStream(proc.stdout)
                while len(acks) < 3:
                    word, *rest = (await lines.receive_until(b"\n", 1024)).split()
                    assert word == b"ack", word
                    acks.append(int(rest[0]))
                proc.send_signal(signal.SIGKILL)
                killed = True
            finally:
                # Signal at most once: Popen.send_signal() polls first, and a second
                # signal after the exit could reap the child behind asyncio's watcher.
                if not killed:
                    proc.kill()
                code = await proc.wait()
            assert proc.stderr is not None
            err = await proc.stderr.receive() if code != -signal.SIGKILL else b""
    assert code == -signal.SIGKILL, err
    recorded, unflushed = struct.unpack("<qq", shm.read_bytes())
    assert recorded < 10_000, "the kill must land mid-burst"
    assert acks == sorted(acks)

    assert db_query(db, "PRAGMA integrity_check") == [("ok",)]
    seqs = [s for (s,) in db_query(db, "SELECT seq FROM journal ORDER BY seq")]
    top = seqs[-1]
    # Every batch is all-or-nothing: the journal is an unbroken prefix of the burst...
    assert seqs == list(range(1, top + 1))
    # ...that holds everything acknowledged as flushed...
    assert top >= acks[-1]
    # ...and misses no more than the store's own unflushed window at the kill.
    assert 0 <= recorded - top <= unflushed
    # The catalog is consistent with the journal: each key's row is its newest journal row.
    newest = dict(db_query(db, "SELECT session_id, max(seq) FROM journal GROUP BY session_id"))
    catalog = db_query(db, "SELECT session_id, seq, activity FROM sessions")
    assert len(catalog) == 50
    for session_id, seq, text in catalog:
        assert seq == newest[session_id]
        (journal_text,) = db_query(db, "SELECT transition FROM journal WHERE seq = ?", (seq,))[0]
        decoded = m.decode_outbound(journal_text)
        assert isinstance(decoded, m.Transition)
        assert m.decode_outbound(text) == decoded.after

    # Restart: the store opens the recovered file and picks up where it was.
    with anyio.fail_after(30):
        async with open_store(db) as store:
            restored = await store.load()
    assert restored.last_seq == top
    assert len(restored.activities) == 50
    assert all(owner[1] == "tok" for owner in restored.owners.values())


@pytest.fixture(autouse=True)
def _no_leaked_children() -> Iterator[None]:
    yield
    # Every test reaps what it spawns: a leftover child (or zombie) is a test bug.
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
    assert children == []


async def test_rows_left_at_a_failed_close_are_counted_as_dropped(tmp_path: Path) -> None:
    path = tmp_path / "cl.db"
    locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        with anyio.fail_after(30):
            async with open_store(path, batch_ms=60_000, busy_timeout_ms=50,
                                  close_timeout_s=0.5) as store:
                await anyio.to_thread.run_sync(locker.execute, "BEGIN IMMEDIATE")
                for seq in (1, 2, 3):
                    store.record(transition(seq, key(seq)))
            st = store.statistics()
            assert (st.flush_errors, st.written, st.dropped, st.pending) == (1, 0, 3, 0)
            await anyio.to_thread.run_sync(locker.execute, "ROLLBACK")
    finally:
        locker.close()
    assert db_query(path, "SELECT count(*) FROM journal") == [(0,)]


# --------------------------------------------------------------------------- with the real hub


@pytest.fixture
def live_child() -> Iterator[subprocess.Popen[bytes]]:
    """A real process that lives until the test ends (it reads stdin until EOF)."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        yield child
    finally:
        assert child.stdin is not None
        child.stdin.close()
        assert child.wait(timeout=30) == 0


async def test_load_deletes_sessions_that_ended_longer_ago_than_the_retention(
    tmp_path: Path,
) -> None:
    """A catalog row whose session ended (persisted) and was not seen for ``ended_retention_ms``
    is deleted at load, not restored; a row just inside the retention, and a running row of any
    age (its owner is re-proven by the caller), are restored. The seq still counts."""
    path = tmp_path / "ended.db"
    day = 24 * 3600 * 1000
    now = T0 + 30 * day
    rows = [
        transition(1, key(1), presence="persisted", turn="unknown", at=now - 8 * day),
        transition(2, key(2), presence="persisted", turn="unknown", at=now - 7 * day + 1),
        transition(3, key(3), presence="running", turn="idle", at=now - 20 * day),
        transition(9, key(4), presence="persisted", turn="unknown", at=now - 9 * day),
    ]
    with anyio.fail_after(30):
        async with open_store(path, clock=lambda: now) as store:
            for t in rows:
                store.record(t, owner=(1, "tok"))
            await store.flush()
        async with open_store(path, clock=lambda: now, ended_retention_ms=7 * day) as store:
            restored = await store.load()
            assert store.statistics().ended_pruned == 2
            again = await store.load()
            journal = await store.journal_since(0)
    assert sorted(a.key.session_id for a in restored.activities) == ["s002", "s003"]
    assert restored.ended_pruned == 2
    assert restored.last_seq == 9  # the deleted row (seq 9) still numbers what comes next
    # Deleted from the file, not only skipped; the journal keeps its rows until its own retention.
    assert sorted(a.key.session_id for a in again.activities) == ["s002", "s003"]
    assert again.ended_pruned == 0
    assert [t.seq for t in journal] == [1, 2, 3, 9]
    with pytest.raises(ValueError, match="ended_retention_ms"):
        async with open_store(tmp_path / "bad.db", ended_retention_ms=-1):
            pass


@pytest.fixture
def dead_pid() -> int:
    """The pid of a real process that has exited and been reaped."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    assert gone.wait(timeout=30) == 0
    return gone.pid


async def test_restart_through_the_real_hub_reproves_before_publishing(
    tmp_path: Path, live_child: subprocess.Popen[bytes], dead_pid: int
) -> None:
    """Daemon life 1 persists through a real hub; life 2 re-proves through a real Supervisor,
    then publishes only the corrections."""
    from actors.cli.daemon import _probe_owners
    from actors.runtime.hub import BroadcastHub
    from supervisor import Supervisor

    path = tmp_path / "restart.db"
    live_owner = (live_child.pid, stat_token(live_child.pid))
    owners = {key(1): live_owner, key(2): (dead_pid, "12345")}
    clock = lambda: T0 + 1_000  # noqa: E731 -- the rows' own time domain

    def publish(hub: BroadcastHub, a: m.Activity, cause: str) -> None:
        hub.publish(a.key, a, cause, state_of(a, owners.get(a.key)))

    with anyio.fail_after(30):
        hub = BroadcastHub()
        async with open_store(path, clock=clock) as store:
            sub = hub.subscribe("all", states=True)
            async with anyio.create_task_group() as tg:
                tg.start_soon(store.run_subscription, sub)
                publish(hub, activity(key(1), turn="working"), "RegistryStatus:busy")
                publish(hub, activity(key(2), turn="idle"), "RegistryStatus:idle")
                publish(hub, activity(key(3), presence="persisted", turn="unknown"),
                        "RegistryRemoved")
                publish(hub, activity(key(2), turn="working"), "HookHint:PreToolUse")
                hub.close()  # shutdown: the subscription drains, then ends
            await store.flush()
            assert store.statistics().written == 4

        # Life 2: load, re-prove in the supervisor, publish only the corrections.
        async with open_store(path, clock=clock) as store:
            restored = await store.load()
            tokens = _probe_owners(restored)
            # (the supervisor is left first: its hub closes, the store's subscription drains)
            async with anyio.create_task_group() as tg, Supervisor(wall_ms=lambda: T0 + 99) as sup:
                corrected = sup.restore(restored.states, restored.last_seq, tokens)
                await tg.start(store.follow, sup)
                with sup.subscribe("all") as watch:
                    sup.publish_corrections()
                    seen = [watch.receive_nowait() for _ in range(watch.pending)]
                live_sessions = sup.statistics().sessions
            snapshot = await store.load()

    assert restored.last_seq == 4
    assert corrected == 1 and live_sessions == 1  # key(1)'s actor runs again at once
    first, *rest = seen
    assert isinstance(first, m.Snapshot)
    assert first.seq == 4
    # The live session is running in the first thing a subscriber sees, and nothing about
    # it follows: no flicker. The dead owner's session gets exactly one correction.
    by_key = {a.key: a for a in first.activities}
    assert by_key[key(1)].presence == "running"
    assert [(t.seq, t.key, t.cause, t.after.presence, t.after.turn)
            for t in rest if isinstance(t, m.Transition)] == [
        (5, key(2), "persisted_store:owner_dead", "persisted", "unknown")]
    assert {a.key: a.presence for a in snapshot.activities} == {
        key(1): "running", key(2): "persisted", key(3): "persisted"}
    assert snapshot.last_seq == 5
    # The whole reducer state came back, not a reconstruction from the activity.
    assert {s.key: (s.owner_pid, s.owner_token) for s in snapshot.states}[key(1)] == live_owner


async def _replay(items: list[Any]) -> Any:
    for item in items:
        yield item


async def test_real_hub_overflow_is_recorded_as_a_gap(tmp_path: Path) -> None:
    from actors.runtime.hub import BroadcastHub

    path = tmp_path / "gap.db"
    hub = BroadcastHub()
    with anyio.fail_after(30):
        async with open_store(path) as store:
            sub = hub.subscribe("all", buffer=2)
            for n in range(5):  # the store is not reading: the subscriber falls behind
                hub.publish(key(n), activity(key(n)), f"test:{n}")
            await store.run_subscription(sub)  # snapshot, 2 transitions, Overflow, end
            hub.close()
            journal = [t.seq for t in await store.journal_since(0)]  # flushes first
            st = store.statistics()
            gaps = db_query(path, "SELECT next_seq, dropped FROM gaps")
    assert (st.recorded, st.gaps) == (2, 1)
    assert journal == [1, 2]
    assert gaps == [(3, st.gap_transitions)]
    assert st.gap_transitions == 3


CHILD_BIG_FLUSH = r"""
import os, sys
from pathlib import Path

import anyio

import messages as m
from actors.sinks.store import open_store

T0 = 1_700_000_000_000


def transition(seq: int) -> m.Transition:
    key = m.SessionKey("codex", f"k{seq % 50}")
    after = m.Activity(key=key, presence="running", turn="working",
                       evidence=m.Evidence(source="codex_rollout", native_state=str(seq),
                                           observed_at_ms=T0 + seq))
    return m.Transition(seq=seq, key=key, after=after, cause="burst")


async def main() -> None:
    async with open_store(Path(sys.argv[1]), batch_ms=60_000, batch_rows=10**6) as store:
        for seq in range(1, 1_001):
            store.record(transition(seq), owner=(os.getpid(), "tok"))
        await store.flush()
        print("ack", store.statistics().last_flushed_seq, flush=True)
        for seq in range(1_001, 10_001):
            store.record(transition(seq), owner=(os.getpid(), "tok"))
        # 9,000 rows go into ONE transaction; the parent kills us as soon as it reads this.
        print("begin", flush=True)
        await store.flush()
        print("done", flush=True)
        await anyio.sleep_forever()


anyio.run(main)
"""


async def test_kill_9_inside_a_large_flush_commits_all_or_nothing(tmp_path: Path) -> None:
    db = tmp_path / "big.db"
    with anyio.fail_after(60):
        async with await anyio.open_process(
            [sys.executable, "-c", CHILD_BIG_FLUSH, str(db)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as proc:
            killed = False
            try:
                assert proc.stdout is not None
                lines = BufferedByteReceiveStream(proc.stdout)
                assert await lines.receive_until(b"\n", 1024) == b"ack 1000"
                assert await lines.receive_until(b"\n", 1024) == b"begin"
                proc.send_signal(signal.SIGKILL)
                killed = True
            finally:
                if not killed:  # signal at most once (see the test above)
                    proc.kill()
                code = await proc.wait()
    assert code == -signal.SIGKILL
    assert db_query(db, "PRAGMA integrity_check") == [("ok",)]
    count, top = db_query(db, "SELECT count(*), max(seq) FROM journal")[0]
    # The 9,000-row batch is all or nothing (almost always nothing: the kill lands while
    # the transaction is being written).
    assert (count, top) in ((1000, 1000), (10_000, 10_000))
    newest = dict(db_query(db, "SELECT session_id, max(seq) FROM journal GROUP BY session_id"))
    assert dict(db_query(db, "SELECT session_id, seq FROM sessions")) == newest


# --------------------------------------------------------------------------- the seq mark


def test_the_seq_mark_survives_a_torn_slot_and_says_when_it_is_damaged() -> None:
    older, newer = SeqMark(1, 2000, 10), SeqMark(2, 4000, 1500)
    data = bytearray(MARK_BYTES)
    for mark in (older, newer):
        start = slot_offset(mark.generation)
        data[start : start + SLOT_BYTES] = encode_slot(mark)
    assert decode_mark(bytes(data)) == newer
    torn = bytearray(data)
    torn[slot_offset(newer.generation) + 20] ^= 0x01  # the newer write was torn
    assert decode_mark(bytes(torn)) == older
    assert decode_mark(b"") == decode_mark(bytes(MARK_BYTES)) == SeqMark()  # a new file
    with pytest.raises(MarkDamaged):
        decode_mark(b"not a mark" * 100)


@pytest.mark.parametrize(
    ("journal_max", "catalog_max", "mark", "expected"),
    [
        (0, 0, SeqMark(), Resume(0)),
        (41, 41, SeqMark(3, 41, 41), Resume(41)),  # a clean stop: no gap
        # kill -9 with seqs reserved past the journal: numbering goes on after them
        (400, 400, SeqMark(3, 2400, 380), Resume(2400, ((401, 2000, "not_committed"),), 0, 2000)),
        # the journal lost committed rows (a damaged WAL), and the reservation ran further
        (500, 500, SeqMark(9, 3500, 1500),
         Resume(3500, ((501, 1000, "lost_committed"), (1501, 2000, "not_committed")), 1000, 2000)),
        (0, 0, SeqMark(2, 1500, 1500), Resume(1500, ((1, 1500, "lost_committed"),), 1500, 0)),
        (7, 9, SeqMark(), Resume(9)),  # no mark yet (a store from before it): the old rule
    ],
)
def test_resume_decides_where_numbering_goes_on_and_what_the_journal_misses(
    journal_max: int, catalog_max: int, mark: SeqMark, expected: Resume
) -> None:
    assert resume(journal_max, catalog_max, mark) == expected


async def test_a_seq_is_shown_once_reserved_and_a_crash_image_resumes_past_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.db"
    crash = tmp_path / "crash"
    crash.mkdir()
    with anyio.fail_after(30):
        async with open_store(path, seq_block=100) as store:
            for seq in (1, 2, 3):
                store.record(transition(seq, key(seq)))
            await store.flush()
            await store.wait_reserved(3)  # the control server does this before showing seq 3
            shown = store.statistics()
            # The files as a kill -9 would leave them now (the WAL holds the rows).
            for suffix in ("", "-wal", "-seq"):
                shutil.copy(path.with_name(path.name + suffix), crash / ("m.db" + suffix))
        async with open_store(path) as store:
            clean = await store.load(), await store.gaps_between(0, 1000), store.statistics()
        async with open_store(crash / "m.db") as store:
            killed = await store.load(), await store.gaps_between(0, 1000), store.statistics()
    assert (shown.mark_reserved, shown.mark_writes) == (103, 2)  # at open, then the block
    assert stat.S_IMODE(path.with_name("m.db-seq").stat().st_mode) == 0o600
    # A clean close brings the reservation back to what was used: no gap, numbering at 4.
    assert clean[0].last_seq == 3 and clean[1] == [] and clean[2].not_committed == 0
    # After the kill, numbering goes on past the reserved seqs, and they are a gap.
    assert killed[0].last_seq == 103
    assert [(g.next_seq, g.dropped, g.reason) for g in killed[1]] == [(4, 100, "not_committed")]
    assert (killed[2].not_committed, killed[2].lost_committed) == (100, 0)
