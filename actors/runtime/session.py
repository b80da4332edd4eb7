"""The session actor: one live session's mailbox around the pure reducer.

Spawned by the supervisor on the first evidence for a key; fed by the
supervisor's router; it applies each message with
:func:`actors.core.session.reducer.reduce` in order, one at a time, and hands every
step back to its host (the supervisor), which re-indexes and publishes. The
state is only replaced after a step succeeded, so a crash restarts the actor
from exactly its last state. An ended session (nothing for the user) lingers a
while for new evidence, then stops; its last activity stays in the catalog.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from actors.core.session.reducer import SessionState, Step, reduce, retirable
from actors.runtime.mailbox import Mailbox, RestartWindow
from messages.codec import SessionMessage
from messages.common import SessionKey

__all__ = ["Reducer", "SessionActor", "SessionHost"]

Reducer = Callable[[SessionState, SessionMessage], Step]


class SessionHost(Protocol):
    """What a session actor needs from its supervisor (all synchronous)."""

    @property
    def accepting(self) -> bool:
        """False once shutdown began: actors then drain instead of retiring."""

    def session_step(
        self, actor: SessionActor, old: SessionState, message: SessionMessage, step: Step
    ) -> None:
        """A message was applied; publish ``step.publish`` if any."""

    def session_crashed(self, actor: SessionActor, message: SessionMessage, exc: Exception) -> bool:
        """The reducer raised on ``message``; return False to stop the actor."""

    def session_ended(self, actor: SessionActor, undelivered: int) -> None:
        """The actor stopped (drained, retired, or stopped after crashes).

        ``undelivered`` messages were still queued and will never be applied.
        """


class SessionActor:
    """One session: a bounded :class:`~actors.runtime.mailbox.Mailbox` and its reducer state.

    Messages are applied one at a time, in the order the host delivered them. While nothing
    is queued or in flight to the actor (:attr:`idle`), the host applies the next message at
    once, in its own task (:meth:`apply_inline`): the same step, the same crash accounting,
    and no task wake-up per message -- the cost of a message then follows the message, not the
    number of sessions it is spread over. An actor has no task of its own until it needs one:
    the host starts it (:meth:`start`) when the session must wait for something (an ended
    session's linger, or a session nothing proved retiring at the next scheduler round), and
    from then on it runs until the actor ends; while it is not parked on its empty mailbox,
    messages queue there and it applies them.

    :param linger: seconds an ended session waits for new evidence before it stops.
    """

    def __init__(
        self,
        key: SessionKey,
        state: SessionState,
        *,
        mailbox_size: int,
        reducer: Reducer = reduce,
        linger: float = 10.0,
        restarts: RestartWindow | None = None,
    ) -> None:
        self.key = key
        self.state = state
        self.mailbox: Mailbox[SessionMessage] = Mailbox(mailbox_size)
        self.restarts = restarts or RestartWindow(3, 10.0)
        self.done = anyio.Event()
        self._task = False  # its task was started (it runs until the actor ends)
        self._parked = False  # the task waits on an empty mailbox
        self._queued = 0  # messages handed to the mailbox and not taken by the task yet
        self._reducer = reducer
        self._linger = linger
        self._wait: anyio.CancelScope | None = None  # the parked wait, while idle
        self._waiting_for: float | None = None  # its linger (None: no deadline)
        self._redecide = False  # an inline step changed what the parked wait is for

    @property
    def idle(self) -> bool:
        """True while nothing is queued or in flight to the actor and it has no task or its task
        waits on an empty mailbox: the host may then call :meth:`apply_inline` instead of
        :meth:`send_nowait`."""
        return not self._queued and (self._parked or not self._task)

    def wants_task(self, host: SessionHost) -> bool:
        """True when the actor has no task and its state must wait for something (see the
        class): the host then calls :meth:`start`."""
        return not self._task and self._linger_of(host) is not None

    def start(self, task_group: TaskGroup, host: SessionHost) -> None:
        """Start the actor's task in ``task_group`` (once; see :meth:`wants_task`)."""
        if self._task or self.done.is_set():
            return
        self._task = True
        task_group.start_soon(self.run, host, name=f"session {self.key}")

    def close(self, host: SessionHost) -> None:
        """No more messages (shutdown): a task drains what is queued, then ends; an actor with
        no task has nothing queued and ends now."""
        if self._task:
            self.mailbox.close()
        elif not self.done.is_set():
            self._end(host)

    def send_nowait(self, message: SessionMessage) -> None:
        """Queue ``message`` for the task (see :meth:`Mailbox.send_nowait`).

        :raises MailboxFull: the mailbox is full (counted).
        :raises MailboxClosed: the actor has stopped.
        """
        self.mailbox.send_nowait(message)
        self._queued += 1

    async def send(self, message: SessionMessage) -> None:
        """Queue ``message``, waiting for room. :raises MailboxClosed: the actor stopped."""
        # Counted before the wait: the message is on its way, later ones must queue behind it.
        self._queued += 1
        try:
            await self.mailbox.send(message)
        except BaseException:
            self._queued -= 1
            raise

    def apply(self, host: SessionHost, message: SessionMessage) -> bool:
        """Apply one message (reducer, then the host's step); False when the actor must stop.

        A reducer that raises leaves the state as it was (one_for_one: restarted from its last
        state); the host counts the crash and decides whether the actor goes on.
        """
        old = self.state
        try:
            step = self._reducer(old, message)
        except Exception as exc:  # one_for_one: drop the message, keep the state
            return host.session_crashed(self, message, exc)
        self.state = step.state
        host.session_step(self, old, message, step)
        return True

    def apply_inline(self, host: SessionHost, message: SessionMessage) -> bool:
        """Apply ``message`` now, in the caller's task. Only while :attr:`idle` (the caller
        checks): nothing is queued or in flight, so the order of messages is kept.

        If the step stops the actor (too many crashes), it ends: a parked task wakes on its
        closed mailbox, finds it drained and ends; with no task it ends at once. If the step
        changes whether or how long the session lingers, a parked wait is re-decided.

        :return: True when the actor now needs its task (:meth:`wants_task`): the caller then
            calls :meth:`start`.
        """
        if not self.apply(host, message):
            if self._task:
                self._parked = False
                self.mailbox.close()
            else:
                self._end(host)
            return False
        if not self._task:
            return self._linger_of(host) is not None
        scope = self._wait
        if scope is None:
            return False
        linger = self._linger_of(host)
        if linger != self._waiting_for:
            self._redecide = True
            scope.cancel()
        elif linger is not None:
            # New evidence for a lingering session: it lingers from now on.
            scope.deadline = anyio.current_time() + linger
        return False

    def _linger_of(self, host: SessionHost) -> float | None:
        """How long to wait for the next message before retiring (None: however long).

        On the hot path (after every inline step): the cheapest tests first."""
        state = self.state
        if not state.known:
            # Nothing proven: nothing shown either (e.g. Codex's hidden title thread) unless
            # a pane shows it.
            return 0.0 if state.pane is None else None
        if state.presence == "persisted" and retirable(state) and host.accepting:
            return self._linger
        return None

    async def run(self, host: SessionHost) -> None:
        """Apply messages until the mailbox is closed and drained, or the session retires."""
        try:
            while True:
                message = await self._next(host)
                if message is None or not self.apply(host, message):
                    return
        finally:
            self._parked = False
            self._end(host)

    def _end(self, host: SessionHost) -> None:
        self.mailbox.close()
        # Messages still queued now (only after a stop for repeated crashes, or a forced
        # shutdown) are reported to the host, which counts them as drops.
        left = self.mailbox.statistics().pending
        self.mailbox.close_receiving()
        host.session_ended(self, left)
        self.done.set()

    async def _next(self, host: SessionHost) -> SessionMessage | None:
        """The next message, or None when the actor should stop (drained or retired)."""
        mailbox = self.mailbox
        while True:
            # Take what is already queued without a wake-up per message (the mailbox is
            # bounded, so a busy session cannot starve the others for long).
            try:
                return self._took(mailbox.receive_nowait())
            except anyio.WouldBlock:
                pass
            except anyio.EndOfStream:
                return None
            linger = self._linger_of(host)
            self._waiting_for = linger
            self._redecide = False
            deadline = math.inf if linger is None else anyio.current_time() + linger
            with anyio.CancelScope(deadline=deadline) as scope:
                self._wait = scope
                self._parked = True
                try:
                    return self._took(await mailbox.receive())
                except anyio.EndOfStream:
                    return None
                finally:
                    self._parked = False
                    self._wait = None
            if self._redecide:
                continue  # an inline step changed what to wait for
            # Nothing arrived while lingering: retire. No await between this check and
            # the host forgetting us, so a message injected later spawns a fresh actor.
            try:
                return self._took(mailbox.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                return None

    def _took(self, message: SessionMessage) -> SessionMessage:
        self._queued -= 1
        return message
