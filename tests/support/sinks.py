"""A stand-in for the supervisor's evidence sink, shared by the actor tests.

It validates every message with the wire codec (exactly as ``Supervisor.inject``
does: a message handed to ``deliver_nowait`` must be valid too, it was decoded),
records it, counts which way it came in, and wakes tasks waiting for a count or a
condition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio

import messages

__all__ = ["ListSink"]

M = TypeVar("M")


class ListSink:
    """Records injected messages; ``refuse=True`` makes it refuse like a full mailbox."""

    def __init__(self, *, refuse: bool = False) -> None:
        self.items: list[messages.Inbound] = []
        self.refuse = refuse
        self.injected = 0  # built in Python: inject_nowait
        self.delivered = 0  # decoded from the wire: deliver_nowait
        self._changed = anyio.Event()

    def inject_nowait(self, message: messages.Inbound) -> None:
        self._take(message)
        self.injected += 1

    def deliver_nowait(self, message: messages.Inbound) -> None:
        self._take(message)
        self.delivered += 1

    def _take(self, message: messages.Inbound) -> None:
        if self.refuse:
            raise messages.MessageError("mailbox refused it")
        self.items.append(messages.revalidate(message))
        self._changed.set()
        self._changed = anyio.Event()

    def of(self, kind: type[M]) -> list[M]:
        """The recorded messages of one type, in order."""
        return [m for m in self.items if isinstance(m, kind)]

    async def wait_count(self, n: int) -> list[messages.Inbound]:
        """Wait until ``n`` messages were recorded (callers bound it with fail_after)."""
        while len(self.items) < n:
            await self._changed.wait()
        return self.items

    async def wait_for(self, predicate: Callable[[list[messages.Inbound]], bool]) -> None:
        """Wait until ``predicate(items)`` holds (callers bound it with fail_after)."""
        while not predicate(self.items):
            await self._changed.wait()

    async def wait_one(self, predicate: Callable[[messages.Inbound], bool]) -> messages.Inbound:
        """Wait for the first recorded message matching ``predicate`` (callers bound it)."""
        while True:
            for message in self.items:
                if predicate(message):
                    return message
            await self._changed.wait()
