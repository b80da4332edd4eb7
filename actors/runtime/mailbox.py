"""The building blocks every actor shares: the one wiring contract, a bounded mailbox, restarts.

How parts are connected (the one mechanism, docs/design.md §2):

- **Inbound, by message.** Sources put inbound messages into an :class:`EvidenceSink` (the
  :class:`~supervisor.Supervisor` is one): :meth:`~EvidenceSink.inject_nowait` for messages
  built in Python (validated as objects), :meth:`~EvidenceSink.deliver_nowait` for messages
  decoded from the wire by :func:`messages.decode_inbound` (decoding was the validation). The
  supervisor routes each to the session actors it concerns and to every :class:`Listener`
  whose ``accepts`` names its type (the pane mapper, the pid watcher).
- **Outbound, by subscription.** Every published transition leaves through the broadcast hub;
  sinks (tmux, the store, ``paneward watch``) read a subscription (:meth:`ActorHost.subscribe`).
  Nothing calls back into the supervisor while it publishes.

An *actor* is an object with ``async def run(self, host)`` that runs until cancelled; the
supervisor restarts it one_for_one when it raises. A :class:`Mailbox` is the bounded queue in
front of an actor; :class:`RestartWindow` is the pure restart-intensity rule (OTP's ``MaxR``
within ``MaxT``).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar

import anyio
import msgspec

from messages.codec import Inbound
from messages.errors import PanewardError

if TYPE_CHECKING:
    from actors.runtime.hub import Item, Subscription

__all__ = [
    "Actor",
    "EvidenceSink",
    "IntakeGate",
    "ActorHost",
    "Listener",
    "Mailbox",
    "MailboxClosed",
    "MailboxFull",
    "MailboxStatistics",
    "RestartWindow",
]

T = TypeVar("T")


class EvidenceSink(Protocol):
    """Accepts inbound messages without ever blocking the caller (the supervisor is one)."""

    def inject_nowait(self, message: Inbound) -> None:
        """Validate and route ``message`` (built in Python).

        :raises ~messages.MessageError: it is invalid (counted).
        :raises MailboxFull: a session's mailbox is full (counted).
        """

    def deliver_nowait(self, message: Inbound) -> None:
        """Route ``message`` decoded from the wire (already valid: not validated again).

        :raises MailboxFull: a session's mailbox is full (counted).
        """


class IntakeGate(Protocol):
    """Backpressure for a source that reads from the outside world (the hook listener): while
    :meth:`closed`, it reads no more until :meth:`wait` returns. The daemon wires the store's
    (:meth:`actors.sinks.store.Store.backpressure`): intake pauses while more transitions are
    published than committed by one batch, so what a ``kill -9`` can lose stays bounded."""

    def closed(self) -> bool:
        """True when the source should pause (cheap: called per frame)."""

    async def wait(self) -> None:
        """Return once the source may go on (never waits forever)."""


class ActorHost(EvidenceSink, Protocol):
    """What a supervised actor gets from its supervisor: the sink, and subscriptions."""

    def subscribe(
        self,
        mode: Literal["all", "latest"] = ...,
        snapshot: bool = ...,
        *,
        buffer: int = ...,
    ) -> Subscription[Item]:
        """A hub subscription (see :meth:`actors.runtime.hub.BroadcastHub.subscribe`)."""


class Actor(Protocol):
    """A long-running part supervised one_for_one (discovery, listeners, sinks)."""

    async def run(self, host: ActorHost) -> None:
        """Run until cancelled, sending evidence to / subscribing through ``host``."""


class Listener(Actor, Protocol):
    """An actor that also receives inbound messages: every message whose type is in
    ``accepts`` is handed to :meth:`deliver_nowait` as the supervisor routes it (after
    normalization: hook payloads arrive as ``HookHint``). It must never block."""

    accepts: ClassVar[tuple[type[Any], ...]]

    def deliver_nowait(self, message: Inbound) -> None:
        """Take ``message`` (queue it or apply it); never block. Overflow is the listener's to
        count."""


class MailboxFull(PanewardError):
    """Raised by :meth:`Mailbox.send_nowait` when the mailbox holds ``size`` messages.

    The message is not queued; the refusal is counted in ``overflows``.
    """


class MailboxClosed(PanewardError):
    """Raised when sending to a mailbox whose actor has stopped."""


class MailboxStatistics(msgspec.Struct, kw_only=True):
    """Counters of one mailbox: bound, queued now, accepted, refused when full.

    One record the mailbox keeps (``size`` set at construction), copied by
    :meth:`Mailbox.statistics` with ``pending`` counted then.
    """

    size: int = 0
    pending: int = 0
    sent: int = 0
    overflows: int = 0


class Mailbox(Generic[T]):
    """A bounded queue in front of one actor (an anyio memory object stream).

    Producers call :meth:`send` (waits for room: backpressure) or
    :meth:`send_nowait` (never waits: a full mailbox is a counted, reported
    condition, never a deadlock). The actor takes messages with :meth:`receive`
    / :meth:`receive_nowait`, which raise :class:`anyio.EndOfStream` once the
    mailbox is closed and drained.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a mailbox holds at least 1 message, not {size}")
        self._send, self._receive = anyio.create_memory_object_stream[T](size)
        self._stats = MailboxStatistics(size=size)

    async def send(self, message: T) -> None:
        """Queue ``message``, waiting for room. :raises MailboxClosed: actor stopped."""
        try:
            await self._send.send(message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise MailboxClosed("the actor behind this mailbox has stopped") from None
        self._stats.sent += 1

    def send_nowait(self, message: T) -> None:
        """Queue ``message`` or raise at once.

        :raises MailboxFull: the mailbox is full (counted).
        :raises MailboxClosed: the actor has stopped.
        """
        try:
            self._send.send_nowait(message)
        except anyio.WouldBlock:
            self._stats.overflows += 1
            raise MailboxFull(f"mailbox full ({self._stats.size} pending)") from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise MailboxClosed("the actor behind this mailbox has stopped") from None
        self._stats.sent += 1

    async def receive(self) -> T:
        """The next message, waiting for one. :raises anyio.EndOfStream: closed and drained."""
        return await self._receive.receive()

    def receive_nowait(self) -> T:
        """The next message or :class:`anyio.WouldBlock` / :class:`anyio.EndOfStream`."""
        return self._receive.receive_nowait()

    def close(self) -> None:
        """No more messages: the actor drains what is queued, then sees EndOfStream."""
        self._send.close()

    def close_receiving(self) -> None:
        """The actor is gone: later sends raise :class:`MailboxClosed`."""
        self._receive.close()

    def statistics(self) -> MailboxStatistics:
        """A point-in-time copy of the counters (see :class:`MailboxStatistics`)."""
        return msgspec.structs.replace(
            self._stats, pending=self._receive.statistics().current_buffer_used
        )


class RestartWindow:
    """Restart intensity: more than ``max_restarts`` crashes within ``period`` seconds.

    Pure bookkeeping over the times given to :meth:`crash` (an injected clock).
    """

    def __init__(self, max_restarts: int, period: float) -> None:
        self._max = max_restarts
        self._period = period
        self._times: deque[float] = deque()

    def crash(self, now: float) -> bool:
        """Record a crash at ``now``; return True if the actor may be restarted."""
        times = self._times
        times.append(now)
        while times and now - times[0] > self._period:
            times.popleft()
        return len(times) <= self._max

    @property
    def recent(self) -> int:
        """Crashes counted in the current window."""
        return len(self._times)
