"""The supervisor's session actors: spawned on first evidence, retired, stopped after crashes.

:class:`Sessions` holds one :class:`~actors.runtime.session.SessionActor` per live session
key. The supervisor looks an actor up in :attr:`Sessions.actors` itself for every delivery (the
per-message path stays in :mod:`supervisor`) and calls :meth:`Sessions.spawn_for` only when the
key has no live actor: there the rules for a new actor are kept -- a ``Forget`` of a session
never seen is refused, a session stopped after crashes takes nothing but the user's
``Acknowledge`` / ``Forget``, only evidence that may spawn one does, and at most
``max_sessions`` actors are live (one more is refused and counted). A session coming back
resumes from its whole last state, which the hub keeps.

The actor calls back its host (the supervisor, a :class:`~actors.runtime.session.SessionHost`),
which hands the cold callbacks on: :meth:`Sessions.crashed` (restart from the last state, or stop
after too many crashes within the window and publish attention ``failed``, decided by
:func:`actors.core.session.reducer.crashed`) and :meth:`Sessions.ended` (forget the actor, the hub
keeps its state). Shutdown: :meth:`Sessions.drain`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

import anyio

from actors.core.session.reducer import SessionState, Step, crashed, initial_state
from actors.core.session.routing import Delivery, RoutingIndex
from actors.runtime.hub import BroadcastHub
from actors.runtime.mailbox import RestartWindow
from actors.runtime.session import Reducer, SessionActor, SessionHost
from messages.activity import Transition
from messages.codec import SessionMessage
from messages.common import SessionKey
from messages.control import Acknowledge, Forget

__all__ = ["Sessions"]

logger = logging.getLogger("paneward.supervisor")

#: Records a refused message (the supervisor's ``Rejected`` log): reason, origin, key.
Reject = Callable[[str, Literal["routing"], str], None]
#: Publishes a step with its cause; ``None`` when the hub is closed (the supervisor counts it).
Publish = Callable[[Step, str], Transition | None]


class Sessions:
    """The live session actors of one supervisor.

    :param hub: the supervisor's hub (the states of sessions without an actor; where a
        stopped session's ``failed`` attention goes through ``publish``).
    :param index: the supervisor's routing index (an actor's state added on spawn, removed
        on retire).
    :param reject: records a refused message.
    :param publish: publishes a step (a stopped session's attention).

    Counters, read by the supervisor's ``statistics()``: :attr:`drops` (messages for a stopped
    session, refused new sessions, the message that crashed an actor, what an actor still held
    when it stopped), :attr:`refused` (messages for a new session refused at ``max_sessions``),
    :attr:`restarts`, and :attr:`stopped` (keys stopped after crashes, until acknowledged).
    """

    def __init__(
        self,
        *,
        hub: BroadcastHub,
        index: RoutingIndex,
        reject: Reject,
        publish: Publish,
        reducer: Reducer,
        mailbox_size: int,
        max_sessions: int,
        max_restarts: int,
        restart_window: float,
        linger: float,
        clock: Callable[[], float],
        wall_ms: Callable[[], int],
    ) -> None:
        self._hub = hub
        self._index = index
        self._reject = reject
        self._publish = publish
        self._reducer = reducer
        self._mailbox_size = mailbox_size
        self._max_sessions = max_sessions
        self._max_restarts = max_restarts
        self._restart_window = restart_window
        self._linger = linger
        self._clock = clock
        self._wall_ms = wall_ms
        self.actors: dict[SessionKey, SessionActor] = {}
        self.stopped: set[SessionKey] = set()
        self.drops = 0
        self.refused = 0
        self.restarts = 0

    def spawn_for(self, delivery: Delivery) -> SessionActor | None:
        """The actor for ``delivery`` when its key has no live one: a new actor, or ``None``
        when the message goes nowhere (refused and recorded, dropped and counted, or not
        evidence that spawns a session)."""
        key = delivery.key
        message = delivery.message
        if isinstance(message, Forget) and self._hub.current(key) is None:
            # Nothing to forget: never a session made for it; said and counted.
            self._reject(f"forget {key}: no such session", "routing", str(key))
            return None
        if key in self.stopped:
            if isinstance(message, Acknowledge | Forget):
                # The user acknowledged (or dismissed) the failure: a fresh actor takes it.
                self.stopped.discard(key)
            else:
                self.drops += 1
                return None
        if not delivery.spawn and not isinstance(message, Acknowledge | Forget):
            return None
        if len(self.actors) >= self._max_sessions:
            # Memory follows live sessions: a flood of new ones (2,000 failed sessions waiting
            # for an acknowledgement) must not grow it without bound. Refused, counted, said.
            self.refused += 1
            self.drops += 1
            if self.refused == 1 or self.refused % 1000 == 0:
                self._reject(
                    f"{self._max_sessions} live sessions already: {key} refused "
                    f"({self.refused} so far)",
                    "routing",
                    key.session_id,
                )
            return None
        # A session coming back resumes from its whole last state (kept by the hub).
        return self.spawn(key, self._hub.state_of(key) or initial_state(key))

    def spawn(self, key: SessionKey, state: SessionState) -> SessionActor:
        """A new actor for ``key`` from ``state``, indexed, with no task yet: the message it is
        spawned for is applied inline by its caller, which starts the task only if the session
        must then wait for something (:meth:`SessionActor.wants_task`)."""
        actor = SessionActor(
            key,
            state,
            mailbox_size=self._mailbox_size,
            reducer=self._reducer,
            linger=self._linger,
            restarts=RestartWindow(self._max_restarts, self._restart_window),
        )
        self.actors[key] = actor
        self._index.update(None, state)
        return actor

    def crashed(self, actor: SessionActor, message: SessionMessage, exc: Exception) -> bool:
        """The reducer raised on ``message`` (dropped, counted): True to restart ``actor`` from
        its last state (the reducer is pure), False when it must stop -- too many crashes in
        the window: the session then shows attention ``failed``
        (:func:`actors.core.session.reducer.crashed`) and its later messages are dropped
        (counted) until the user acknowledges it."""
        self.drops += 1
        logger.error("session %s crashed on %s: %r", actor.key, type(message).__name__, exc)
        if actor.restarts.crash(self._clock()):
            self.restarts += 1
            return True
        # Too many crashes: stop this actor and tell the user, leave the siblings be.
        self.stopped.add(actor.key)
        reason = f"session actor stopped after {actor.restarts.recent} crashes: {exc!r}"
        step = crashed(actor.state, reason, self._wall_ms())
        actor.state = step.state
        if step.publish is not None:
            self._publish(step, "Supervisor:stopped")
        return False

    def ended(self, actor: SessionActor, undelivered: int) -> None:
        """``actor`` stopped with ``undelivered`` messages never applied (counted): forget it,
        the hub keeps its state."""
        self.drops += undelivered
        if self.actors.get(actor.key) is actor:
            del self.actors[actor.key]
            self._index.forget(actor.state)
            self._hub.keep(actor.state)

    async def drain(self, host: SessionHost, grace: float) -> bool:
        """Close every mailbox (each actor applies what it holds, then stops) and wait up to
        ``grace`` seconds: True when every actor has stopped."""
        actors = list(self.actors.values())
        for actor in actors:
            actor.close(host)
        with anyio.move_on_after(grace):
            for actor in actors:
                await actor.done.wait()
        return all(actor.done.is_set() for actor in actors)
