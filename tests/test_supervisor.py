"""The supervisor with real task groups: routing, restarts, broadcast, shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio
import msgspec
import pytest

from actors.core.session.reducer import SessionMessage, SessionState, Step, reduce
from actors.harnesses.catalog import PROOF_TABLE, normalize
from actors.runtime.hub import StateTransition
from actors.runtime.mailbox import EvidenceSink
from messages import (
    Acknowledge,
    Activity,
    HookHint,
    MessageError,
    NotifyHook,
    Overflow,
    ProcessGone,
    RegistryStatus,
    SessionKey,
    Snapshot,
    Transition,
)
from messages.codec import Inbound
from supervisor import MailboxFull, Supervisor, SupervisorClosed
from tests.support.polling import settle_until
from tests.support.reference_model import SessionTable
from tests.support.replay import claude_messages, codex_messages

T = 1_795_995_000_000


def key(n: int) -> SessionKey:
    return SessionKey("claude-code", f"session-{n:04d}")


def status(n: int, word: str, at: int, pid: int | None = None) -> RegistryStatus:
    return RegistryStatus(
        key=key(n),
        pid=pid or 10_000 + n,
        start_token="1",
        status=word,
        at_ms=T + at,
        observed_at_ms=T + at,
        waiting_for=None,
        version="2.1.332",
    )


def poison(n: int, at: int) -> HookHint:
    return HookHint(
        key=key(n),
        source="claude_hook",
        event="POISON",
        hint="info",
        at_ms=T + at,
        observed_at_ms=T + at,
    )


def poisonous(
    reducer: Callable[[SessionState, SessionMessage], Step] = reduce,
) -> Callable[[SessionState, SessionMessage], Step]:
    def faulty(state: SessionState, message: SessionMessage) -> Step:
        if isinstance(message, HookHint) and message.event == "POISON":
            raise RuntimeError("poison message")
        return reducer(state, message)

    return faulty


wait_for = settle_until  # let the actors run until the condition holds


async def collect(sub: object, count: int) -> list[Transition]:
    got: list[Transition] = []
    async for item in sub:  # type: ignore[attr-defined]
        if isinstance(item, Transition):
            got.append(item)
            if len(got) == count:
                break
    return got


async def test_same_transitions_as_the_reference_table() -> None:
    table = SessionTable(normalize, PROOF_TABLE)
    messages = claude_messages() + codex_messages()
    expected = [t for m in messages for t in table.apply(m)]
    with anyio.fail_after(10):
        async with Supervisor() as sup:
            with sup.subscribe("all") as sub:
                for message in messages:
                    await sup.inject(message)
                got = await collect(sub, len(expected))
    assert [(t.seq, t.key, t.after, t.cause) for t in got] == [
        (t.seq, t.key, t.after, t.cause) for t in expected
    ]


async def test_poisoned_actor_restarts_from_last_state_while_siblings_publish() -> None:
    with anyio.fail_after(20):
        async with Supervisor(reducer=poisonous()) as sup:
            with sup.subscribe("all", buffer=10_000) as sub:
                await sup.inject(status(0, "busy", 0))
                async with anyio.create_task_group() as tg:

                    async def siblings() -> None:
                        for step in range(1, 6):
                            for n in range(1, 101):
                                word = "busy" if step % 2 else "idle"
                                await sup.inject(status(n, word, step))

                    tg.start_soon(siblings)
                    await sup.inject(poison(0, 1))
                    await sup.inject(status(0, "waiting", 2))
                got = await collect(sub, 1 + 100 * 5 + 1)
            stats = sup.statistics()
    assert stats.restarts == 1 and stats.drops == 1
    mine = [t for t in got if t.key == key(0)]
    # restarted from its last state: the next transition's `before` is that state
    assert [t.after.turn for t in mine] == ["working", "needs_input"]
    assert mine[1].before == mine[0].after
    for n in range(1, 101):
        turns = [t.after.turn for t in got if t.key == key(n)]
        assert turns == ["working", "idle", "working", "idle", "working"]


async def test_repeated_crashes_stop_the_actor_and_raise_failed() -> None:
    with anyio.fail_after(10):
        async with Supervisor(reducer=poisonous(), max_restarts=2) as sup:
            with sup.subscribe("all") as sub:
                await sup.inject(status(0, "busy", 0))
                await sup.inject(status(1, "busy", 0))
                for at in range(1, 4):
                    await sup.inject(poison(0, at))
                got = await collect(sub, 3)
                failed = got[-1].after
                assert got[-1].cause == "Supervisor:stopped"
                assert failed.attention is not None and failed.attention.kind == "failed"
                assert "stopped after 3 crashes" in failed.attention.reason
                await wait_for(lambda: sup.statistics().stopped == 1)
                # a stopped actor's messages are dropped and counted, siblings go on
                await sup.inject(status(0, "idle", 9))
                await sup.inject(status(1, "idle", 9))
                (sibling,) = await collect(sub, 1)
                assert sibling.key == key(1)
                stats = sup.statistics()
                assert stats.drops == 4 and stats.restarts == 2 and stats.stopped == 1
                # acknowledging the failure gives the session a fresh actor
                await sup.inject(Acknowledge(T + 10, key=key(0)))
                (cleared,) = await collect(sub, 1)
                assert cleared.key == key(0) and cleared.after.attention is None


async def test_subscriber_joining_mid_stream_sees_snapshot_then_live_without_gap() -> None:
    items: list[object] = []
    with anyio.fail_after(20):
        async with Supervisor() as sup:
            joined = anyio.Event()

            async def subscriber() -> None:
                await joined.wait()
                with sup.subscribe("all", snapshot=True) as sub:
                    async for item in sub:
                        items.append(item)

            async with anyio.create_task_group() as tg:
                tg.start_soon(subscriber)
                for step in range(200):
                    if step == 100:
                        joined.set()
                    word = ("busy", "idle", "waiting")[step % 3]
                    await sup.inject(status(step % 20, word, step))
                # every actor has drained its mailbox and the subscriber has read
                # everything once all other tasks are blocked
                await anyio.wait_all_tasks_blocked()
                tg.cancel_scope.cancel()
            final = {a.key: a for a in sup.snapshot()}
            last_seq = sup.seq
    head, *rest = items
    assert isinstance(head, Snapshot) and 0 < head.seq < last_seq
    seqs = [t.seq for t in rest if isinstance(t, Transition)]
    assert seqs == list(range(head.seq + 1, last_seq + 1))
    state = {a.key: a for a in head.activities}
    for tr in rest:
        assert isinstance(tr, Transition)
        state[tr.key] = tr.after
    assert state == final


async def test_slow_all_subscriber_gets_overflow_and_is_closed_others_go_on() -> None:
    with anyio.fail_after(20):
        async with Supervisor() as sup:
            with sup.subscribe("all", buffer=10) as slow, sup.subscribe("all") as fast:
                for step in range(60):
                    await sup.inject(status(step % 5, ("busy", "idle")[step % 2], step))
                received = [item async for item in slow]
                got = await collect(fast, 60)
            assert sup.statistics().overflows == 1
    assert isinstance(received[0], Snapshot)
    assert isinstance(received[-1], Overflow)
    assert [t.seq for t in received[1:-1] if isinstance(t, Transition)] == list(range(1, 11))
    assert received[-1].next_seq == 11
    assert [t.seq for t in got] == list(range(1, 61))


async def test_slow_latest_subscriber_ends_on_the_final_state_of_every_key() -> None:
    with anyio.fail_after(20):
        async with Supervisor() as sup:
            with sup.subscribe("latest", snapshot=False) as sub:
                for step in range(1000):
                    await sup.inject(status(step % 50, ("busy", "idle", "waiting")[step % 3], step))
                await wait_for(lambda: sup.statistics().transitions == 1000)
                latest: dict[SessionKey, Activity] = {}
                while True:
                    try:
                        item = sub.receive_nowait()
                    except anyio.WouldBlock:
                        break
                    assert isinstance(item, Transition)
                    latest[item.key] = item.after
            assert latest == {a.key: a for a in sup.snapshot()}
            assert len(latest) == 50


async def test_bad_input_is_rejected_counted_and_changes_nothing_else() -> None:
    with anyio.fail_after(10):
        async with Supervisor() as sup:
            await sup.inject(status(1, "busy", 0))
            await wait_for(lambda: sup.statistics().transitions == 1)
            before = sup.snapshot()
            bad: list[Inbound] = [
                RegistryStatus(
                    key=key(1),
                    pid="x",  # type: ignore[arg-type]
                    start_token="1",
                    status="idle",
                    at_ms=T,
                    observed_at_ms=T,
                ),
                RegistryStatus(
                    key=key(1),
                    pid=5,
                    start_token="1",
                    status="idle",
                    at_ms=1_795_995,
                    observed_at_ms=T,
                ),  # seconds, not ms
                RegistryStatus(
                    key=SessionKey("claude-code", ""),
                    pid=5,
                    start_token="1",
                    status="idle",
                    at_ms=T,
                    observed_at_ms=T,
                ),
                RegistryStatus(
                    key=SessionKey("claude-code", "x" * 10_000),
                    pid=5,
                    start_token="1",
                    status="idle",
                    at_ms=T,
                    observed_at_ms=T,
                ),
                RegistryStatus(
                    key=SessionKey("emacs", "a"),  # type: ignore[arg-type]
                    pid=5,
                    start_token="1",
                    status="idle",
                    at_ms=T,
                    observed_at_ms=T,
                ),
                NotifyHook(
                    harness="claude-code",
                    payload=["not", "an", "object"],  # type: ignore[arg-type]
                    at_ms=T,
                    observed_at_ms=T,
                ),
            ]
            for message in bad:
                with pytest.raises(MessageError):
                    await sup.inject(message)
            await anyio.wait_all_tasks_blocked()
            stats = sup.statistics()
            assert stats.rejected == len(bad) and stats.messages == 1
            assert len(stats.recent_rejected) == len(bad)
            assert "at `$.pid`" in stats.recent_rejected[0].reason
            assert sup.snapshot() == before


async def test_unmapped_payload_is_counted_names_six_keys_and_changes_nothing() -> None:
    payload = {f"k{i}": i for i in range(9)} | {"hook_event_name": "Brandnew", "session_id": "s"}
    with anyio.fail_after(10):
        async with Supervisor() as sup:
            await sup.inject(
                NotifyHook(harness="claude-code", payload=payload, at_ms=T, observed_at_ms=T)
            )
            await anyio.wait_all_tasks_blocked()
            stats = sup.statistics()
    assert stats.unmapped == 1 and stats.sessions == 0 and sup.snapshot() == ()
    (record,) = stats.recent_unmapped
    assert record.event == "Brandnew" and len(record.keys) == 6


async def test_ended_session_actor_retires_and_its_activity_stays() -> None:
    with anyio.fail_after(10):
        async with Supervisor(linger=0) as sup:
            await sup.inject(status(1, "idle", 0, pid=777))
            await wait_for(lambda: sup.statistics().transitions == 1)
            assert sup.statistics().sessions == 1
            await sup.inject(ProcessGone(pid=777, at_ms=T + 5, observed_at_ms=T + 5))
            await wait_for(lambda: sup.statistics().sessions == 0)
            (activity,) = sup.snapshot()
            assert activity.presence == "persisted"
            # new evidence starts a fresh actor from the catalog's state
            await sup.inject(status(1, "busy", 9, pid=778))
            await wait_for(lambda: sup.statistics().transitions == 3)
            (activity,) = sup.snapshot()
            assert (activity.presence, activity.turn) == ("running", "working")


def ended(n: int, pid: int) -> list[Inbound]:
    """Session ``n`` seen with owner ``pid``, then its owner gone: it lingers, so its actor's
    task is started (and has not run yet when the next message is delivered)."""
    return [
        status(n, "idle", 0, pid=pid),
        ProcessGone(pid=pid, at_ms=T + 1, observed_at_ms=T + 1),
    ]


async def test_a_waiting_actor_gets_its_message_at_once_and_the_order_holds() -> None:
    """Messages for a session whose actor has nothing queued are applied by the delivering task
    itself (no wake-up of a task per message); while messages are queued for its task (started
    for the linger of the ended session, not run yet), later ones queue behind them: the order
    per session holds either way."""
    with anyio.fail_after(10):
        async with Supervisor(linger=60) as sup:
            with sup.subscribe("all") as sub:
                words = ["idle", "busy"] * 5
                for message in ended(1, 777):
                    sup.inject_nowait(message)  # applied at once: no task yet
                assert sup.statistics().inline == 2
                sup.inject_nowait(status(1, "waiting", 2, pid=778))  # queued for the new task
                sup.inject_nowait(status(1, "busy", 3, pid=778))  # queued behind it
                await wait_for(lambda: sup.statistics().transitions == 4)
                assert sup.statistics().inline == 2
                for at, word in enumerate(words, start=4):
                    await sup.inject(status(1, word, at, pid=778))  # the task waits: at once
                got = await collect(sub, 4 + len(words))
            stats = sup.statistics()
    assert [t.after.presence for t in got[:2]] == ["running", "persisted"]
    assert [t.after.turn for t in got[2:]] == ["needs_input", "working"] + [
        "working" if w == "busy" else "idle" for w in words
    ]
    assert [t.seq for t in got] == list(range(1, 5 + len(words)))
    assert stats.inline == 2 + len(words) and stats.drops == 0


async def test_a_session_actor_has_a_task_only_while_it_must_wait() -> None:
    """Live sessions take their evidence inline and have no task; an ended one gets a task
    for its linger, which retires it; shutdown ends the task-less ones at once."""
    with anyio.fail_after(10):
        async with Supervisor(linger=0) as sup:
            tasks = len(asyncio.all_tasks())
            for n in range(20):
                await sup.inject(status(n, "busy", n))
            assert sup.statistics().sessions == 20
            assert len(asyncio.all_tasks()) == tasks  # no task per session
            for message in ended(20, 777):
                await sup.inject(message)
            assert len(asyncio.all_tasks()) == tasks + 1  # the ended session lingers
            await wait_for(lambda: sup.statistics().sessions == 20)  # and retired
            assert len(asyncio.all_tasks()) == tasks
        stats = sup.statistics()
    assert stats.sessions == 0 and stats.transitions == 22 and stats.drops == 0


async def test_inject_nowait_on_a_full_mailbox_raises_and_counts() -> None:
    with anyio.fail_after(10):
        async with Supervisor(mailbox_size=2, linger=60) as sup:
            for message in ended(1, 777):
                sup.inject_nowait(message)
            sup.inject_nowait(status(1, "busy", 2, pid=778))
            sup.inject_nowait(status(1, "idle", 3, pid=778))
            with pytest.raises(MailboxFull, match="mailbox full"):
                sup.inject_nowait(status(1, "busy", 4, pid=778))
            stats = sup.statistics()
            assert stats.overflows == 1 and stats.drops == 1


async def test_supervised_actor_is_restarted_then_stopped() -> None:
    runs: list[int] = []

    class Flaky:
        async def run(self, sink: EvidenceSink) -> None:
            runs.append(1)
            sink.inject_nowait(status(len(runs), "busy", len(runs)))
            raise RuntimeError("flaky")

    with anyio.fail_after(10):
        async with Supervisor(max_restarts=2) as sup:
            sup.start_actor(Flaky())
            await wait_for(lambda: len(runs) == 3 and sup.statistics().actors == 0)
            assert sup.statistics().restarts == 2
            await wait_for(lambda: sup.statistics().transitions == 3)


async def test_shutdown_drains_ends_subscriptions_and_leaves_no_task() -> None:
    tasks_before = len(asyncio.all_tasks())
    cancelled = anyio.Event()

    class Forever:
        async def run(self, sink: EvidenceSink) -> None:
            try:
                await anyio.sleep_forever()
            finally:
                cancelled.set()

    with anyio.fail_after(10):
        async with Supervisor() as sup:
            sup.start_actor(Forever())
            sub = sup.subscribe("all", snapshot=False)
            latest = sup.subscribe("latest", snapshot=False)
            for n in range(50):
                sup.inject_nowait(status(n, "busy", 0))
        # every mailbox drained before the hub closed: nothing was lost
        assert sup.statistics().transitions == 50
        assert cancelled.is_set()
        assert len([item async for item in sub]) == 50
        assert len([item async for item in latest]) == 50
        sub.close()
        latest.close()
        with pytest.raises(SupervisorClosed):
            await sup.inject(status(1, "idle", 5))
    assert len(asyncio.all_tasks()) == tasks_before


def test_statistics_is_a_point_in_time_record() -> None:
    sup = Supervisor()
    stats = sup.statistics()
    stats.messages = 3  # a copy: the supervisor's own record is untouched
    assert msgspec.structs.asdict(sup.statistics())["messages"] == 0


async def test_a_pane_binding_that_arrives_before_any_evidence_is_kept() -> None:
    """The pane mapper may prove the pane (``codex resume <id>``) before the rollout shows."""
    from messages import PaneBound, RolloutOwned

    codex = SessionKey("codex", "thread-1")
    with anyio.fail_after(10):
        async with Supervisor(linger=0) as sup:
            await sup.inject(PaneBound(key=codex, pane="%4", at_ms=T, proof="codex_resume_argv"))
            await anyio.wait_all_tasks_blocked()
            assert sup.statistics().sessions == 1 and sup.snapshot() == ()
            await sup.inject(
                RolloutOwned(
                    key=codex, pid=4242, start_token="1", at_ms=T + 1, observed_at_ms=T + 1
                )
            )
            await wait_for(lambda: sup.statistics().transitions == 1)
            (activity,) = sup.snapshot()
            assert (activity.pane, activity.presence) == ("%4", "running")


async def test_a_states_subscription_sees_every_transition_with_its_reducer_state() -> None:
    """The store's feed: every transition, in order, with the state that published it."""
    with anyio.fail_after(10):
        async with Supervisor() as sup:
            with sup.subscribe("all", snapshot=False, states=True) as sub:
                for step in range(6):
                    await sup.inject(status(step % 2, ("busy", "idle", "waiting")[step % 3], step))
                await wait_for(lambda: sup.statistics().transitions == 6)
                items = [sub.receive_nowait() for _ in range(6)]
    records = [i for i in items if isinstance(i, StateTransition)]
    assert [r.transition.seq for r in records] == [1, 2, 3, 4, 5, 6]
    for record in records:
        assert record.state is not None
        assert record.state.key == record.transition.key
        assert record.state.activity == record.transition.after


async def test_restored_live_session_does_not_flicker() -> None:
    """A session restored with its live owner, then the same evidence again: no transition."""
    before = SessionTable(normalize, PROOF_TABLE)
    before.apply(status(1, "idle", 0))
    state = before.states[key(1)]
    with anyio.fail_after(10):
        async with Supervisor() as sup:
            # The recorded owner (pid 10001, token "1") is alive with the same token.
            assert sup.restore([state], 7, {10_001: "1"}) == 0
            assert sup.statistics().sessions == 1
            with sup.subscribe("all", snapshot=False) as sub:
                await sup.inject(status(1, "idle", 0))  # the same record seen again
                await sup.inject(status(1, "busy", 2))
                item = await sub.receive()
    assert isinstance(item, Transition)
    assert (item.seq, item.cause, item.after.turn) == (8, "RegistryStatus:busy", "working")


async def test_an_essential_actor_that_stops_fails_the_supervisor() -> None:
    class Broken:
        async def run(self, sink: EvidenceSink) -> None:
            raise OSError(98, "Address already in use")

    class Fine:
        async def run(self, sink: EvidenceSink) -> None:
            await anyio.sleep_forever()

    with anyio.fail_after(10):
        async with Supervisor(max_restarts=2) as sup:
            sup.start_actor(Fine(), name="fine")
            sup.start_actor(Broken(), name="optional")  # stops, and that is all
            sup.start_actor(Broken(), name="listener", essential=True)
            failure = await sup.wait_failed()
            stats = sup.statistics()
    assert str(failure) == (
        "listener stopped after 3 crashes within 10 s "
        "(last: OSError(98, 'Address already in use'))"
    )
    assert sup.failure is failure
    assert stats.failed == "listener"
    assert stats.actor_states == {"fine": "running", "optional": "stopped", "listener": "stopped"}


async def test_live_sessions_are_capped_and_refusals_counted() -> None:
    """A flood of new sessions stops at the cap (failed sessions do not each keep a live actor);
    evidence for sessions that already have an actor still goes through."""
    with anyio.fail_after(20):
        async with Supervisor(max_sessions=3) as sup:
            with sup.subscribe("all", snapshot=False) as sub:
                for n in range(5):
                    sup.inject_nowait(status(n, "busy", n))
                sup.inject_nowait(status(1, "idle", 10))
                items = await collect(sub, 4)
                stats = sup.statistics()
    # Sessions run concurrently: their transitions interleave in any order, each in its own.
    by_key = {k: [t.after.turn for t in items if t.key == k] for k in {t.key for t in items}}
    assert by_key == {key(0): ["working"], key(1): ["working", "idle"], key(2): ["working"]}
    assert (stats.sessions_refused, stats.sessions) == (2, 3)
    assert stats.recent_rejected[0].reason == (
        f"3 live sessions already: {key(3)} refused (1 so far)"
    )
    assert stats.recent_rejected[0].origin == "routing"
