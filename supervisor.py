"""The supervisor: task group, session actors, routing, restarts and the broadcast hub.

This is paneward's public entry point for hosts::

    async with Supervisor() as sup:
        with sup.subscribe(mode="latest") as sub:
            await sup.inject(message)
            async for item in sub:  # a Snapshot, then Transitions
                ...

One session actor per session key is spawned on the first evidence for it
(:class:`actors.runtime.sessions.Sessions` keeps them, with the rules for a new one, their
crashes and their retirement); each has a bounded mailbox, and a task in the supervisor's
task group only while its session must wait for something (see
:class:`actors.runtime.session.SessionActor`: otherwise its messages are applied by the task
that delivers them), and is a thin shell around the pure reducer
(:mod:`actors.core.session.reducer`). An actor that raises is restarted one_for_one from its
last state; the message that crashed it is dropped and counted; too many crashes within the
restart window stop it and publish attention ``failed`` for its session. Long-running actors
(discovery, listeners, sinks) are started with :meth:`Supervisor.start_actor` /
:meth:`Supervisor.start_listener` under the same policy, supervised by
:class:`actors.runtime.children.Children`. Shutdown stops those producers first, drains every
session mailbox, then ends every subscription.

This module is the wiring: ingress, routing, the per-message path to a session actor and
from its step to the hub, and the counters.

Wiring (the one mechanism, :mod:`actors.runtime.mailbox`): messages come in through
:meth:`inject` / :meth:`inject_nowait` (built in Python: validated as objects) or
:meth:`deliver_nowait` (decoded from the wire: valid already), are normalized
(:func:`actors.harnesses.catalog.normalize`) and routed to session actors and to the
listeners that accept their type; transitions go out through :meth:`subscribe`.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Final, Literal, overload

import anyio
import anyio.lowlevel
import msgspec
from anyio.abc import TaskGroup

from actors.core.clock import now_ms
from actors.core.install.forwarder_js import ForwarderDrops
from actors.core.session.causes import cause_of
from actors.core.session.reducer import SessionState, Step, initial_state, reduce, reprove, restored
from actors.core.session.routing import Delivery, RoutingIndex
from actors.harnesses.catalog import PROOF_TABLE, normalize
from actors.runtime.children import ActorState, Children, EssentialActorStopped
from actors.runtime.hub import (
    DEFAULT_BUFFER,
    BroadcastHub,
    HubClosed,
    Item,
    StateItem,
    Subscription,
)
from actors.runtime.mailbox import Actor, Listener, MailboxClosed, MailboxFull
from actors.runtime.session import Reducer, SessionActor
from actors.runtime.sessions import Sessions
from messages.activity import Activity, Rejected, Transition, Unmapped
from messages.codec import Inbound, SessionMessage, decode_inbound, revalidate
from messages.common import SessionKey
from messages.control import Forget
from messages.errors import MessageError, PanewardError
from messages.evidence import NotifyHook

__all__ = [
    "DEFAULT_MAX_SESSIONS",
    "ActorState",
    "EssentialActorStopped",
    "MailboxFull",
    "Supervisor",
    "SupervisorClosed",
    "SupervisorStatistics",
]

logger = logging.getLogger("paneward.supervisor")

_RECENT_RECORDS: Final = 32
#: The default session reducer: :func:`actors.core.session.reducer.reduce` handed what each harness
#: can prove (:data:`actors.harnesses.catalog.PROOF_TABLE`), so nothing a harness cannot prove is
#: ever published as proven.
CATALOG_REDUCER: Final[Reducer] = functools.partial(reduce, proof_table=PROOF_TABLE)
#: Live session actors at most; evidence for one more new session is refused (counted in
#: ``sessions_refused``) until one retires. Each costs ~5 KB while it has no task (bench/RESULTS.md,
#: "The runtime's own cost").
DEFAULT_MAX_SESSIONS: Final = 4096

class SupervisorClosed(PanewardError):
    """Raised by :meth:`Supervisor.inject` once shutdown has begun (or before start)."""


class SupervisorStatistics(msgspec.Struct, kw_only=True):
    """Counters of one supervisor, from :meth:`Supervisor.statistics` (a copy).

    ``messages`` inbound messages accepted; ``transitions`` published; ``drops``
    messages not applied (the one that crashed an actor, ones for a stopped
    actor, ones refused by a full mailbox); ``unmapped`` valid payloads no
    harness module could map; ``rejected`` malformed messages; ``restarts`` actor
    restarts; ``overflows`` full mailboxes plus lagging ``all`` subscribers;
    ``sessions`` live session actors; ``inline`` messages applied at once by the task that
    delivered them (nothing was queued for their actor: no task of it woken); ``stopped``
    session actors stopped after repeated crashes; ``sessions_refused`` messages for a new
    session refused because ``max_sessions`` actors were live; ``forwarder_dropped`` frames
    paneward's OpenCode/Pi forwarders dropped in the agent's process (their frames say how
    many: :class:`actors.core.install.forwarder_js.ForwarderDrops`); ``actors`` supervised
    long-running actors running; ``actor_states`` the state of each long-running actor by name
    (``running``, ``restarting``, ``stopped`` after too many crashes, ``done``); ``failed`` the
    essential actor that stopped, if one did; ``recent_rejected`` / ``recent_unmapped`` the last
    few records.
    """

    messages: int = 0
    transitions: int = 0
    drops: int = 0
    unmapped: int = 0
    rejected: int = 0
    restarts: int = 0
    overflows: int = 0
    sessions: int = 0
    inline: int = 0
    stopped: int = 0
    sessions_refused: int = 0
    forwarder_dropped: int = 0
    actors: int = 0
    actor_states: dict[str, ActorState] = msgspec.field(default_factory=dict)
    failed: str | None = None
    recent_rejected: tuple[Rejected, ...] = ()
    recent_unmapped: tuple[Unmapped, ...] = ()


class Supervisor:
    """Runs and supervises every actor; routes inbound messages; owns the broadcast hub.

    :param mailbox_size: bound of each session actor's mailbox.
    :param max_restarts: crashes tolerated within ``restart_window`` seconds; one more
        stops the actor (session attention ``failed``).
    :param linger: seconds an ended session's actor waits for new evidence before it
        stops (its last activity stays in the catalog).
    :param grace: seconds shutdown waits for mailboxes to drain before cancelling.
    :param reducer: the session reducer (default :data:`CATALOG_REDUCER`; tests inject a faulty
        one).
    :param clock: monotonic seconds (restart intensity); ``wall_ms`` epoch milliseconds.
    :param max_sessions: live session actors at most; evidence that would spawn one more is
        refused and counted (``sessions_refused``, a ``Rejected`` record with origin
        ``routing``) until one retires.
    """

    def __init__(
        self,
        *,
        mailbox_size: int = 256,
        max_restarts: int = 3,
        restart_window: float = 10.0,
        linger: float = 10.0,
        grace: float = 5.0,
        reducer: Reducer = CATALOG_REDUCER,
        clock: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = now_ms,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
    ) -> None:
        if mailbox_size < 1:
            raise ValueError(f"mailbox_size must be at least 1, got {mailbox_size}")
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        self._mailbox_size = mailbox_size
        self._grace = grace
        self._wall_ms = wall_ms
        self._hub = BroadcastHub()
        self._index = RoutingIndex()
        self._sessions = Sessions(
            hub=self._hub, index=self._index, reject=self._reject, publish=self._publish,
            reducer=reducer, mailbox_size=mailbox_size, max_sessions=max_sessions,
            max_restarts=max_restarts, restart_window=restart_window, linger=linger,
            clock=clock, wall_ms=wall_ms,
        )
        # The same dict: every delivery looks its actor up here, without a call.
        self._actors = self._sessions.actors
        self._listeners: dict[type[Inbound], list[Listener]] = {}
        self._children = Children(
            max_restarts=max_restarts, restart_window=restart_window, clock=clock
        )
        self._corrections: list[tuple[SessionState, str]] = []
        self._tg: TaskGroup | None = None
        self._state: Literal["new", "running", "closing", "closed"] = "new"
        self._recent_rejected: deque[Rejected] = deque(maxlen=_RECENT_RECORDS)
        self._recent_unmapped: deque[Unmapped] = deque(maxlen=_RECENT_RECORDS)
        self._forwarder_drops = ForwarderDrops()
        self._stats = SupervisorStatistics()
        self._mailbox_overflows = 0
        self._queued = 0  # messages in session mailboxes, not applied yet

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
        self._children.cancel()
        # 2. Drain: closing the send side lets each actor finish its mailbox, then stop.
        drained = await self._sessions.drain(self, self._grace if graceful else 0)
        # 3. Whatever did not drain in time is cancelled with the task group.
        if not drained and self._tg is not None:
            self._tg.cancel_scope.cancel()
        self._hub.close()

    # ------------------------------------------------------------------ ingress

    async def inject(self, message: Inbound) -> None:
        """Validate, normalize and route ``message``, waiting for mailbox space.

        For messages built in Python: they are validated as objects (msgspec does not check
        types in ``__init__``), exactly as if they had come over the wire.

        :raises MessageError: the message is malformed (counted in ``rejected``).
        :raises SupervisorClosed: the supervisor is not running.
        """
        await self._deliver(self._accept(self._validate(message)))

    async def inject_bytes(self, data: bytes) -> None:
        """Decode one wire frame (:func:`messages.encode` JSON) and route it like :meth:`inject`.

        Decoding is the validation (done once), so this is the cheapest way in for bytes.

        :raises MessageError: the frame is malformed (counted in ``rejected``).
        """
        await self._deliver(self._accept(self._decode(data)))

    def inject_nowait(self, message: Inbound) -> None:
        """Like :meth:`inject` but never blocks: a full mailbox raises :class:`MailboxFull`.

        Used by producers that must never wait (discovery ticks, pane events). Every delivery
        that fits is made; the ones that do not are counted.
        """
        self._deliver_nowait(self._accept(self._validate(message)), type(message).__name__)

    def deliver_nowait(self, message: Inbound) -> None:
        """Route a message decoded from the wire by :func:`messages.decode_inbound`, never
        blocking; it is NOT validated again (the hook listener decodes every frame once).

        :raises MailboxFull: a session's mailbox is full (counted).
        :raises SupervisorClosed: the supervisor is not running.
        """
        self._deliver_nowait(self._accept(message), type(message).__name__)

    def _validate(self, message: Inbound) -> Inbound:
        self._check_running()
        try:
            return revalidate(message)
        except MessageError as exc:
            self._reject(str(exc), "inject")
            raise

    def _decode(self, data: bytes) -> Inbound:
        self._check_running()
        try:
            return decode_inbound(data)
        except MessageError as exc:
            self._reject(str(exc), "hook")
            raise

    def _check_running(self) -> None:
        if self._state != "running":
            raise SupervisorClosed(f"supervisor is {self._state}: cannot accept messages")

    async def _deliver(self, deliveries: list[Delivery]) -> None:
        waited = False
        for delivery in deliveries:
            actor = self._actor_for(delivery)
            if actor is None:
                continue
            if self._applied_inline(actor, delivery.message):
                continue
            waited = True
            try:
                await actor.send(delivery.message)
                self._queued += 1
            except MailboxClosed:
                self._stats.drops += 1
        if not waited:
            await anyio.lowlevel.checkpoint()  # inject is a checkpoint, queued or not

    def _applied_inline(self, actor: SessionActor, message: SessionMessage) -> bool:
        """Apply ``message`` at once if nothing is queued for ``actor`` (rather than queue it
        for a task: same step, same order, same crash accounting), and start its task if the
        session must now wait for something; False if it must be queued."""
        if not actor.idle:
            return False
        self._stats.inline += 1
        self._queued += 1  # applied now: the step's callback counts it off at once
        if actor.apply_inline(self, message):
            assert self._tg is not None
            actor.start(self._tg, self)
        return True

    def _deliver_nowait(self, deliveries: list[Delivery], what: str) -> None:
        full: list[SessionKey] = []
        for delivery in deliveries:
            actor = self._actor_for(delivery)
            if actor is None:
                continue
            if self._applied_inline(actor, delivery.message):
                continue
            try:
                actor.send_nowait(delivery.message)
                self._queued += 1
            except MailboxFull:
                self._mailbox_overflows += 1
                self._stats.drops += 1
                full.append(delivery.key)
            except MailboxClosed:
                self._stats.drops += 1
        if full:
            raise MailboxFull(
                f"mailbox full ({self._mailbox_size} pending) for "
                + ", ".join(str(key) for key in full)
                + f": {what} not delivered"
            )

    def _accept(self, valid: Inbound) -> list[Delivery]:
        """Normalize a valid message, hand it to the listeners, return its deliveries."""
        self._check_running()
        self._stats.messages += 1
        if type(valid) is NotifyHook:
            self._forwarder_drops.seen(valid.pid, valid.start_token, valid.payload)
        normalized = normalize(valid)
        if isinstance(normalized, Unmapped):
            self._stats.unmapped += 1
            self._recent_unmapped.append(normalized)
            logger.info(
                "unmapped %s payload (event %s, keys %s)",
                normalized.harness,
                normalized.event,
                ", ".join(normalized.keys),
            )
            return []
        for listener in self._listeners.get(type(normalized), ()):
            listener.deliver_nowait(normalized)
        return self._index.route(normalized)

    def _reject(
        self, reason: str, origin: Literal["inject", "hook", "routing"], key: str | None = None
    ) -> None:
        self._stats.rejected += 1
        self._recent_rejected.append(
            Rejected(reason=reason, origin=origin, at_ms=self._wall_ms(), key=key)
        )
        logger.warning("rejected message: %s", reason)

    def _actor_for(self, delivery: Delivery) -> SessionActor | None:
        actor = self._actors.get(delivery.key)
        return actor if actor is not None else self._sessions.spawn_for(delivery)

    # ------------------------------------------------------------------ SessionHost

    @property
    def accepting(self) -> bool:
        """True while the supervisor takes new messages (session actors may retire)."""
        return self._state == "running"

    def session_step(
        self, actor: SessionActor, old: SessionState, message: SessionMessage, step: Step
    ) -> None:
        """Called by a session actor after each applied message: re-index, publish."""
        self._queued -= 1
        self._index.update(old, step.state)
        if isinstance(message, Forget) and step.publish is None:
            # The reducer forgets only an ended session: a live one ends when its owner does.
            self._reject(f"forget {actor.key}: the session has not ended", "routing",
                         str(actor.key))
        if step.publish is not None:
            transition = self._publish(step, cause_of(message))
            if transition is not None and transition.forgets:
                # Published first (every subscriber sees the session leave its pane and the
                # store deletes its row), then gone from the catalog: no later snapshot has
                # it. Its actor starts from nothing, as a session never seen does, and retires
                # as any settled session's does.
                self._hub.forget(actor.key)
                fresh = initial_state(actor.key)
                self._index.update(actor.state, fresh)
                actor.state = fresh

    def session_ended(self, actor: SessionActor, undelivered: int) -> None:
        """Called by a session actor as it stops: forget it (the hub keeps its state)."""
        self._queued -= undelivered
        self._sessions.ended(actor, undelivered)

    def _publish(self, step: Step, cause: str) -> Transition | None:
        assert step.publish is not None
        try:
            return self._hub.publish(step.state.key, step.publish, cause, step.state)
        except HubClosed:
            # Only possible in the last instant of a forced shutdown: counted, not raised.
            self._stats.drops += 1
            return None

    def session_crashed(self, actor: SessionActor, message: SessionMessage, exc: Exception) -> bool:
        """Called when the reducer raised: the message is dropped (counted); False when the
        actor must stop (:meth:`actors.runtime.sessions.Sessions.crashed` decides)."""
        self._queued -= 1
        return self._sessions.crashed(actor, message, exc)

    # ------------------------------------------------------------------ other actors

    def start_actor(
        self, actor: Actor, *, name: str | None = None, essential: bool = False
    ) -> None:
        """Run ``actor.run(self)`` until shutdown, restarting it one_for_one on errors
        (:class:`actors.runtime.children.Children`).

        More than ``max_restarts`` crashes within ``restart_window`` stop it (logged,
        counted, and shown as ``stopped`` in :attr:`SupervisorStatistics.actor_states`).
        The rest of the system keeps running -- unless the actor is ``essential`` (the daemon's
        hook listener and control socket): then the supervisor has failed, as an OTP supervisor
        whose child exceeds its intensity does, and :meth:`wait_failed` returns
        :class:`EssentialActorStopped` for the owner to end the program loudly.
        """
        if self._state != "running" or self._tg is None:
            raise SupervisorClosed("start_actor() needs a running supervisor")
        self._children.start(self._tg, actor, self, name=name, essential=essential)

    def start_listener(
        self, actor: Listener, *, name: str | None = None, essential: bool = False
    ) -> None:
        """Like :meth:`start_actor`, and hand it every routed message of the types it
        ``accepts`` (after normalization), synchronously as they are routed."""
        for kind in actor.accepts:
            self._listeners.setdefault(kind, []).append(actor)
        self.start_actor(actor, name=name, essential=essential)

    @property
    def failure(self) -> EssentialActorStopped | None:
        """The essential actor's stop, once one stopped (else ``None``)."""
        return self._children.failure

    async def wait_failed(self) -> EssentialActorStopped:
        """Wait until an essential actor has stopped after too many crashes; return why."""
        return await self._children.wait_failed()

    # ------------------------------------------------------------------ restore

    def restore(
        self,
        states: Iterable[SessionState],
        seq: int,
        live_tokens: Mapping[int, str | None],
    ) -> int:
        """Seed the catalog from the store before any message (nothing is published yet).

        Each restored state is re-proven by :func:`actors.core.session.reducer.reprove` against
        ``live_tokens`` (pid -> its live start token, ``None`` if gone; the caller probes the
        recorded owners off the event loop). Sessions whose owner is the same live incarnation
        stay ``running`` without a flicker and get an actor at once; the others are corrected,
        and the corrections are published by :meth:`publish_corrections` once the subscribers
        that must see them (the store) are in place. Returns how many were corrected.
        """
        if self._state != "running" or self._stats.messages:
            raise SupervisorClosed("restore() must come right after entering the supervisor")
        seeded: list[SessionState] = []
        live: list[SessionState] = []
        self._corrections = []
        observed = self._wall_ms()
        for state in states:
            state = restored(state)
            token = live_tokens.get(state.owner_pid) if state.owner_pid is not None else None
            proof = reprove(state, token, observed)
            seeded.append(state)
            if proof.step.publish is not None and proof.cause is not None:
                self._corrections.append((proof.step.state, proof.cause))
            elif proof.live:
                live.append(state)
        self._hub.restore(seeded, seq)
        for state in live:
            actor = self._sessions.spawn(state.key, state)
            if actor.wants_task(self):
                assert self._tg is not None
                actor.start(self._tg, self)
        return len(self._corrections)

    def publish_corrections(self) -> int:
        """Publish the corrections :meth:`restore` decided; return how many were published."""
        published = 0
        for state, cause in self._corrections:
            if self._publish(Step(state, state.activity), cause) is not None:
                published += 1
        self._corrections = []
        return published

    # ------------------------------------------------------------------ reading

    @overload
    def subscribe(
        self,
        mode: Literal["all", "latest"] = ...,
        snapshot: bool = ...,
        *,
        buffer: int = ...,
        states: Literal[False] = ...,
    ) -> Subscription[Item]: ...

    @overload
    def subscribe(
        self,
        mode: Literal["all", "latest"] = ...,
        snapshot: bool = ...,
        *,
        buffer: int = ...,
        states: Literal[True],
    ) -> Subscription[StateItem]: ...

    def subscribe(
        self,
        mode: Literal["all", "latest"] = "all",
        snapshot: bool = True,
        *,
        buffer: int = DEFAULT_BUFFER,
        states: bool = False,
    ) -> Subscription[Item] | Subscription[StateItem]:
        """Subscribe to transitions: first a :class:`~messages.Snapshot`, then live ones.

        Use as ``with`` or ``async with``. ``all`` is lossless and bounded (a lagging
        subscriber gets :class:`~messages.Overflow` and ends); ``latest`` coalesces per
        session. ``states=True`` (the store) delivers each item with the reducer state
        behind it. Subscriptions end cleanly at shutdown.
        """
        if states:
            return self._hub.subscribe(mode, snapshot, buffer=buffer, states=True)
        return self._hub.subscribe(mode, snapshot, buffer=buffer)

    def snapshot(self) -> tuple[Activity, ...]:
        """The current activity of every known session (live or ended)."""
        return self._hub.snapshot().activities

    @property
    def seq(self) -> int:
        """The seq of the last published transition."""
        return self._hub.seq

    @property
    def queued(self) -> int:
        """Messages waiting in session mailboxes (each may still publish a transition): with
        :attr:`seq`, what the store's backpressure counts as on its way."""
        return self._queued

    def statistics(self) -> SupervisorStatistics:
        """A point-in-time copy of the counters (see :class:`SupervisorStatistics`)."""
        hub = self._hub.statistics()
        return msgspec.structs.replace(
            self._stats,
            transitions=hub.published,
            drops=self._stats.drops + self._sessions.drops,
            overflows=self._mailbox_overflows + hub.overflows,
            sessions=len(self._actors),
            stopped=len(self._sessions.stopped),
            sessions_refused=self._sessions.refused,
            forwarder_dropped=self._forwarder_drops.total,
            restarts=self._sessions.restarts + self._children.restarts,
            actors=self._children.running,
            actor_states=dict(self._children.states),
            failed=self._children.failed,
            recent_rejected=tuple(self._recent_rejected),
            recent_unmapped=tuple(self._recent_unmapped),
        )
