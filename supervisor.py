"""The supervisor: task group, session actors, routing, restarts and the broadcast hub.

This is paneward's public entry point for hosts::

    async with Supervisor() as sup:
        with sup.subscribe(mode="latest") as sub:
            await sup.inject(message)
            async for item in sub:  # a Snapshot, then Transitions
                ...

One session actor per session key is spawned on the first evidence for it; each
has a bounded mailbox and a task in the supervisor's task group, and is a thin
shell around the pure reducer (:mod:`actors.core.reducer`). An actor that
raises is restarted one_for_one from its last state; the message that crashed it
is dropped and counted; too many crashes within the restart window stop it and
publish attention ``failed`` for its session. Long-running actors (discovery,
listeners, sinks) are started with :meth:`Supervisor.start_actor` under the same
policy. Shutdown stops those producers first, drains every session mailbox, then
ends every subscription.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Final, Literal

import anyio
import msgspec
from anyio.abc import TaskGroup

from actors.core.reducer import (
    SessionMessage,
    SessionState,
    Step,
    derive,
    initial_state,
    reduce,
)
from actors.core.routing import Delivery, RoutingIndex, normalize
from actors.runtime.hub import BroadcastHub, HubClosed, Subscription
from actors.runtime.mailbox import Actor, MailboxClosed, MailboxFull, RestartWindow
from actors.runtime.session import Reducer, SessionActor
from actors.runtime.table import cause_of
from messages.activity import Activity, Rejected, Transition, Unmapped
from messages.codec import Inbound, decode_inbound, revalidate
from messages.common import Attention, SessionKey
from messages.control import Acknowledge
from messages.errors import MessageError, PanewardError

__all__ = [
    "MailboxFull",
    "Supervisor",
    "SupervisorClosed",
    "SupervisorStatistics",
]

logger = logging.getLogger("paneward.supervisor")

OwnerListener = Callable[[int, str | None, bool], None]

_RECENT_RECORDS: Final = 32


class SupervisorClosed(PanewardError):
    """Raised by :meth:`Supervisor.inject` once shutdown has begun (or before start)."""


class SupervisorStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of one supervisor, from :meth:`Supervisor.statistics`.

    ``messages`` inbound messages accepted; ``transitions`` published; ``drops``
    messages not applied (the one that crashed an actor, ones for a stopped
    actor, ones refused by a full mailbox); ``unmapped`` valid payloads no
    harness module could map; ``rejected`` malformed messages; ``restarts`` actor
    restarts; ``overflows`` full mailboxes plus lagging ``all`` subscribers;
    ``sessions`` live session actors; ``stopped`` actors stopped after repeated
    crashes; ``recent_rejected`` / ``recent_unmapped`` the last few records.
    """

    messages: int
    transitions: int
    drops: int
    unmapped: int
    rejected: int
    restarts: int
    overflows: int
    sessions: int
    stopped: int
    actors: int
    listener_errors: int = 0
    recent_rejected: tuple[Rejected, ...] = ()
    recent_unmapped: tuple[Unmapped, ...] = ()


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class Supervisor:
    """Runs and supervises every actor; routes inbound messages; owns the broadcast hub.

    :param mailbox_size: bound of each session actor's mailbox.
    :param max_restarts: crashes tolerated within ``restart_window`` seconds; one more
        stops the actor (session attention ``failed``).
    :param linger: seconds an ended session's actor waits for new evidence before it
        stops (its last activity stays in the catalog).
    :param grace: seconds shutdown waits for mailboxes to drain before cancelling.
    :param reducer: the session reducer (tests inject a faulty one).
    :param clock: monotonic seconds (restart intensity); ``wall_ms`` epoch milliseconds.
    """

    def __init__(
        self,
        *,
        mailbox_size: int = 256,
        max_restarts: int = 3,
        restart_window: float = 10.0,
        linger: float = 10.0,
        grace: float = 5.0,
        reducer: Reducer = reduce,
        clock: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = _wall_ms,
    ) -> None:
        if mailbox_size < 1:
            raise ValueError(f"mailbox_size must be at least 1, got {mailbox_size}")
        self._mailbox_size = mailbox_size
        self._max_restarts = max_restarts
        self._restart_window = restart_window
        self._linger = linger
        self._grace = grace
        self._reducer = reducer
        self._clock = clock
        self._wall_ms = wall_ms
        self._hub = BroadcastHub()
        self._index = RoutingIndex()
        self._sessions: dict[SessionKey, SessionActor] = {}
        self._stopped: set[SessionKey] = set()
        self._owner_listeners: list[OwnerListener] = []
        self._observers: list[Callable[[Inbound], None]] = []
        self._actor_scopes: list[anyio.CancelScope] = []
        self._actors_running = 0
        self._corrections: list[tuple[Activity, str]] = []
        self._publish_listeners: list[Callable[[Transition], None]] = []
        self._listener_errors = 0
        self._tg: TaskGroup | None = None
        self._state: Literal["new", "running", "closing", "closed"] = "new"
        self._recent_rejected: deque[Rejected] = deque(maxlen=_RECENT_RECORDS)
        self._recent_unmapped: deque[Unmapped] = deque(maxlen=_RECENT_RECORDS)
        self._messages = 0
        self._drops = 0
        self._unmapped = 0
        self._rejected = 0
        self._restarts = 0
        self._mailbox_overflows = 0

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Supervisor:
        if self._state != "new":
            raise SupervisorClosed("a Supervisor can be entered only once")
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._state = "running"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._tg is not None
        self._state = "closing"
        try:
            with anyio.CancelScope(shield=True):
                await self._shutdown(graceful=exc_type is None)
        finally:
            self._state = "closed"
            self._hub.close()
        return await self._tg.__aexit__(exc_type, exc, tb)

    async def _shutdown(self, *, graceful: bool) -> None:
        # 1. Stop the producers (discovery, listeners, sinks) so nothing new arrives.
        for scope in self._actor_scopes:
            scope.cancel()
        # 2. Drain: closing the send side lets each actor finish its mailbox, then stop.
        actors = list(self._sessions.values())
        for actor in actors:
            actor.mailbox.close()
        with anyio.move_on_after(self._grace if graceful else 0):
            for actor in actors:
                await actor.done.wait()
        # 3. Whatever did not drain in time is cancelled with the task group.
        if any(not actor.done.is_set() for actor in actors) and self._tg is not None:
            self._tg.cancel_scope.cancel()
        self._hub.close()

    # ------------------------------------------------------------------ injection

    async def inject(self, message: Inbound) -> None:
        """Validate, normalize and route ``message``, waiting for mailbox space.

        :raises MessageError: the message is malformed (counted in ``rejected``).
        :raises SupervisorClosed: the supervisor is not running.
        """
        await self._deliver(self._accept(message, origin="inject"))

    async def inject_bytes(self, data: bytes) -> None:
        """Decode one wire frame (:func:`messages.encode` JSON) and route it like :meth:`inject`.

        Decoding is the validation, so this is the cheapest way in for bytes.
        """
        await self._deliver(self._accept(data, origin="hook"))

    def inject_bytes_nowait(self, data: bytes) -> None:
        """Decode one wire frame and route it like :meth:`inject_nowait`."""
        self._deliver_nowait(self._accept(data, origin="hook"), "frame")

    async def _deliver(self, deliveries: list[Delivery]) -> None:
        for delivery in deliveries:
            actor = self._actor_for(delivery)
            if actor is not None:
                try:
                    await actor.mailbox.send(delivery.message)
                except MailboxClosed:
                    self._drops += 1

    def inject_nowait(self, message: Inbound) -> None:
        """Like :meth:`inject` but never blocks: a full mailbox raises :class:`MailboxFull`.

        Used by producers that must never wait (discovery ticks, the hook socket).
        Every delivery that fits is made; the ones that do not are counted.
        """
        self._deliver_nowait(self._accept(message, origin="inject"), type(message).__name__)

    def _deliver_nowait(self, deliveries: list[Delivery], what: str) -> None:
        full: list[SessionKey] = []
        for delivery in deliveries:
            actor = self._actor_for(delivery)
            if actor is None:
                continue
            try:
                actor.mailbox.send_nowait(delivery.message)
            except MailboxFull:
                self._mailbox_overflows += 1
                self._drops += 1
                full.append(delivery.key)
            except MailboxClosed:
                self._drops += 1
        if full:
            raise MailboxFull(
                f"mailbox full ({self._mailbox_size} pending) for "
                + ", ".join(str(key) for key in full)
                + f": {what} not delivered"
            )

    def _accept(
        self, message: Inbound | bytes, *, origin: Literal["inject", "hook"]
    ) -> list[Delivery]:
        if self._state != "running":
            raise SupervisorClosed(f"supervisor is {self._state}: cannot accept messages")
        try:
            valid = decode_inbound(message) if isinstance(message, bytes) else revalidate(message)
        except MessageError as exc:
            self._reject(str(exc), origin)
            raise
        self._messages += 1
        normalized = normalize(valid)
        if not isinstance(normalized, Unmapped):
            for observer in self._observers:
                observer(normalized)
        if isinstance(normalized, Unmapped):
            self._unmapped += 1
            self._recent_unmapped.append(normalized)
            logger.info(
                "unmapped %s payload (event %s, keys %s)",
                normalized.harness,
                normalized.event,
                ", ".join(normalized.keys),
            )
            return []
        return list(self._index.deliveries(normalized))

    def _reject(self, reason: str, origin: Literal["inject", "hook"]) -> None:
        self._rejected += 1
        self._recent_rejected.append(Rejected(reason=reason, origin=origin, at_ms=self._wall_ms()))
        logger.warning("rejected message: %s", reason)

    def record_rejection(self, reason: str) -> None:
        """Count a message refused before it could be decoded (e.g. by the hook socket)."""
        self._reject(reason, "hook")

    def _actor_for(self, delivery: Delivery) -> SessionActor | None:
        key = delivery.key
        actor = self._sessions.get(key)
        if actor is not None:
            return actor
        if key in self._stopped:
            if isinstance(delivery.message, Acknowledge):
                # The user acknowledged the failure: give the session a fresh actor.
                self._stopped.discard(key)
            else:
                self._drops += 1
                return None
        if not delivery.spawn and not isinstance(delivery.message, Acknowledge):
            return None
        return self._spawn(key, initial_state(key, self._hub.current(key)))

    def _spawn(self, key: SessionKey, state: SessionState) -> SessionActor:
        assert self._tg is not None
        actor = SessionActor(
            key,
            state,
            mailbox_size=self._mailbox_size,
            reducer=self._reducer,
            linger=self._linger,
            restarts=RestartWindow(self._max_restarts, self._restart_window),
        )
        self._sessions[key] = actor
        self._reindex(None, state)
        self._tg.start_soon(actor.run, self, name=f"session {key}")
        return actor

    # ------------------------------------------------------------------ SessionHost

    @property
    def accepting(self) -> bool:
        """True while the supervisor takes new messages (session actors may retire)."""
        return self._state == "running"

    def session_step(
        self, actor: SessionActor, old: SessionState, message: SessionMessage, step: Step
    ) -> None:
        """Called by a session actor after each applied message: re-index, publish."""
        self._reindex(old, step.state)
        if step.publish is not None:
            self._publish(actor.key, step.publish, cause_of(message))

    def session_ended(self, actor: SessionActor, undelivered: int) -> None:
        """Called by a session actor as it stops: forget it (the catalog keeps its state)."""
        self._drops += undelivered
        if self._sessions.get(actor.key) is actor:
            del self._sessions[actor.key]
            self._reindex(actor.state, None)

    def _publish(self, key: SessionKey, activity: Activity, cause: str) -> Transition | None:
        try:
            transition = self._hub.publish(key, activity, cause)
        except HubClosed:
            # Only possible in the last instant of a forced shutdown: counted, not raised.
            self._drops += 1
            return None
        if transition is not None:
            for listener in self._publish_listeners:
                try:
                    listener(transition)
                except Exception as exc:  # a broken recorder must not crash a session
                    self._listener_errors += 1
                    logger.error("publish listener %r failed: %r", listener, exc)
        return transition

    def add_publish_listener(self, listener: Callable[[Transition], None]) -> None:
        """Call ``listener(transition)`` synchronously for every published transition.

        For the store: recording at publish time (a synchronous append to its batch)
        means no subscription queue can lag between a transition and the journal, so a
        killed daemon loses at most the store's own batch window. It must not block.
        """
        self._publish_listeners.append(listener)

    def session_crashed(self, actor: SessionActor, message: SessionMessage, exc: Exception) -> bool:
        """Called when the reducer raised: count it, drop the message, decide restart.

        Returns False when the actor must stop (too many crashes in the window): the
        session then shows attention ``failed`` and its later messages are dropped
        (counted) until the user acknowledges it.
        """
        self._drops += 1
        logger.error("session %s crashed on %s: %r", actor.key, type(message).__name__, exc)
        if actor.restarts.crash(self._clock()):
            self._restarts += 1  # restarted from its last state (the reducer is pure)
            return True
        # Too many crashes: stop this actor and tell the user, leave the siblings be.
        self._stopped.add(actor.key)
        reason = f"session actor stopped after {actor.restarts.recent} crashes: {exc!r}"[:500]
        failed = msgspec.structs.replace(
            actor.state, known=True, failed=Attention("failed", reason, self._wall_ms())
        )
        activity = derive(failed)
        if activity is not None:
            self._publish(actor.key, activity, "Supervisor:stopped")
        actor.state = msgspec.structs.replace(failed, activity=activity)
        return False

    def _reindex(self, old: SessionState | None, new: SessionState | None) -> None:
        before = (old.owner_pid, old.owner_token) if old is not None else (None, None)
        if new is None:
            if old is not None:
                self._index.forget(old)
            after: tuple[int | None, str | None] = (None, None)
        else:
            self._index.update(old, new)
            after = (new.owner_pid, new.owner_token)
        if before != after and self._owner_listeners:
            if before[0] is not None and before[0] not in self._index.owners:
                for listener in self._owner_listeners:
                    listener(before[0], before[1], False)
            if after[0] is not None:
                for listener in self._owner_listeners:
                    listener(after[0], after[1], True)

    # ------------------------------------------------------------------ other actors

    def start_actor(self, actor: Actor, *, name: str | None = None) -> None:
        """Run ``actor.run(self)`` until shutdown, restarting it one_for_one on errors.

        More than ``max_restarts`` crashes within ``restart_window`` stop it (logged
        and counted); the rest of the system keeps running.
        """
        if self._state != "running" or self._tg is None:
            raise SupervisorClosed("start_actor() needs a running supervisor")
        scope = anyio.CancelScope()
        self._actor_scopes.append(scope)
        label = name or type(actor).__name__
        self._tg.start_soon(self._supervise_actor, actor, scope, label, name=label)

    async def _supervise_actor(self, actor: Actor, scope: anyio.CancelScope, label: str) -> None:
        window = RestartWindow(self._max_restarts, self._restart_window)
        self._actors_running += 1
        try:
            with scope:
                while True:
                    try:
                        await actor.run(self)
                        return
                    except Exception as exc:
                        logger.error("actor %s crashed: %r", label, exc)
                        if not window.crash(self._clock()):
                            logger.error("actor %s stopped after %d crashes", label, window.recent)
                            return
                        self._restarts += 1
                        await anyio.sleep(min(0.05 * 2**window.recent, 2.0))  # backoff
        finally:
            self._actors_running -= 1

    def add_observer(self, observer: Callable[[Inbound], None]) -> None:
        """Call ``observer(message)`` synchronously for every accepted inbound message.

        Messages arrive normalized (hook payloads as hints). For actors that learn
        from all evidence (the pane mapper); it must not block.
        """
        self._observers.append(observer)

    def add_owner_listener(self, listener: OwnerListener) -> None:
        """Call ``listener(pid, start_token, added)`` when a session owner appears or goes.

        The pid watcher uses it to keep its candidate set equal to the live owners.
        """
        self._owner_listeners.append(listener)
        for pid, keys in self._index.owners.items():
            token = next(
                (self._sessions[k].state.owner_token for k in keys if k in self._sessions), None
            )
            listener(pid, token, True)

    # ------------------------------------------------------------------ restore

    def restore(
        self,
        activities: Iterable[Activity],
        seq: int,
        owners: Mapping[SessionKey, tuple[int, str]] | None = None,
        corrections: Iterable[tuple[Activity, str]] = (),
    ) -> None:
        """Seed the catalog from the store before any message (nothing is published).

        Restored sessions that are ``running`` get an actor at once, with their owner
        in the routing index, so that a later ``ProcessGone`` ends them (the same live
        incarnation stays ``running`` without a flicker). ``corrections`` are the
        activities of restored sessions whose owner could not be re-proven, with the
        cause to publish them under: call :meth:`publish_corrections` once the
        subscribers that must see them (the store) are in place.
        """
        self._corrections = list(corrections)
        if self._state != "running" or self._messages:
            raise SupervisorClosed("restore() must come right after entering the supervisor")
        restored = list(activities)
        self._hub.restore(restored, seq)
        owners = owners or {}
        for activity in restored:
            if activity.presence != "running":
                continue
            state = initial_state(activity.key, activity)
            owner = owners.get(activity.key)
            if owner is not None:
                state = msgspec.structs.replace(state, owner_pid=owner[0], owner_token=owner[1])
            self._spawn(activity.key, state)

    def publish_corrections(self) -> int:
        """Publish the corrections given to :meth:`restore`; return how many changed."""
        published = 0
        for activity, cause in self._corrections:
            if self._publish(activity.key, activity, cause) is not None:
                published += 1
        self._corrections = []
        return published

    # ------------------------------------------------------------------ reading

    def subscribe(
        self, mode: Literal["all", "latest"] = "all", snapshot: bool = True, *, buffer: int = 1024
    ) -> Subscription:
        """Subscribe to transitions: first a :class:`~messages.Snapshot`, then live ones.

        Use as ``with`` or ``async with``. ``all`` is lossless and bounded (a lagging
        subscriber gets :class:`~messages.Overflow` and ends); ``latest`` coalesces per
        session. Subscriptions end cleanly at shutdown.
        """
        return self._hub.subscribe(mode, snapshot, buffer=buffer)

    def snapshot(self) -> tuple[Activity, ...]:
        """The current activity of every known session (live or ended)."""
        return self._hub.snapshot().activities

    @property
    def seq(self) -> int:
        """The seq of the last published transition."""
        return self._hub.seq

    def owner_of(self, key: SessionKey) -> tuple[int, str] | None:
        """The owner incarnation (pid, start token) of a live session, for the store."""
        actor = self._sessions.get(key)
        if actor is None:
            return None
        state = actor.state
        if state.owner_pid is None or state.owner_token is None:
            return None
        return (state.owner_pid, state.owner_token)

    def statistics(self) -> SupervisorStatistics:
        """A frozen record of the counters (see :class:`SupervisorStatistics`)."""
        hub = self._hub.statistics()
        return SupervisorStatistics(
            messages=self._messages,
            transitions=hub.published,
            drops=self._drops,
            unmapped=self._unmapped,
            rejected=self._rejected,
            restarts=self._restarts,
            overflows=self._mailbox_overflows + hub.overflows,
            sessions=len(self._sessions),
            stopped=len(self._stopped),
            actors=self._actors_running,
            listener_errors=self._listener_errors,
            recent_rejected=tuple(self._recent_rejected),
            recent_unmapped=tuple(self._recent_unmapped),
        )
