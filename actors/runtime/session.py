"""The session actor: one live session's mailbox around the pure reducer.

Spawned by the supervisor on the first evidence for a key; fed by the
supervisor's router; it applies each message with
:func:`actors.core.reducer.reduce` in order, one at a time, and hands every
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

from actors.core.reducer import SessionState, Step, reduce, retirable
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

    Messages are applied one at a time, in the order the host delivered them. While the
    actor's task is parked on an empty mailbox with nothing in flight (:attr:`idle`), the host
    applies the next message at once, in its own task (:meth:`apply_inline`): the same step,
    the same crash accounting, and no wake-up of this task per message -- the cost of a
    message then follows the message, not the number of sessions it is spread over. Otherwise
    the message is queued and this task applies it.

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
        self._parked = False  # the task waits on an empty mailbox
        self._queued = 0  # messages handed to the mailbox and not taken by the task yet
        self._reducer = reducer
        self._linger = linger
        self._wait: anyio.CancelScope | None = None  # the parked wait, while idle
        self._waiting_for: float | None = None  # its linger (None: no deadline)
        self._redecide = False  # an inline step changed what the parked wait is for

    @property
    def idle(self) -> bool:
        """True while the task waits on an empty mailbox and nothing is queued or in flight to
        it: the host may then call :meth:`apply_inline` instead of :meth:`send_nowait`."""
        return self._parked and not self._queued

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

    def apply_inline(self, host: SessionHost, message: SessionMessage) -> None:
        """Apply ``message`` now, in the caller's task. Only while :attr:`idle` (the caller
        checks): nothing is queued or in flight, so the order of messages is kept.

        If the step stops the actor (too many crashes), its mailbox is closed: the parked task
        wakes, finds it drained and ends. If the step changes whether or how long the session
        lingers, the parked wait is re-decided.
        """
        if not self.apply(host, message):
            self._parked = False
            self.mailbox.close()
            return
        scope = self._wait
        if scope is None:
            return
        linger = self._linger_of(host)
        if linger != self._waiting_for:
            self._redecide = True
            scope.cancel()
        elif linger is not None:
            # New evidence for a lingering session: it lingers from now on.
            scope.deadline = anyio.current_time() + linger

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
            self.mailbox.close()
            # Messages still queued now (only after a stop for repeated crashes, or a
            # forced shutdown) are reported to the host, which counts them as drops.
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
