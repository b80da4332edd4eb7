"""Tests for actors/broadcast.py: the catalog, seq numbering and both subscription modes.

The hub is synchronous, so most decisions are tested without an event loop through
``receive_nowait``; the concurrency properties (mid-stream join, slow subscribers, waking a
parked receiver, close) run real tasks in a real task group, synchronised by events,
``wait_all_tasks_blocked`` and task-completion, never by sleeping.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Iterable, Sequence

import anyio
import anyio.lowlevel
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.runtime.hub import (
    BroadcastHub,
    HubClosed,
    HubError,
    Item,
    Mode,
    Subscription,
    ready_now,
)
from messages import (
    Activity,
    Attention,
    Evidence,
    ExitInfo,
    MessageError,
    Overflow,
    PanewardError,
    SessionKey,
    Snapshot,
    Transition,
    Turn,
)

T0 = 1_750_000_000_000
TURNS: tuple[Turn, ...] = ("unknown", "idle", "working", "needs_input")


def key(i: int) -> SessionKey:
    return SessionKey("claude-code", f"session-{i:04d}")


def act(
    k: SessionKey,
    turn: Turn = "working",
    *,
    native: str | None = None,
    observed: int = T0,
) -> Activity:
    return Activity(
        key=k,
        presence="running",
        turn=turn,
        evidence=Evidence(
            source="claude_registry", native_state=native, observed_at_ms=observed, at_ms=T0
        ),
    )


def fold(
    snapshot: Snapshot | None, transitions: Iterable[Transition], *, lossless: bool = False
) -> dict[SessionKey, Activity]:
    """Rebuild the catalog a subscriber can see. For a lossless (``all``) stream, also check
    that each ``before`` is the state the subscriber already holds for that key."""
    state = {} if snapshot is None else {a.key: a for a in snapshot.activities}
    for t in transitions:
        if lossless:
            assert t.before == state.get(t.key), t
        state[t.key] = t.after
    return state


def catalog(hub: BroadcastHub) -> dict[SessionKey, Activity]:
    return {a.key: a for a in hub.snapshot().activities}


def drain_nowait(sub: Subscription[Item]) -> list[Item]:
    """Everything a closed or ended subscription still holds, up to EndOfStream."""
    items: list[Item] = []
    while True:
        try:
            items.append(sub.receive_nowait())
        except anyio.EndOfStream:
            return items


def split(items: Sequence[Item]) -> tuple[Snapshot, list[Transition], list[Overflow]]:
    head, *rest = items
    assert isinstance(head, Snapshot)
    transitions = [i for i in rest if isinstance(i, Transition)]
    markers = [i for i in rest if isinstance(i, Overflow)]
    assert len(transitions) + len(markers) == len(rest)
    # A marker, if any, is the very last item.
    assert not markers or (len(markers) == 1 and rest[-1] is markers[0])
    return head, transitions, markers


# --- the catalog and seq numbering (no event loop) ------------------------------------------


def test_publish_numbers_every_transition_it_is_given() -> None:
    hub = BroadcastHub()
    a, b = key(1), key(2)
    first = hub.publish(a, act(a, "idle"), "RegistryStatus:idle")
    assert first == Transition(
        seq=1, key=a, after=act(a, "idle"), cause="RegistryStatus:idle", before=None
    )
    second = hub.publish(b, act(b, "working"), "HookHint:UserPromptSubmit")
    third = hub.publish(a, act(a, "working"), "RegistryStatus:busy")
    assert [first.seq, second.seq, third.seq] == [1, 2, 3]
    assert third.before == act(a, "idle")
    assert hub.current(a) == act(a, "working")
    assert hub.seq == 3
    stats = hub.statistics()
    assert (stats.seq, stats.sessions, stats.published) == (3, 2, 3)
    assert (stats.rejected, stats.subscribers, stats.overflows, stats.closed) == (0, 0, 0, False)


def test_the_hub_does_not_second_guess_the_reducer() -> None:
    """Whether a step is a change is the reducer's decision alone (Activity.visible): the hub
    publishes what it is given (the reducer never hands it a repeat: tests/test_reducer*)."""
    hub = BroadcastHub()
    a = key(1)
    hub.publish(a, act(a, "idle"), "c")
    again = hub.publish(a, act(a, "idle", observed=T0 + 5_000), "c")
    assert again.seq == 2 and hub.current(a) == act(a, "idle", observed=T0 + 5_000)


def test_every_visible_field_is_a_change() -> None:
    k = key(1)
    base = act(k, "working", native="busy")
    variants = [
        msgspec.structs.replace(base, presence="persisted"),
        msgspec.structs.replace(base, turn="idle"),
        msgspec.structs.replace(
            base, attention=Attention(kind="turn_done", reason="done", since_ms=T0)
        ),
        msgspec.structs.replace(base, evidence=Evidence(source="claude_hook")),
        msgspec.structs.replace(base, evidence=Evidence(source="claude_hook", native_state="x")),
        msgspec.structs.replace(
            base,
            evidence=Evidence(source="claude_hook", native_state="x", harness_version="2.1"),
        ),
        msgspec.structs.replace(base, pane="%3"),
        msgspec.structs.replace(base, exit=ExitInfo(code=3)),
        msgspec.structs.replace(base, subagents=1),
    ]
    for variant in variants:
        assert variant.visible() != base.visible(), variant
    # Only the observation time differs: a repeat observation, not a change.
    assert act(k, "working", native="busy", observed=T0 + 9).visible() == base.visible()


def test_publish_for_the_wrong_key_is_rejected_counted_and_changes_nothing() -> None:
    hub = BroadcastHub()
    a, b = key(1), key(2)
    hub.publish(a, act(a), "c")
    with hub.subscribe() as sub:
        with pytest.raises(MessageError, match=r"activity is for claude-code:session-0002"):
            hub.publish(a, act(b, "idle"), "c")
        assert hub.statistics().rejected == 1
        assert (hub.seq, catalog(hub)) == (1, {a: act(a)})
        assert sub.statistics().pending == 1  # only the snapshot


def test_snapshot_is_sorted_by_key_and_keeps_ended_sessions() -> None:
    hub = BroadcastHub()
    keys = [SessionKey("codex", "t-2"), SessionKey("claude-code", "z"), SessionKey("codex", "t-1")]
    for k in keys:
        hub.publish(k, act(k), "c")
    ended = msgspec.structs.replace(act(keys[0]), presence="persisted", turn="unknown")
    hub.publish(keys[0], ended, "ProcessGone")
    snap = hub.snapshot()
    assert snap.seq == 4
    assert [a.key for a in snap.activities] == [
        SessionKey("claude-code", "z"),
        SessionKey("codex", "t-1"),
        SessionKey("codex", "t-2"),
    ]
    assert snap.activities[2] == ended
    assert hub.snapshot() is snap  # cached until the next transition
    assert hub.current(SessionKey("cursor", "never")) is None


def test_restore_seeds_catalog_and_seq_and_publishes_nothing() -> None:
    hub = BroadcastHub()
    a, b = key(1), key(2)
    hub.restore([act(b, "idle"), act(a, "unknown")], seq=41)
    assert hub.statistics().published == 0
    with hub.subscribe() as sub:
        assert sub.receive_nowait() == Snapshot(
            seq=41, activities=(act(a, "unknown"), act(b, "idle"))
        )
        # (A restored state re-proven unchanged publishes nothing: the reducer's decision,
        # tests/test_supervisor.py::test_restored_live_session_does_not_flicker.)
        t = hub.publish(a, act(a, "working"), "RegistryStatus:busy")
        assert t is not None and (t.seq, t.before) == (42, act(a, "unknown"))
        assert sub.receive_nowait() == t
        with pytest.raises(anyio.WouldBlock):
            sub.receive_nowait()


def test_restore_misuse_is_refused_without_changing_anything() -> None:
    hub = BroadcastHub()
    a = key(1)
    with pytest.raises(MessageError, match="appears twice"):
        hub.restore([act(a), act(key(2)), act(a, "idle")], seq=3)
    assert (hub.seq, catalog(hub)) == (0, {})
    with pytest.raises(MessageError, match="already at seq 0"):
        hub.restore([], seq=-1)
    hub.restore([act(a)], seq=3)
    with pytest.raises(MessageError, match="already at seq 3"):
        hub.restore([], seq=2)
    with hub.subscribe(), pytest.raises(HubError, match="1 subscribers"):
        hub.restore([], seq=5)
    hub.publish(a, act(a, "idle"), "c")
    with pytest.raises(HubError, match="1 transitions published"):
        hub.restore([act(key(9))], seq=9)
    assert (hub.seq, catalog(hub)) == (4, {a: act(a, "idle")})
    hub.close()
    with pytest.raises(HubClosed):
        hub.restore([], seq=9)


def test_closed_hub_refuses_publish_and_subscribe_but_stays_readable() -> None:
    hub = BroadcastHub()
    a = key(1)
    hub.publish(a, act(a), "c")
    hub.close()
    hub.close()  # idempotent
    with pytest.raises(HubClosed, match="closed") as info:
        hub.publish(a, act(a, "idle"), "c")
    assert isinstance(info.value, PanewardError)
    with pytest.raises(HubClosed):
        hub.subscribe()
    assert hub.current(a) == act(a)
    assert hub.statistics().closed and hub.seq == 1


def test_subscribe_validates_its_arguments() -> None:
    hub = BroadcastHub()
    with pytest.raises(ValueError, match="unknown subscription mode 'every'"):
        hub.subscribe("every")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="at least 1, got 0"):
        hub.subscribe(buffer=0)
    assert hub.statistics().subscribers == 0


def test_statistics_are_point_in_time_records() -> None:
    hub = BroadcastHub()
    with hub.subscribe() as sub:
        # The hub's record is copied out: changing the copy changes nothing in the hub.
        stats = hub.statistics()
        stats.seq = 9
        assert hub.statistics().seq == 0
        # So is a subscription's.
        sub_stats = sub.statistics()
        sub_stats.pending = 9
        sub_stats.delivered = 9
        assert sub.statistics().pending == 1 and sub.statistics().delivered == 0


# --- subscription semantics without an event loop -------------------------------------------


def test_subscription_gets_snapshot_then_only_later_transitions() -> None:
    hub = BroadcastHub()
    a, b = key(1), key(2)
    hub.publish(a, act(a), "c")
    with hub.subscribe() as sub, hub.subscribe(snapshot=False) as live:
        t2 = hub.publish(b, act(b), "c")
        t3 = hub.publish(a, act(a, "idle"), "c")
        assert sub.receive_nowait() == Snapshot(seq=1, activities=(act(a),))
        assert [sub.receive_nowait(), sub.receive_nowait()] == [t2, t3]
        assert [live.receive_nowait(), live.receive_nowait()] == [t2, t3]
        for s in (sub, live):
            with pytest.raises(anyio.WouldBlock):
                s.receive_nowait()
        assert sub.statistics().delivered == 3 and live.statistics().delivered == 2
        assert hub.statistics().subscribers == 2
    # Leaving the with blocks unregistered both; using one now is a clear error.
    assert hub.statistics().subscribers == 0
    with pytest.raises(anyio.ClosedResourceError):
        sub.receive_nowait()
    assert sub.statistics().closed
    hub.publish(a, act(a, "working"), "c")  # nobody left to deliver to: fine


def test_receive_many_takes_what_is_ready_in_order_and_the_marker_alone() -> None:
    """``receive_many_nowait``: the snapshot alone first, then at most ``limit`` transitions per
    call in seq order (counted as delivered), WouldBlock when none is ready; after an overflow,
    what was queued, then the Overflow marker alone, then EndOfStream."""
    hub = BroadcastHub()
    ks = [key(i) for i in range(3)]
    with hub.subscribe(buffer=5) as sub:
        published = [hub.publish(ks[i % 3], act(ks[i % 3], native=f"n{i}"), "c") for i in range(4)]
        assert sub.receive_many_nowait(10) == [Snapshot(seq=0, activities=())]
        assert sub.receive_many_nowait(3) == published[:3]
        assert sub.receive_many_nowait(3) == published[3:]
        with pytest.raises(anyio.WouldBlock):
            sub.receive_many_nowait(3)
        assert sub.statistics().delivered == 5
        more = [hub.publish(ks[i % 3], act(ks[i % 3], native=f"m{i}"), "c") for i in range(7)]
        assert sub.receive_many_nowait(100) == more[:5]
        [marker] = sub.receive_many_nowait(100)
        assert isinstance(marker, Overflow) and (marker.next_seq, marker.dropped) == (10, 2)
        with pytest.raises(anyio.EndOfStream):
            sub.receive_many_nowait(100)


def test_receive_many_of_latest_and_states_subscriptions_matches_receive_nowait() -> None:
    """A batch is what ``receive_nowait`` would return one by one: coalesced per key in order
    of last update for ``latest``, each with its reducer state for ``states``; ``limit``
    bounds it and the rest stays pending in the same order."""
    hub = BroadcastHub()
    a, b, c = key(1), key(2), key(3)
    with (
        hub.subscribe("latest", snapshot=False) as latest,
        hub.subscribe("latest", snapshot=False) as one_by_one,
        hub.subscribe("all", snapshot=False, states=True) as states,
    ):
        published = [
            hub.publish(k, act(k, native=f"n{i}"), "c")
            for i, k in enumerate([a, b, a, c, b])
        ]
        expected = [one_by_one.receive_nowait() for _ in range(3)]
        assert expected == [published[2], published[3], published[4]]
        assert latest.receive_many_nowait(2) == expected[:2]
        assert latest.receive_many_nowait() == expected[2:]
        with pytest.raises(anyio.WouldBlock):
            latest.receive_many_nowait()
        assert latest.statistics().delivered == 3
        records = states.receive_many_nowait()
        assert [record.transition for record in records] == published  # type: ignore[union-attr]
        assert all(record.state is None for record in records)  # type: ignore[union-attr]


async def test_receive_many_waits_for_the_first_item_then_takes_the_burst() -> None:
    """``receive_many`` parks until something is published, then returns the whole burst in
    one list; a closed subscription fails a parked one; after the hub closes it drains, then
    ends; a limit below 1 is refused."""
    hub = BroadcastHub()
    a, b = key(1), key(2)
    got: list[list[Item]] = []
    errors: list[type[BaseException]] = []

    async def take(sub: Subscription[Item]) -> None:
        got.append(await sub.receive_many())

    async def park(sub: Subscription[Item]) -> None:
        try:
            await sub.receive_many()
        except anyio.ClosedResourceError as exc:
            errors.append(type(exc))

    with anyio.fail_after(5), hub.subscribe(snapshot=False) as sub:
        with pytest.raises(ValueError, match="limit must be at least 1"):
            await sub.receive_many(0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(take, sub)
            await anyio.wait_all_tasks_blocked()
            assert got == []  # parked, not spinning
            burst = [hub.publish(k, act(k), "c") for k in (a, b)]
        assert got == [burst]
        async with anyio.create_task_group() as tg:
            closing = hub.subscribe(snapshot=False)
            tg.start_soon(park, closing)
            await anyio.wait_all_tasks_blocked()
            closing.close()
        assert errors == [anyio.ClosedResourceError]
        last = hub.publish(a, act(a, "idle"), "c")
        hub.close()
        assert await sub.receive_many() == [last]
        with pytest.raises(anyio.EndOfStream):
            await sub.receive_many()


def test_all_subscriber_overflow_marker_then_end_others_unaffected() -> None:
    hub = BroadcastHub()
    ks = [key(i) for i in range(3)]
    with hub.subscribe(buffer=3) as slow, hub.subscribe(buffer=1000) as fast:
        published = [hub.publish(ks[i % 3], act(ks[i % 3], native=f"n{i}"), "c") for i in range(8)]
        assert hub.statistics().overflows == 1
        stats = slow.statistics()
        assert (stats.pending, stats.overflowed, stats.dropped, stats.ended) == (4, True, 5, True)
        items = drain_nowait(slow)
        snap, transitions, markers = split(items)
        assert snap.seq == 0 and transitions == published[:3]
        assert markers[0].next_seq == 4 and markers[0].dropped == 5
        assert "3 transitions behind" in markers[0].reason
        # The marker unregistered the slow subscriber; the fast one still gets everything.
        assert hub.statistics().subscribers == 1
        more = hub.publish(ks[0], act(ks[0], "idle"), "c")
        assert slow.statistics().dropped == 5
        with pytest.raises(anyio.EndOfStream):
            slow.receive_nowait()
        assert [fast.receive_nowait() for _ in range(10)][1:] == [*published, more]
        assert not fast.statistics().overflowed


def test_latest_subscriber_coalesces_per_key_in_last_update_order() -> None:
    hub = BroadcastHub()
    a, b, c = key(1), key(2), key(3)
    with hub.subscribe("latest", snapshot=False) as sub:
        hub.publish(a, act(a, native="1"), "c")
        tb = hub.publish(b, act(b, native="1"), "c")
        hub.publish(c, act(c, native="1"), "c")
        ta = hub.publish(a, act(a, native="2"), "c")  # a moves behind b and c
        tc = hub.publish(c, act(c, native="2"), "c")
        assert sub.statistics().pending == 3 and sub.statistics().coalesced == 2
        assert [sub.receive_nowait() for _ in range(3)] == [tb, ta, tc]
        with pytest.raises(anyio.WouldBlock):
            sub.receive_nowait()


# --- real tasks -----------------------------------------------------------------------------


async def test_mid_stream_subscriber_sees_snapshot_then_contiguous_live_transitions() -> None:
    hub = BroadcastHub()
    n, nkeys = 3000, 25
    halfway = anyio.Event()
    items: list[Item] = []

    async def publisher() -> None:
        for i in range(n):
            k = key(i % nkeys)
            hub.publish(k, act(k, TURNS[i % 4], native=f"n{i}"), "c")
            if i == n // 2:
                halfway.set()
            await anyio.lowlevel.checkpoint()
        hub.close()

    async def subscriber() -> None:
        await halfway.wait()
        with hub.subscribe() as sub:
            async for item in sub:
                items.append(item)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(publisher)
            tg.start_soon(subscriber)

    snap, transitions, markers = split(items)
    assert markers == []
    # It joined while the publisher was running: some history in the snapshot, the rest live.
    assert n // 2 < snap.seq < n
    assert [t.seq for t in transitions] == list(range(snap.seq + 1, n + 1))
    state = fold(snap, transitions, lossless=True)
    assert state == catalog(hub) and len(state) == nkeys


@pytest.mark.parametrize("reading", ["after", "concurrent"])
async def test_slow_all_subscriber_overflows_while_fast_one_gets_everything(reading: str) -> None:
    hub = BroadcastHub()
    n, buffer = 3000, 100
    published: list[Transition] = []
    done, slow_done = anyio.Event(), anyio.Event()
    fast_items: list[Item] = []
    slow_items: list[tuple[Item, int]] = []  # (item, hub.seq when it was received)

    fast = hub.subscribe(snapshot=False)
    slow = hub.subscribe(buffer=buffer)

    async def publisher() -> None:
        for i in range(n):
            k = key(i % 10)
            t = hub.publish(k, act(k, native=f"n{i}"), "c")
            assert t is not None
            published.append(t)
            await anyio.lowlevel.checkpoint()
        done.set()

    async def fast_reader() -> None:
        with fast:
            async for item in fast:
                fast_items.append(item)

    async def slow_reader() -> None:
        if reading == "after":
            await done.wait()
            # The publisher finished all n publishes while this subscriber read nothing.
            assert slow.statistics().delivered == 0
        with slow:
            async for item in slow:
                slow_items.append((item, hub.seq))
                for _ in range(20):  # slower than the publisher: 20 loop rounds per item
                    await anyio.lowlevel.checkpoint()
        slow_done.set()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(fast_reader)
            tg.start_soon(slow_reader)
            tg.start_soon(publisher)
            await done.wait()
            # The slow reader ends by itself after the marker; the fast one when the hub closes.
            await slow_done.wait()
            hub.close()

    assert fast_items == published
    assert not fast.statistics().overflowed
    snap, transitions, markers = split([item for item, _ in slow_items])
    assert snap == Snapshot(seq=0, activities=())
    assert len(markers) == 1
    marker, seq_when_read = slow_items[-1]
    assert isinstance(marker, Overflow)
    assert transitions == published[: marker.next_seq - 1]
    assert len(transitions) >= buffer
    # Every transition from next_seq up to when the marker was read was dropped and counted.
    assert marker.dropped == seq_when_read - marker.next_seq + 1 > 0
    if reading == "after":
        assert (marker.next_seq, marker.dropped) == (buffer + 1, n - buffer)
    assert hub.statistics().overflows == 1 and hub.statistics().published == n


@pytest.mark.parametrize("reading", ["after", "concurrent"])
async def test_slow_latest_subscriber_ends_on_the_final_state_of_every_key(reading: str) -> None:
    hub = BroadcastHub()
    n, nkeys = 10_000, 100
    rng = random.Random(7501)
    last: dict[SessionKey, Transition] = {}
    received: list[Item] = []

    async def publisher() -> None:
        for i in range(n):
            k = key(rng.randrange(nkeys) if i >= nkeys else i)
            t = hub.publish(k, act(k, TURNS[i % 4], native=f"n{i}"), "c")
            assert t is not None
            last[k] = t
            if i % 37 == 0:
                await anyio.lowlevel.checkpoint()
        hub.close()

    async def reader(sub: Subscription[Item]) -> None:
        async for item in sub:
            received.append(item)
            for _ in range(3):  # a slow reader: 3 loop rounds per item
                await anyio.lowlevel.checkpoint()

    with anyio.fail_after(30), hub.subscribe("latest") as sub:
        if reading == "after":
            await publisher()
            assert sub.statistics().pending == 1 + nkeys
            await reader(sub)
        else:
            async with anyio.create_task_group() as tg:
                tg.start_soon(reader, sub)
                tg.start_soon(publisher)

    snap, transitions, _ = split(received)
    assert snap == Snapshot(seq=0, activities=())
    seqs = [t.seq for t in transitions]
    assert seqs == sorted(set(seqs))  # key-arrival order is seq order, no duplicates
    final = {t.key: t for t in transitions}
    assert final == last  # the newest transition of every key, as published
    assert fold(snap, transitions) == catalog(hub)
    stats = sub.statistics()
    assert stats.coalesced == n - len(transitions) > 0
    if reading == "after":
        assert len(transitions) == nkeys
    else:
        assert nkeys < len(transitions) < n


async def test_close_drains_pending_then_end_of_stream() -> None:
    hub = BroadcastHub()
    a, b = key(1), key(2)
    with anyio.fail_after(5):
        with hub.subscribe() as every, hub.subscribe("latest") as latest:
            ts = [
                hub.publish(a, act(a, native="1"), "c"),
                hub.publish(b, act(b, native="1"), "c"),
                hub.publish(a, act(a, native="2"), "c"),
            ]
            hub.close()
            assert hub.statistics().subscribers == 0
            assert [item async for item in every] == [Snapshot(seq=0, activities=()), *ts]
            assert [item async for item in latest] == [Snapshot(seq=0, activities=()), ts[1], ts[2]]
            for sub in (every, latest):
                for _ in range(2):  # stays ended
                    with pytest.raises(anyio.EndOfStream):
                        await sub.receive()
                assert sub.statistics().ended and not sub.statistics().closed
    del every, latest
    gc.collect()  # an unclosed resource would warn here, and warnings are errors


async def test_close_wakes_a_parked_receiver_with_end_of_stream() -> None:
    hub = BroadcastHub()
    outcome: list[str] = []

    async def receive_until_end(sub: Subscription[Item]) -> None:
        assert isinstance(await sub.receive(), Snapshot)
        try:
            await sub.receive()
        except anyio.EndOfStream:
            outcome.append("end")

    with anyio.fail_after(5), hub.subscribe() as sub:
        async with anyio.create_task_group() as tg:
            tg.start_soon(receive_until_end, sub)
            await anyio.wait_all_tasks_blocked()
            assert outcome == []  # parked on its event, not spinning
            hub.close()
    assert outcome == ["end"]


async def test_parked_receiver_wakes_on_publish() -> None:
    hub = BroadcastHub()
    a = key(1)
    got: list[Item] = []
    with anyio.fail_after(5), hub.subscribe(snapshot=False) as sub:
        async with anyio.create_task_group() as tg:

            async def one() -> None:
                got.append(await sub.receive())

            tg.start_soon(one)
            await anyio.wait_all_tasks_blocked()
            t = hub.publish(a, act(a), "c")
        assert got == [t]


async def test_wait_pending_returns_once_the_count_is_pending_or_the_hub_closes() -> None:
    """A batching reader parked in ``wait_pending(n)`` stays parked while fewer are pending
    and returns once ``n`` are (the publish loop wakes it), or when the hub closes."""
    hub = BroadcastHub()
    a = key(1)
    seen: list[int] = []

    async def wait(sub: Subscription[Item], count: int) -> None:
        await sub.wait_pending(count)
        seen.append(sub.pending)

    with anyio.fail_after(5), hub.subscribe(snapshot=False) as sub:
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait, sub, 3)
            await anyio.wait_all_tasks_blocked()
            hub.publish(a, act(a, native="1"), "c")
            hub.publish(a, act(a, native="2"), "c")
            await anyio.wait_all_tasks_blocked()
            assert seen == []
            hub.publish(a, act(a, native="3"), "c")
        assert seen == [3]
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait, sub, 10)
            await anyio.wait_all_tasks_blocked()
            hub.close()
        assert seen == [3, 3]


async def test_closing_the_subscription_fails_a_parked_receiver_and_a_second_receiver_is_busy() -> (
    None
):
    hub = BroadcastHub()
    errors: list[type[BaseException]] = []

    async def park(sub: Subscription[Item]) -> None:
        try:
            await sub.receive()
        except anyio.ClosedResourceError as exc:
            errors.append(type(exc))

    with anyio.fail_after(5):
        sub = hub.subscribe(snapshot=False)
        async with anyio.create_task_group() as tg:
            tg.start_soon(park, sub)
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(anyio.BusyResourceError):
                await sub.receive()
            sub.close()
        assert errors == [anyio.ClosedResourceError]
        assert hub.statistics().subscribers == 0


async def test_async_with_closes_the_subscription() -> None:
    hub = BroadcastHub()
    with anyio.fail_after(5):
        async with hub.subscribe() as sub:
            assert await sub.receive() == Snapshot(seq=0, activities=())
        assert sub.statistics().closed and hub.statistics().subscribers == 0


# --- property: any interleaving of publishes, joins and reads --------------------------------

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.integers(0, 4), st.integers(0, 3), st.booleans()),
        st.tuples(st.just("subscribe"), st.sampled_from(["all", "latest", "small"])),
        st.tuples(st.just("read"), st.integers(0, 20), st.integers(1, 6)),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(ops=_ops)
def test_any_interleaving_all_is_exact_latest_ends_on_catalog(
    ops: list[tuple[object, ...]],
) -> None:
    hub = BroadcastHub()
    published: list[Transition] = []
    subs: list[tuple[Mode, int, Subscription[Item]]] = []
    got: dict[int, list[tuple[Item, int]]] = {}

    def read(index: int, count: int) -> None:
        _, _, sub = subs[index]
        for _ in range(count):
            try:
                got[index].append((sub.receive_nowait(), hub.seq))
            except (anyio.WouldBlock, anyio.EndOfStream):
                return

    for op in ops:
        if op[0] == "publish":
            _, k_index, turn, late = op
            assert isinstance(k_index, int) and isinstance(turn, int)
            k = key(k_index)
            t = hub.publish(k, act(k, TURNS[turn], observed=T0 + int(bool(late))), "c")
            if t is not None:
                published.append(t)
        elif op[0] == "subscribe":
            kind = op[1]
            mode: Mode = "latest" if kind == "latest" else "all"
            buffer = 3 if kind == "small" else 10_000
            got[len(subs)] = []
            subs.append((mode, buffer, hub.subscribe(mode, buffer=buffer)))
        elif subs:
            _, index, count = op
            assert isinstance(index, int) and isinstance(count, int)
            read(index % len(subs), count)

    hub.close()
    final = catalog(hub)
    assert [t.seq for t in published] == list(range(1, len(published) + 1))
    for index, (mode, buffer, sub) in enumerate(subs):
        read(index, 10**6)
        snap, transitions, markers = split([item for item, _ in got[index]])
        later = [t for t in published if t.seq > snap.seq]
        if mode == "latest":
            seqs = [t.seq for t in transitions]
            assert seqs == sorted(set(seqs))
            assert all(t in later for t in transitions)
            assert fold(snap, transitions) == final
            assert markers == []
        elif markers:
            marker = markers[0]
            _, seq_when_read = got[index][-1]
            assert buffer == 3
            assert transitions == later[: marker.next_seq - snap.seq - 1]
            assert len(transitions) >= buffer
            assert marker.dropped == seq_when_read - marker.next_seq + 1
        else:
            assert transitions == later
            assert fold(snap, transitions, lossless=True) == final
        with pytest.raises(anyio.EndOfStream):
            sub.receive_nowait()


async def test_receive_is_a_checkpoint_and_a_cancelled_receive_loses_nothing() -> None:
    hub = BroadcastHub()
    a = key(1)
    with anyio.fail_after(5), hub.subscribe(snapshot=False) as sub:
        t = hub.publish(a, act(a), "c")
        with anyio.CancelScope() as scope:
            scope.cancel()
            await sub.receive()
        assert scope.cancelled_caught
        assert sub.statistics().pending == 1 and sub.statistics().delivered == 0
        assert await sub.receive() == t


def test_ready_now_takes_what_is_pending_in_order_and_stops() -> None:
    """A sink's rest of a burst: everything pending, in order, then nothing (no waiting); the
    end of the stream is left to the next receive; no receive_nowait, nothing."""
    hub = BroadcastHub()
    sub = hub.subscribe("all", snapshot=False)
    published = [hub.publish(key(i), act(key(i)), "t").seq for i in range(3)]
    assert [item.seq for item in ready_now(sub)] == published
    assert list(ready_now(sub)) == []
    hub.publish(key(9), act(key(9)), "t")
    hub.close()
    assert [item.seq for item in ready_now(sub)] == [published[-1] + 1]
    with pytest.raises(anyio.EndOfStream):
        sub.receive_nowait()
    assert list(ready_now(object())) == []
