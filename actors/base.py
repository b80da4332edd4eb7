"""The contracts between the supervisor and the actors it runs.

An *evidence sink* is where discovery actors, the hook listener and hosts put
inbound messages (the :class:`~supervisor.Supervisor` is one). An *actor* is an
object with ``async def run(self, sink)`` that runs until cancelled; the
supervisor restarts it one_for_one when it raises.
"""

from __future__ import annotations

from typing import Protocol

from messages.codec import Inbound

__all__ = ["Actor", "EvidenceSink"]


class EvidenceSink(Protocol):
    """Accepts inbound messages without ever blocking the caller."""

    def inject_nowait(self, message: Inbound) -> None:
        """Route ``message``; raise :class:`~messages.MessageError` if it is invalid."""


class Actor(Protocol):
    """A long-running part supervised one_for_one (discovery, listeners, sinks)."""

    async def run(self, sink: EvidenceSink) -> None:
        """Run until cancelled, sending evidence to ``sink``."""
