"""The pid watcher: the pure plan exhaustively, the actor against real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

import messages
from actors.core.session.pids import Ended, ProbeResult, Seen, pid_plan
from actors.sources import procfs
from actors.sources.pid_watcher import PidWatcher
from tests.support.polling import poll_until
from tests.support.sinks import ListSink

# ---------------------------------------------------------------- pid_plan (pure)


def test_new_alive_candidate_is_seen() -> None:
    p = pid_plan({10: "100"}, {}, {10: ProbeResult("100")})
    assert p.seen == (Seen(10, "100"),)
    assert p.ended == () and p.dropped == ()
    assert p.seen_alive == {10: "100"}


def test_candidate_without_expected_token_is_seen_with_probed_token() -> None:
    p = pid_plan({10: None}, {}, {10: ProbeResult("7")})
    assert p.seen == (Seen(10, "7"),)
    assert p.seen_alive == {10: "7"}


def test_repeat_sighting_sends_nothing() -> None:
    p = pid_plan({10: "100"}, {10: "100"}, {10: ProbeResult("100")})
    assert p.seen == () and p.ended == () and p.dropped == ()
    assert p.seen_alive == {10: "100"}


def test_death_of_a_pid_seen_alive_ends_it() -> None:
    p = pid_plan({10: "100"}, {10: "100"}, {10: ProbeResult(None)})
    assert p.ended == (Ended(10, "100", recycled=False),)
    assert p.seen_alive == {}
    assert p.dropped == ()


def test_death_of_a_pid_never_seen_alive_ends_nothing() -> None:
    p = pid_plan({10: "100"}, {}, {10: ProbeResult(None)})
    assert p.ended == () and p.seen == ()
    assert p.dropped == (10,)
    assert p.seen_alive == {}


def test_expected_token_mismatch_is_a_recycled_pid() -> None:
    p = pid_plan({10: "100"}, {}, {10: ProbeResult("555")})
    assert p.ended == (Ended(10, "100", recycled=True),)
    assert p.seen == ()
    assert p.seen_alive == {}


def test_seen_token_change_without_expected_token_is_a_recycled_pid() -> None:
    p = pid_plan({10: None}, {10: "100"}, {10: ProbeResult("555")})
    assert p.ended == (Ended(10, "100", recycled=True),)
    assert p.seen == ()


def test_rewatched_with_new_token_sends_seen_again() -> None:
    # The owner was re-announced with the new incarnation's token: it is news.
    p = pid_plan({10: "555"}, {10: "100"}, {10: ProbeResult("555")})
    assert p.seen == (Seen(10, "555"),)
    assert p.ended == ()
    assert p.seen_alive == {10: "555"}


def test_unprobed_candidate_decides_nothing() -> None:
    p = pid_plan({10: "100", 11: None}, {10: "100"}, {})
    assert (p.seen, p.ended, p.dropped) == ((), (), ())
    assert p.seen_alive == {10: "100"}


def test_non_candidates_are_forgotten() -> None:
    p = pid_plan({10: "100"}, {10: "100", 11: "5", 12: "6"}, {10: ProbeResult("100")})
    assert p.forgotten == (11, 12)
    assert p.seen_alive == {10: "100"}


def test_decisions_are_in_pid_order() -> None:
    p = pid_plan(
        {3: None, 1: None, 2: None},
        {},
        {3: ProbeResult("c"), 1: ProbeResult("a"), 2: ProbeResult("b")},
    )
    assert p.seen == (Seen(1, "a"), Seen(2, "b"), Seen(3, "c"))


_tokens = st.sampled_from(["1", "2", "3"])
_pids = st.integers(min_value=1, max_value=6)


@given(
    candidates=st.dictionaries(_pids, st.none() | _tokens),
    seen_alive=st.dictionaries(_pids, _tokens),
    probes=st.dictionaries(_pids, st.builds(ProbeResult, st.none() | _tokens)),
)
def test_plan_invariants(
    candidates: dict[int, str | None],
    seen_alive: dict[int, str],
    probes: dict[int, ProbeResult],
) -> None:
    p = pid_plan(candidates, seen_alive, probes)
    assert set(p.seen_alive) <= set(candidates)
    assert set(p.forgotten) == set(seen_alive) - set(candidates)
    decided = [s.pid for s in p.seen] + [e.pid for e in p.ended] + list(p.dropped)
    # Each pid gets at most one decision, and only pids that were probed.
    assert len(decided) == len(set(decided))
    assert set(decided) <= set(probes) & set(candidates)
    for e in p.ended:
        if e.recycled:
            # A recycled verdict needs a live probe with another token than claimed.
            token = probes[e.pid].token
            assert token is not None and token != e.token
        else:
            # A death ends something only if this watcher saw the pid alive.
            assert seen_alive.get(e.pid) == e.token
            assert probes[e.pid].token is None
    for pid in p.dropped:
        assert pid not in seen_alive and probes[pid].token is None
    for s in p.seen:
        assert probes[s.pid].token == s.token != seen_alive.get(s.pid)


# ---------------------------------------------------------------- actor (real processes)


@contextmanager
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@asynccontextmanager
async def running(watcher: PidWatcher, sink: ListSink) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run, sink)
        yield
        tg.cancel_scope.cancel()


def gone(items: list[messages.Inbound]) -> list[messages.ProcessGone]:
    return [m for m in items if isinstance(m, messages.ProcessGone)]


def seen(items: list[messages.Inbound]) -> list[messages.ProcessSeen]:
    return [m for m in items if isinstance(m, messages.ProcessSeen)]


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs Linux pidfd")
async def test_exit_is_reported_by_pidfd_without_waiting_for_a_tick() -> None:
    sink = ListSink()
    # An hour-long tick: a ProcessGone within the deadline can only come from the pidfd.
    watcher = PidWatcher(tick=3600, use_pidfd=True)
    with anyio.fail_after(10), sleeper() as proc:
        token = procfs.start_token(proc.pid)
        assert token is not None
        watcher.watch(proc.pid, token)
        async with running(watcher, sink):
            await sink.wait_for(lambda items: len(seen(items)) == 1)
            assert seen(sink.items)[0].pid == proc.pid
            assert seen(sink.items)[0].start_token == token
            await watcher.wait_rounds(1)
            assert watcher.statistics().pidfds_open == 1
            proc.kill()  # not reaped yet: a zombie has exited all the same
            await sink.wait_for(lambda items: len(gone(items)) == 1)
            stats = watcher.statistics()
        [g] = gone(sink.items)
        assert (g.pid, g.start_token, g.recycled) == (proc.pid, token, False)
        assert stats.gone_by_pidfd == 1
        assert stats.rounds == 1
        assert stats.candidates == 0 and stats.pidfds_open == 0


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs Linux pidfd")
async def test_no_tick_while_every_candidate_is_behind_a_pidfd() -> None:
    """Idle is idle: once its owners are behind pidfds the watcher runs no round at all, even
    with a 1 ms tick; a new candidate wakes it for one round."""
    sink = ListSink()
    watcher = PidWatcher(tick=0.001, use_pidfd=True)
    with anyio.fail_after(10), sleeper() as a, sleeper() as b:
        watcher.watch(a.pid, procfs.start_token(a.pid))
        async with running(watcher, sink):
            await sink.wait_for(lambda items: len(seen(items)) == 1)
            await poll_until(lambda: watcher.statistics().pidfds_open == 1)
            assert not watcher.statistics().ticking
            watcher.watch(b.pid, procfs.start_token(b.pid))
            assert watcher.statistics().ticking  # until its round confirms it
            await sink.wait_for(lambda items: len(seen(items)) == 2)
            await poll_until(lambda: watcher.statistics().pidfds_open == 2)
            a.kill()
            b.kill()
            await sink.wait_for(lambda items: len(gone(items)) == 2)
            stats = watcher.statistics()
    assert stats.rounds == 2 and stats.gone_by_pidfd == 2
    assert not stats.ticking and stats.candidates == 0


async def test_exit_is_reported_by_the_tick_when_pidfd_is_disabled() -> None:
    sink = ListSink()
    watcher = PidWatcher(tick=0.02, use_pidfd=False)
    with anyio.fail_after(10), sleeper() as proc:
        token = procfs.start_token(proc.pid)
        watcher.watch(proc.pid, token)
        async with running(watcher, sink):
            await sink.wait_for(lambda items: len(seen(items)) == 1)
            assert watcher.statistics().ticking  # no pidfd: the tick is the only way
            proc.kill()
            await sink.wait_for(lambda items: len(gone(items)) == 1)
            stats = watcher.statistics()
        [g] = gone(sink.items)
        assert (g.pid, g.start_token, g.recycled) == (proc.pid, token, False)
        assert stats.gone_by_pidfd == 0 and stats.pidfds_open == 0
        assert len(seen(sink.items)) == 1  # one incarnation, one ProcessSeen


async def test_recycled_pid_ends_the_session_with_the_old_token() -> None:
    sink = ListSink()
    watcher = PidWatcher(tick=3600)
    with anyio.fail_after(10), sleeper() as proc:
        # A live pid whose token is not the one we were told: another incarnation.
        watcher.watch(proc.pid, "1")
        async with running(watcher, sink):
            await sink.wait_for(lambda items: len(gone(items)) == 1)
            stats = watcher.statistics()
        assert gone(sink.items) == [
            messages.ProcessGone(
                pid=proc.pid,
                start_token="1",
                recycled=True,
                at_ms=gone(sink.items)[0].at_ms,
                observed_at_ms=gone(sink.items)[0].observed_at_ms,
            )
        ]
        assert seen(sink.items) == []
        assert stats.recycled == 1 and stats.candidates == 0


async def test_pid_never_seen_alive_ends_nothing() -> None:
    sink = ListSink()
    watcher = PidWatcher(tick=3600)
    with anyio.fail_after(10):
        async with await anyio.open_process([sys.executable, "-c", "pass"]) as dead:
            assert await dead.wait() == 0
        watcher.watch(dead.pid)
        async with running(watcher, sink):
            await watcher.wait_rounds(1)
            stats = watcher.statistics()
    assert sink.items == []
    assert stats.never_seen_dropped == 1
    assert stats.candidates == 0


async def test_each_distinct_pid_is_probed_once_per_round_and_non_candidates_forgotten() -> None:
    sink = ListSink()
    watcher = PidWatcher(tick=3600, use_pidfd=False)
    with anyio.fail_after(10), sleeper() as a, sleeper() as b, sleeper() as c:
        token_a = procfs.start_token(a.pid)
        watcher.watch(a.pid, token_a)
        watcher.watch(a.pid)  # same pid again (no token: keeps the known one)
        watcher.watch(a.pid, token_a)
        watcher.watch(b.pid)
        async with running(watcher, sink):
            await watcher.wait_rounds(1)
            assert watcher.statistics().probes == 2
            assert sorted(m.pid for m in seen(sink.items)) == sorted([a.pid, b.pid])
            watcher.unwatch(b.pid)
            watcher.watch(c.pid)  # wakes an early round: a and c, not b
            await watcher.wait_rounds(2)
            stats = watcher.statistics()
        assert stats.probes == 4
        assert stats.confirmed_alive == 2 and stats.candidates == 2
        assert [m.pid for m in seen(sink.items)].count(c.pid) == 1
        assert len(seen(sink.items)) == 3  # a is not re-announced


async def test_unwatched_pid_death_sends_nothing() -> None:
    sink = ListSink()
    watcher = PidWatcher(tick=3600)
    with anyio.fail_after(10), sleeper() as proc:
        watcher.watch(proc.pid)
        async with running(watcher, sink):
            await sink.wait_for(lambda items: len(seen(items)) == 1)
            watcher.unwatch(proc.pid)
            assert watcher.statistics().pidfds_open == 0
            proc.kill()
            proc.wait()
            await anyio.wait_all_tasks_blocked()
            stats = watcher.statistics()
    assert gone(sink.items) == []
    assert stats.candidates == 0


def test_observe_watches_owner_pids_from_evidence() -> None:
    watcher = PidWatcher()
    key = messages.SessionKey("claude-code", "s1")
    at = 1_800_000_000_000
    watcher.deliver_nowait(
        messages.RegistryStatus(
            key=key, pid=4242, start_token="9", status="idle", at_ms=at, observed_at_ms=at
        )
    )
    watcher.deliver_nowait(
        messages.HookHint(
            key=key,
            source="claude_hook",
            event="Stop",
            hint="completed",
            at_ms=at,
            observed_at_ms=at,
            pid=4343,
        )
    )
    watcher.deliver_nowait(messages.PaneClosed(pane="%1", at_ms=at))
    assert watcher.statistics().candidates == 2


def test_bad_pid_is_rejected_and_counted() -> None:
    watcher = PidWatcher()
    with pytest.raises(ValueError, match="not a process id: 0"):
        watcher.watch(0)
    with pytest.raises(ValueError, match="not a process id"):
        watcher.watch(2**31)
    assert watcher.statistics().rejected_watch == 2
    assert watcher.statistics().candidates == 0


async def test_sink_rejection_is_counted_not_fatal() -> None:
    watcher = PidWatcher(tick=3600)
    with anyio.fail_after(10), sleeper() as proc:
        watcher.watch(proc.pid)
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher.run, ListSink(refuse=True))
            await watcher.wait_rounds(1)
            tg.cancel_scope.cancel()
    assert watcher.statistics().seen_sent == 1
    assert watcher.statistics().sink_rejected == 1
