"""The broadcast hub: the session catalog, the global ``seq`` and every subscription.

Who calls what:

- The supervisor owns one :class:`BroadcastHub`. At start it calls :meth:`BroadcastHub.restore`
  with what the store persisted, then, for every step its session actors' reducer publishes,
  :meth:`BroadcastHub.publish` with the new :class:`~messages.Activity` and the reducer state
  behind it. The reducer alone decides that a step is a transition (docs/design.md §4, Publishing);
  the hub numbers it and hands it to every subscriber.
- Sinks (tmux badges, the store, ``paneward watch``, tests) call :meth:`BroadcastHub.subscribe`
  and read :class:`~messages.Snapshot`, then :class:`~messages.Transition` items, possibly
  ended by one :class:`~messages.Overflow` marker (docs/design.md §7). A subscription made with
  ``states=True`` (the store's) gets each with the reducer state behind it
  (:class:`StateSnapshot`, :class:`StateTransition`), captured at publish time.
- At shutdown the supervisor calls :meth:`BroadcastHub.close`: every subscriber drains what is
  pending and then gets :class:`anyio.EndOfStream`.

The hub is synchronous and has no task of its own: publishing never awaits and never blocks,
whatever the subscribers do. Delivery costs one append (``all``) or one dict update
(``latest``) per subscriber, plus setting the subscriber's wake-up :class:`anyio.Event` if a
task is parked on it. It is not thread-safe: call it from the event loop thread only (the
supervisor's actors all run there).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any, Literal, NamedTuple, TypeAlias, TypeVar, cast, final, overload

import anyio
import anyio.lowlevel
import msgspec
from anyio.abc import ObjectReceiveStream

from actors.core.session.reducer import SessionState
from messages import (
    Activity,
    MessageError,
    Overflow,
    PanewardError,
    SessionKey,
    Snapshot,
    Transition,
)

__all__ = [
    "DEFAULT_BUFFER",
    "BroadcastHub",
    "HubClosed",
    "HubError",
    "HubStatistics",
    "Item",
    "Mode",
    "StateItem",
    "StateSnapshot",
    "StateTransition",
    "Subscription",
    "SubscriptionStatistics",
    "ready_now",
]

Mode: TypeAlias = Literal["all", "latest"]


class StateTransition(NamedTuple):
    """A transition with the reducer state that published it (``states=True`` subscriptions).

    Made once per publish and shared by every subscriber.
    """

    transition: Transition
    state: SessionState | None


class StateSnapshot(NamedTuple):
    """A snapshot with each activity's reducer state (``states=True`` subscriptions)."""

    snapshot: Snapshot
    states: tuple[SessionState | None, ...]  # aligned with ``snapshot.activities``


Item: TypeAlias = Snapshot | Transition | Overflow
StateItem: TypeAlias = StateSnapshot | StateTransition | Overflow

#: Pending transitions an ``all`` subscriber may hold before it is overflowed.
DEFAULT_BUFFER = 1024


class HubError(PanewardError):
    """Raised when the hub is used out of order (e.g. :meth:`BroadcastHub.restore` after the
    first publish or while a subscriber exists)."""


class HubClosed(HubError):
    """Raised by :meth:`BroadcastHub.publish`, :meth:`~BroadcastHub.restore` and
    :meth:`~BroadcastHub.subscribe` after :meth:`BroadcastHub.close`."""


class HubStatistics(msgspec.Struct, kw_only=True):
    """The hub's counters: one record kept by the hub, copied by :meth:`BroadcastHub.statistics`.

    ``seq`` is the last assigned sequence number; ``sessions`` the catalog size (ended sessions
    included); ``published`` the transitions numbered since construction (restored ones not
    included); ``rejected`` the publishes refused as invalid; ``subscribers`` the subscriptions
    still registered; ``overflows`` the ``all`` subscriptions that fell behind and were given an
    :class:`~messages.Overflow` marker.
    """

    seq: int = 0
    sessions: int = 0
    published: int = 0
    rejected: int = 0
    subscribers: int = 0
    overflows: int = 0
    closed: bool = False


class SubscriptionStatistics(msgspec.Struct, kw_only=True):
    """The counters of one subscription: one record it keeps (``mode`` and ``buffer`` set at
    subscribe time), copied by :meth:`Subscription.statistics` with ``pending`` and
    ``overflowed`` computed then.

    ``pending`` counts the items ready to receive (snapshot included, overflow marker not);
    ``delivered`` the items already received; ``coalesced`` the transitions a ``latest``
    subscriber never saw because a newer one for the same key replaced them; ``dropped`` the
    transitions an overflowed ``all`` subscriber missed up to when it read the marker;
    ``overflowed`` whether that happened; ``ended`` whether the subscription will end (hub
    closed or overflowed) once drained; ``closed`` whether the subscriber closed it.
    """

    mode: Mode = "all"
    buffer: int = DEFAULT_BUFFER
    pending: int = 0
    delivered: int = 0
    coalesced: int = 0
    dropped: int = 0
    overflowed: bool = False
    ended: bool = False
    closed: bool = False


def _key_order(activity: Activity) -> tuple[str, str]:
    return (activity.key.harness, activity.key.session_id)


_ItemT = TypeVar("_ItemT", bound=Item | StateItem)


@final
class Subscription(ObjectReceiveStream[_ItemT]):
    """One subscriber's view of the hub: a snapshot, then live transitions.

    Made only by :meth:`BroadcastHub.subscribe`; read by one task at a time, with
    ``async for item in sub``, ``await sub.receive()`` or ``sub.receive_nowait()``.
    Use it as a context manager (``with`` or ``async with``): leaving it unregisters the
    subscription, which a forgotten one would otherwise stay until the hub closes.

    Order: the :class:`~messages.Snapshot` (if requested) comes first; every transition that
    follows has ``seq`` greater than ``snapshot.seq``. In ``all`` mode the transitions are
    every one published since, in ``seq`` order, with none missing, unless the subscriber falls
    ``buffer`` transitions behind: it then receives what was queued, one
    :class:`~messages.Overflow` marker and :class:`anyio.EndOfStream`. In ``latest`` mode only
    the newest pending transition of each key is kept; items come in order of their last
    update (which is also ``seq`` order), so a slow reader skips intermediate states but
    always ends on the final state of every key. A ``states`` subscription
    (``Subscription[StateItem]``) gets the same items as :class:`StateSnapshot` /
    :class:`StateTransition`, each with the reducer state captured when it was published.

    Receiving never blocks the publisher. There is no task per subscription: a parked
    :meth:`receive` or :meth:`wait_pending` waits on an :class:`anyio.Event` that the hub sets
    on delivery and the receiver replaces after each wake-up (an anyio Event cannot be reset).
    """

    def __init__(
        self,
        hub: BroadcastHub,
        mode: Mode,
        buffer: int,
        head: StateSnapshot | None,
        *,
        states: bool,
    ) -> None:
        self._hub: BroadcastHub | None = hub
        self._stats = SubscriptionStatistics(mode=mode, buffer=buffer)
        self._states = states
        self._head = head
        self._queue: deque[StateTransition] = deque()
        # The queue the hub appends to directly while this ``all`` subscriber is live and has
        # not overflowed (``None`` otherwise), and the room it has (its ``buffer``).
        self._open: deque[StateTransition] | None = self._queue if mode == "all" else None
        self._room = buffer
        self._latest: dict[SessionKey, StateTransition] = {}
        self._waiter: anyio.Event | None = None
        self._want = 1  # wake the waiter once this many items are pending
        # Set when an ``all`` subscriber fell behind: the seq of the first transition it lost.
        self._overflow_next_seq: int | None = None

    # --- called by the hub (same thread, never awaits) -------------------------------------

    def _deliver(self, record: StateTransition) -> bool:
        """Queue ``record``; return True if this delivery overflowed the subscription."""
        stats = self._stats
        if stats.mode == "all":
            if self._overflow_next_seq is not None:
                stats.dropped += 1
                return False
            queue = self._queue
            if len(queue) >= stats.buffer:
                # Freeze the queue: the subscriber keeps what it has, then learns exactly
                # where its gap starts. Publishing goes on unaffected.
                self._overflow_next_seq = record.transition.seq
                self._open = None
                stats.dropped = 1
                stats.ended = True
                self._wake()
                return True
            queue.append(record)
            if len(queue) < self._want:
                return False  # a batching waiter (wait_pending) wants more first
        else:
            # pop + insert moves the key to the end: items stay in last-update (= seq) order.
            key = record.transition.key
            if self._latest.pop(key, None) is not None:
                stats.coalesced += 1
            self._latest[key] = record
        self._wake()
        return False

    def _end(self) -> None:
        """The hub closed: drain what is pending, then EndOfStream."""
        self._hub = None
        self._stats.ended = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None:
            self._waiter.set()

    def _detach(self) -> None:
        if self._hub is not None:
            self._hub._unregister(self)
            self._hub = None

    # --- the receiving side -----------------------------------------------------------------

    @property
    def mode(self) -> Mode:
        """``"all"`` (lossless until overflow) or ``"latest"`` (coalesced per key)."""
        return self._stats.mode

    @property
    def pending(self) -> int:
        """Items ready to receive now (snapshot included, overflow marker not)."""
        return (self._head is not None) + len(self._queue) + len(self._latest)

    def receive_nowait(self) -> _ItemT:
        """Return the next item without waiting.

        :raises ~anyio.WouldBlock: if nothing is pending and the subscription is still live
        :raises ~anyio.EndOfStream: once everything was received after the hub closed or
            after the :class:`~messages.Overflow` marker
        :raises ~anyio.ClosedResourceError: if this subscription was closed by its owner
        """
        queue = self._queue
        if queue and self._head is None:
            # The hot path: a queued transition (the queue is empty once closed).
            self._stats.delivered += 1
            record = queue.popleft()
            return cast(_ItemT, record if self._states else record.transition)
        stats = self._stats
        if stats.closed:
            raise anyio.ClosedResourceError
        item: StateItem
        if self._head is not None:
            item, self._head = self._head, None
        elif self._queue:
            item = self._queue.popleft()
        elif self._latest:
            item = self._latest.pop(next(iter(self._latest)))
        elif self._overflow_next_seq is not None:
            # Unregister only now, so ``dropped`` counts every transition missed until the
            # subscriber learned of its gap.
            self._detach()
            item = Overflow(
                next_seq=self._overflow_next_seq,
                dropped=stats.dropped,
                reason=(
                    f"subscriber fell {stats.buffer} transitions behind; resubscribe for a snapshot"
                ),
            )
            self._overflow_next_seq = None
        elif stats.ended:
            raise anyio.EndOfStream
        else:
            raise anyio.WouldBlock
        stats.delivered += 1
        if self._states or isinstance(item, Overflow):
            return cast(_ItemT, item)
        if isinstance(item, StateTransition):
            return cast(_ItemT, item.transition)
        return cast(_ItemT, item.snapshot)

    def receive_many_nowait(self, limit: int = DEFAULT_BUFFER) -> list[_ItemT]:
        """Return the items ready now, at most ``limit`` (at least one), in order.

        For a reader that takes everything pending at each wake-up (the sinks, the watch
        fan-out): one call per wake-up instead of one per transition. The items are those
        :meth:`receive_nowait` would return one by one: the :class:`~messages.Snapshot` and the
        :class:`~messages.Overflow` marker always come alone (a batch is transitions only, and
        the marker follows the last one queued, in the next call).

        :raises ~anyio.WouldBlock: if nothing is pending and the subscription is still live
        :raises ~anyio.EndOfStream: once everything was received after the hub closed or
            after the :class:`~messages.Overflow` marker
        :raises ~anyio.ClosedResourceError: if this subscription was closed by its owner
        """
        if self._head is not None:
            return [self.receive_nowait()]
        queue = self._queue
        if queue:
            count = min(limit, len(queue))
            popleft = queue.popleft
            records = [popleft() for _ in range(count)]
        elif self._latest:
            latest = self._latest
            if limit >= len(latest):
                records = list(latest.values())
                latest.clear()
            else:
                keys = list(itertools.islice(latest, limit))
                records = [latest.pop(key) for key in keys]
        else:
            return [self.receive_nowait()]  # the marker, or what ends or blocks
        self._stats.delivered += len(records)
        if self._states:
            return cast(list[_ItemT], records)
        return cast(list[_ItemT], [record.transition for record in records])

    async def receive_many(self, limit: int = DEFAULT_BUFFER) -> list[_ItemT]:
        """Wait for at least one item, then return every item ready, at most ``limit``, in
        order (as :meth:`receive_many_nowait`). Always a checkpoint.

        :raises ~anyio.EndOfStream: once everything was received after the hub closed or
            after the :class:`~messages.Overflow` marker
        :raises ~anyio.ClosedResourceError: if this subscription is (or gets, while waiting)
            closed by its owner
        :raises ~anyio.BusyResourceError: if another task is already waiting on it
        :raises ValueError: if ``limit`` is below 1
        """
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        await anyio.lowlevel.checkpoint()
        while True:
            try:
                return self.receive_many_nowait(limit)
            except anyio.WouldBlock:
                pass
            await self._park(1)

    async def receive(self) -> _ItemT:
        """Wait for and return the next item. Always a checkpoint.

        :raises ~anyio.EndOfStream: once everything was received after the hub closed or
            after the :class:`~messages.Overflow` marker
        :raises ~anyio.ClosedResourceError: if this subscription is (or gets, while waiting)
            closed by its owner
        :raises ~anyio.BusyResourceError: if another task is already waiting on it
        """
        await anyio.lowlevel.checkpoint()
        while True:
            try:
                return self.receive_nowait()
            except anyio.WouldBlock:
                pass
            await self._park(1)

    async def wait_pending(self, count: int) -> None:
        """Wait until at least ``count`` items are pending, or the subscription ends.

        For a batching reader (the store): it is woken once per batch, not once per
        transition. Cancel it (``move_on_after``) to bound the wait.

        :raises ~anyio.ClosedResourceError: if this subscription is (or gets) closed
        :raises ~anyio.BusyResourceError: if another task is already waiting on it
        """
        while True:
            if self._stats.closed:
                raise anyio.ClosedResourceError
            if self.pending >= count or self._stats.ended:
                return
            await self._park(count)

    async def _park(self, count: int) -> None:
        if self._waiter is not None:
            raise anyio.BusyResourceError("receiving from")
        self._waiter = event = anyio.Event()
        self._want = count
        try:
            await event.wait()
        finally:
            self._waiter = None
            self._want = 1

    def close(self) -> None:
        """Unregister and discard whatever is pending. Idempotent; never blocks.

        A task parked in :meth:`receive` gets :class:`anyio.ClosedResourceError`.
        """
        if self._stats.closed:
            return
        self._stats.closed = True
        self._open = None
        self._detach()
        self._head = None
        self._queue.clear()
        self._latest.clear()
        self._overflow_next_seq = None
        self._wake()

    async def aclose(self) -> None:
        """Same as :meth:`close` (for ``async with``)."""
        self.close()

    def __enter__(self) -> Subscription[_ItemT]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.close()

    def statistics(self) -> SubscriptionStatistics:
        """A point-in-time copy of this subscription's counters (see
        :class:`SubscriptionStatistics`)."""
        return msgspec.structs.replace(
            self._stats, pending=self.pending, overflowed=self._stats.dropped > 0
        )

    def __repr__(self) -> str:
        stats = self.statistics()
        return (
            f"<Subscription mode={stats.mode} pending={stats.pending} "
            f"delivered={stats.delivered} ended={stats.ended} closed={stats.closed}>"
        )


def ready_now(items: object) -> Iterator[Any]:
    """What ``items`` holds ready now, taken without a scheduler round each (empty when it has
    no ``receive_nowait``).

    For a sink that reads its subscription (or a memory stream, in tests) one item at a time:
    after each ``async for`` item it takes the rest of the burst from here, so a burst of
    transitions costs one wake-up, not one per transition (the store, the notification sink).
    Ends at the first item not ready yet, and at the end of the stream or its closing (the next
    receive then raises either).
    """
    receive = getattr(items, "receive_nowait", None)
    if receive is None:
        return
    while True:
        try:
            yield receive()
        except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
            return


@final
class BroadcastHub:
    """The catalog of every session's current :class:`~messages.Activity` and its subscribers.

    Owned by the supervisor; :meth:`publish` is called for every step the session reducer
    publishes, :meth:`subscribe` by sinks. The catalog keeps ended sessions: an actor stopping
    does not remove its key (docs/design.md §2, "its last activity stays in the catalog"), and with
    each activity the reducer state behind it (:meth:`state_of`), so that a session coming back gets
    its whole state, not a reconstruction from the activity.

    The hub does not decide whether a publish is a change: the reducer does (docs/design.md §4,
    Publishing). Folding a snapshot plus the transitions after it always reproduces
    :meth:`snapshot`.
    """

    def __init__(self) -> None:
        self._catalog: dict[SessionKey, Activity] = {}
        self._states: dict[SessionKey, SessionState] = {}
        # Any: each subscription yields Item or StateItem; the hub only delivers records to them.
        self._subscribers: dict[Subscription[Any], None] = {}
        self._snapshot_cache: Snapshot | None = None
        self._stats = HubStatistics()

    @property
    def seq(self) -> int:
        """The last assigned sequence number (0 before any, or the restored one)."""
        return self._stats.seq

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._stats.closed

    def restore(
        self, activities: Iterable[Activity | SessionState], seq: int
    ) -> None:
        """Seed the catalog and the sequence counter from the store. Publishes nothing.

        Each item is a published activity, or a reducer state whose ``activity`` is its
        published one. Called by the supervisor once at start, before any publish and any
        subscriber. The input is validated as a whole first: on error nothing changes.

        :raises HubClosed: after :meth:`close`
        :raises HubError: after the first publish or while a subscriber exists
        :raises ~messages.MessageError: if ``seq`` is negative or lower than :attr:`seq`, a key
            appears twice, or a state has no published activity
        """
        stats = self._stats
        if stats.closed:
            raise HubClosed("cannot restore: the broadcast hub is closed")
        if stats.published or self._subscribers:
            raise HubError(
                f"cannot restore after start: {stats.published} transitions published, "
                f"{len(self._subscribers)} subscribers"
            )
        if seq < stats.seq:
            raise MessageError(f"cannot restore seq {seq}: the hub is already at seq {stats.seq}")
        seeded: dict[SessionKey, Activity] = {}
        states: dict[SessionKey, SessionState] = {}
        for item in activities:
            if isinstance(item, SessionState):
                if item.activity is None:
                    raise MessageError(f"cannot restore {item.key}: it never published")
                states[item.key] = item
                item = item.activity
            if item.key in seeded:
                raise MessageError(f"cannot restore: session {item.key} appears twice")
            seeded[item.key] = item
        self._catalog.update(seeded)
        self._states.update(states)
        stats.seq = seq
        stats.sessions = len(self._catalog)
        self._snapshot_cache = None

    def publish(
        self, key: SessionKey, after: Activity, cause: str, state: SessionState | None = None
    ) -> Transition:
        """Record ``after`` (and the reducer ``state`` behind it) as ``key``'s and broadcast it.

        Never blocks. Numbers the transition with the next ``seq``.

        :raises HubClosed: after :meth:`close`
        :raises ~messages.MessageError: if ``after.key`` is not ``key`` (counted as
            ``rejected``; nothing changes)
        """
        stats = self._stats
        if stats.closed:
            raise HubClosed(f"cannot publish {cause!r} for {key}: the broadcast hub is closed")
        if after.key != key:
            stats.rejected += 1
            raise MessageError(
                f"cannot publish {cause!r} for {key}: the activity is for {after.key}"
            )
        catalog = self._catalog
        stats.seq += 1
        transition = Transition(
            seq=stats.seq, key=key, after=after, cause=cause, before=catalog.get(key)
        )
        catalog[key] = after
        if state is not None:
            self._states[key] = state
        self._snapshot_cache = None
        stats.published += 1
        stats.sessions = len(catalog)
        record = StateTransition(transition, state)
        for subscription in self._subscribers:
            # The common case inline (an ``all`` subscriber with room): one append, and a
            # wake-up only for a reader parked for it. Everything else: ``_deliver``.
            queue = subscription._open
            if queue is not None and len(queue) < subscription._room:
                queue.append(record)
                waiter = subscription._waiter
                if waiter is not None and len(queue) >= subscription._want:
                    waiter.set()
            elif subscription._deliver(record):
                stats.overflows += 1
        return transition

    def keep(self, state: SessionState) -> None:
        """Remember ``state`` as the session's newest reducer state without publishing.

        Called by the supervisor when a session actor retires: what its reducer learnt since
        its last publish (no visible change) is kept for a later return of the session.
        """
        if state.key in self._catalog:
            self._states[state.key] = state

    def forget(self, key: SessionKey) -> None:
        """Drop ``key`` from the catalog, its reducer state with it (nothing is published).

        Called by the supervisor right after publishing the session's last transition
        (:attr:`~messages.Transition.forgets`): subscribers saw that transition, and no later
        snapshot has the session.
        """
        if self._catalog.pop(key, None) is not None:
            self._snapshot_cache = None
        self._states.pop(key, None)
        self._stats.sessions = len(self._catalog)

    def current(self, key: SessionKey) -> Activity | None:
        """Return ``key``'s current activity, or ``None`` if the hub never saw it."""
        return self._catalog.get(key)

    def state_of(self, key: SessionKey) -> SessionState | None:
        """Return ``key``'s newest reducer state, or ``None`` if none was published with it."""
        return self._states.get(key)

    def snapshot(self) -> Snapshot:
        """Return every session's activity, sorted by key, as of :attr:`seq`."""
        if self._snapshot_cache is None:
            self._snapshot_cache = Snapshot(
                seq=self._stats.seq,
                activities=tuple(sorted(self._catalog.values(), key=_key_order)),
            )
        return self._snapshot_cache

    @overload
    def subscribe(
        self,
        mode: Mode = ...,
        snapshot: bool = ...,
        *,
        buffer: int = ...,
        states: Literal[False] = ...,
    ) -> Subscription[Item]: ...

    @overload
    def subscribe(
        self,
        mode: Mode = ...,
        snapshot: bool = ...,
        *,
        buffer: int = ...,
        states: Literal[True],
    ) -> Subscription[StateItem]: ...

    def subscribe(
        self,
        mode: Mode = "all",
        snapshot: bool = True,
        *,
        buffer: int = DEFAULT_BUFFER,
        states: bool = False,
    ) -> Subscription[Item] | Subscription[StateItem]:
        """Register a subscriber and return its :class:`Subscription`.

        Synchronous, hence atomic on the event loop: the snapshot is taken at this instant and
        the subscription receives every transition published after it, so there is neither a
        gap nor a duplicate between the two. ``buffer`` bounds an ``all`` subscriber's pending
        transitions; a ``latest`` subscriber holds at most one per key and ignores it.
        ``states=True`` delivers :class:`StateSnapshot` / :class:`StateTransition` items.

        :raises HubClosed: after :meth:`close`
        :raises ValueError: for an unknown ``mode`` or a ``buffer`` below 1
        """
        if self._stats.closed:
            raise HubClosed("cannot subscribe: the broadcast hub is closed")
        if mode not in ("all", "latest"):
            raise ValueError(f"unknown subscription mode {mode!r}; expected 'all' or 'latest'")
        if buffer < 1:
            raise ValueError(f"buffer must be at least 1, got {buffer}")
        head: StateSnapshot | None = None
        if snapshot:
            snap = self.snapshot()
            head = StateSnapshot(
                snap, tuple(self._states.get(a.key) for a in snap.activities) if states else ()
            )
        subscription: Subscription[Item] | Subscription[StateItem]
        if states:
            subscription = Subscription[StateItem](self, mode, buffer, head, states=True)
        else:
            subscription = Subscription[Item](self, mode, buffer, head, states=False)
        self._subscribers[subscription] = None
        self._stats.subscribers = len(self._subscribers)
        return subscription

    def _unregister(self, subscription: Subscription[Any]) -> None:
        self._subscribers.pop(subscription, None)
        self._stats.subscribers = len(self._subscribers)

    def close(self) -> None:
        """End every subscription cleanly and refuse further publishes. Idempotent.

        Subscribers still receive what is pending (including an overflow marker), then
        :class:`anyio.EndOfStream`. The catalog stays readable.
        """
        if self._stats.closed:
            return
        self._stats.closed = True
        subscriptions = list(self._subscribers)
        self._subscribers.clear()
        self._stats.subscribers = 0
        for subscription in subscriptions:
            subscription._end()

    def statistics(self) -> HubStatistics:
        """A point-in-time copy of the hub's counters (see :class:`HubStatistics`)."""
        return msgspec.structs.replace(self._stats)
