"""Child supervision: the supervisor's long-running actors (discovery, listeners, sinks).

:class:`Children` runs each one under the supervisor's task group and restarts it one_for_one
when it raises, after a pause on the one retry curve (:func:`actors.core.backoff.retry_delay`).
More than ``max_restarts`` crashes within ``restart_window`` seconds
(:class:`actors.runtime.mailbox.RestartWindow`) stop it: logged, counted, and its state
``stopped``. An *essential* child that stops fails the supervisor, as an OTP supervisor whose
child exceeds its intensity does: :meth:`Children.wait_failed` returns
:class:`EssentialActorStopped`. Session actors are not children: they are spawned on first
evidence (:class:`actors.runtime.sessions.Sessions`).

Who calls it: :class:`supervisor.Supervisor` (``start_actor`` / ``start_listener`` start a
child, shutdown cancels them all first, ``statistics()`` reads the counters).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

import anyio
from anyio.abc import TaskGroup

from actors.core.backoff import retry_delay
from actors.runtime.mailbox import Actor, ActorHost, RestartWindow
from messages.errors import PanewardError

__all__ = ["ActorState", "Children", "EssentialActorStopped"]

logger = logging.getLogger("paneward.supervisor")

ActorState = Literal["running", "restarting", "stopped", "done"]


class EssentialActorStopped(PanewardError):
    """An actor started with ``essential=True`` exhausted its restart intensity.

    :meth:`Children.wait_failed` (and ``Supervisor.wait_failed``) returns it (the daemon then
    shuts down and exits non-zero, so a service manager restarts it); the text names the actor,
    its crashes and the last error.
    """


class Children:
    """The long-running actors of one supervisor, each restarted one_for_one.

    :param max_restarts: crashes tolerated within ``restart_window`` seconds; one more stops
        the child.
    :param clock: monotonic seconds (restart intensity).

    Counters, read by the supervisor's ``statistics()``: :attr:`states` (each child's
    :data:`ActorState` by name), :attr:`running` (children whose task runs), :attr:`restarts`,
    :attr:`failed` (the name of the essential child that stopped, if one did).
    """

    def __init__(
        self, *, max_restarts: int, restart_window: float, clock: Callable[[], float]
    ) -> None:
        self._max_restarts = max_restarts
        self._restart_window = restart_window
        self._clock = clock
        self._scopes: list[anyio.CancelScope] = []
        self.states: dict[str, ActorState] = {}
        self.running = 0
        self.restarts = 0
        self.failed: str | None = None
        self._failure: EssentialActorStopped | None = None
        self._failed = anyio.Event()

    def start(
        self, tg: TaskGroup, actor: Actor, host: ActorHost, *, name: str | None,
        essential: bool,
    ) -> None:
        """Run ``actor.run(host)`` in ``tg`` until :meth:`cancel`, restarting it on errors.

        The task (and the child's name in :attr:`states`) is ``name``, or the actor's class
        name."""
        scope = anyio.CancelScope()
        self._scopes.append(scope)
        label = name or type(actor).__name__
        tg.start_soon(self._supervise, actor, host, scope, label, essential, name=label)

    def cancel(self) -> None:
        """Stop every child (shutdown's first step: nothing new arrives from them)."""
        for scope in self._scopes:
            scope.cancel()

    @property
    def failure(self) -> EssentialActorStopped | None:
        """The essential child's stop, once one stopped (else ``None``)."""
        return self._failure

    async def wait_failed(self) -> EssentialActorStopped:
        """Wait until an essential child has stopped after too many crashes; return why."""
        await self._failed.wait()
        assert self._failure is not None
        return self._failure

    async def _supervise(
        self, actor: Actor, host: ActorHost, scope: anyio.CancelScope, label: str,
        essential: bool,
    ) -> None:
        window = RestartWindow(self._max_restarts, self._restart_window)
        states = self.states
        states[label] = "running"
        self.running += 1
        try:
            with scope:
                while True:
                    try:
                        await actor.run(host)
                        states[label] = "done"
                        return
                    except Exception as exc:
                        logger.error("actor %s crashed: %r", label, exc)
                        if not window.crash(self._clock()):
                            logger.error("actor %s stopped after %d crashes", label, window.recent)
                            states[label] = "stopped"
                            if essential and self._failure is None:
                                self._failure = EssentialActorStopped(
                                    f"{label} stopped after {window.recent} crashes within "
                                    f"{self._restart_window:g} s (last: {exc!r})"
                                )
                                self.failed = label
                                self._failed.set()
                            return
                        states[label] = "restarting"
                        self.restarts += 1
                        await anyio.sleep(retry_delay(window.recent + 1, 0.05, 2.0))  # one curve
                        states[label] = "running"
        finally:
            self.running -= 1
