"""The one way tests wait for something that has no event of its own.

Prefer an event (``wait_*`` methods of the actors, ``ListSink.wait_for``); where there is none
(another process's counters, a file another process writes, a tmux option), poll with a
deadline: :func:`poll_until`. Inside one process, :func:`settle_until` lets every task run until
the condition holds without sleeping at all.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel

__all__ = ["POLL_S", "poll_until", "settle_until"]

#: How often a condition without an event is re-checked.
POLL_S = 0.005


async def poll_until(
    check: Callable[[], bool | Awaitable[bool]],
    what: str = "the condition",
    *,
    within: float = 20.0,
    interval: float = POLL_S,
) -> None:
    """Re-check ``check`` (sync or async) every ``interval`` s until it holds.

    :raises AssertionError: naming ``what`` when ``within`` seconds pass first.
    """
    try:
        with anyio.fail_after(within):
            while True:
                result = check()
                if inspect.isawaitable(result):
                    result = await result
                if result:
                    return
                await anyio.sleep(interval)
    except TimeoutError:
        raise AssertionError(f"timed out after {within} s waiting for {what}") from None


async def settle_until(condition: Callable[[], bool]) -> None:
    """Let this process's tasks run until ``condition`` holds (callers bound it with fail_after):
    no sleep, every round waits until all tasks are blocked."""
    while not condition():
        await anyio.wait_all_tasks_blocked()
        if condition():
            return
        await anyio.lowlevel.checkpoint()
