"""When to try again: the one retry rule of every reconnecting actor (pure, sans-IO).

Used by the Codex daemon source (:mod:`actors.harnesses.codex.daemon`), the tmux sink
(:mod:`actors.sinks.tmux`) and the notification sink's channels (:mod:`actors.sinks.notify`);
the listeners' accept() pause (:func:`actors.core.ingress.limits.accept_backoff`) is the same curve.
The rule:

- every failure in a row doubles the wait, from ``initial`` up to ``maximum``;
- a connection counts as a success, and resets the wait, only once it has *worked for a while*
  (:data:`HEALTHY_AFTER_S`): a peer that accepts and then fails at once -- a wedged daemon that
  answers the handshake and then sends a bad frame, a tmux server that closes every control
  client -- is one more failure, so its retries slow down instead of spinning at the initial
  rate forever.

The caller owns the clock: it passes monotonic seconds to :meth:`Backoff.connected` and
:meth:`Backoff.ended`, so the rule is tested without waiting.
"""

from __future__ import annotations

import math
from typing import Final

__all__ = ["HEALTHY_AFTER_S", "Backoff", "retry_delay"]

#: A connection that lasted this long worked: the next failure waits ``initial`` again.
HEALTHY_AFTER_S: Final = 10.0


def retry_delay(failures_in_a_row: int, initial: float, maximum: float) -> float:
    """Seconds to wait after the ``failures_in_a_row``-th failure in a row (from 1):
    ``initial`` doubled per further failure, at most ``maximum``."""
    exponent = min(max(failures_in_a_row - 1, 0), 62)
    return min(initial * math.ldexp(1.0, exponent), maximum)


class Backoff:
    """The retry state of one reconnecting actor.

    ``failed()`` after a try that did not connect; ``connected(now)`` when a try connected;
    ``ended(now)`` when that connection ended, however it ended. Both ``failed`` and ``ended``
    return the seconds to wait before the next try.

    A ``maximum`` below ``initial`` caps it too: every wait is ``maximum``.

    :raises ValueError: from the constructor, for a non-positive ``initial`` or ``maximum``.
    """

    __slots__ = ("_connected_at", "failures_in_a_row", "healthy_after", "initial", "maximum")

    def __init__(
        self, initial: float, maximum: float, *, healthy_after: float = HEALTHY_AFTER_S
    ) -> None:
        if not (initial > 0 and maximum > 0):
            raise ValueError(f"backoff needs positive waits, got {initial}, {maximum}")
        self.initial = min(initial, maximum)
        self.maximum = maximum
        self.healthy_after = healthy_after
        self.failures_in_a_row = 0
        self._connected_at: float | None = None

    def failed(self) -> float:
        """A try failed (or a connection ended before it worked): the wait before the next."""
        self.failures_in_a_row += 1
        return retry_delay(self.failures_in_a_row, self.initial, self.maximum)

    def connected(self, now: float) -> None:
        """A try connected at ``now`` (monotonic seconds)."""
        self._connected_at = now

    def ended(self, now: float) -> float:
        """The connection made at :meth:`connected` ended at ``now``: the wait before the next
        try -- ``initial`` if it worked for :attr:`healthy_after` seconds, else one more
        failure in a row."""
        began, self._connected_at = self._connected_at, None
        if began is not None and now - began >= self.healthy_after:
            self.failures_in_a_row = 0
        return self.failed()
