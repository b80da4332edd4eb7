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
        self._reducer = reducer
        self._linger = linger

    async def run(self, host: SessionHost) -> None:
        """Apply messages until the mailbox is closed and drained, or the session retires."""
        try:
            while True:
                message = await self._next(host)
                if message is None:
                    return
                old = self.state
                try:
                    step = self._reducer(old, message)
                except Exception as exc:  # one_for_one: drop the message, keep the state
                    if not host.session_crashed(self, message, exc):
                        return
                    continue
                self.state = step.state
                host.session_step(self, old, message, step)
        finally:
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
        # Take what is already queued without a wake-up per message (the mailbox is
        # bounded, so a busy session cannot starve the others for long).
        try:
            return mailbox.receive_nowait()
        except anyio.WouldBlock:
            pass
        except anyio.EndOfStream:
            return None
        state = self.state
        linger: float | None = None  # None: wait for the next message, however long
        if not state.known and state.pane is None:
            linger = 0.0  # nothing proven, nothing shown (e.g. Codex's hidden title thread)
        elif host.accepting and state.known and retirable(state):
            linger = self._linger
        if linger is not None:
            with anyio.move_on_after(linger):
                try:
                    return await mailbox.receive()
                except anyio.EndOfStream:
                    return None
            # Nothing arrived while lingering: retire. No await between this check and
            # the host forgetting us, so a message injected later spawns a fresh actor.
            try:
                return mailbox.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream):
                return None
        try:
            return await mailbox.receive()
        except anyio.EndOfStream:
            return None
