"""Driving a real CLI under ``paneward wrap`` in a tmux pane by what the wrapper reports: the
status frames it sends to a listener socket (:mod:`tests.support.wrap`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Final

import anyio

import messages
from tests.support.wrap import AgentTmuxServer, Frames


@contextmanager
def explain_failure(
    tmux: AgentTmuxServer, pane: Callable[[], str], seen: list[Frames] | None = None
) -> Iterator[None]:
    """On failure, print the pane and the frames (pytest shows them with the failure)."""
    try:
        yield
    except BaseException:
        for frames in seen or []:
            for item in frames.items:
                print(messages.encode(item).decode())
        print(subprocess.run(["ps", "-eo", "pid,ppid,stat,wchan:24,args"], capture_output=True,
                             text=True, check=False).stdout)
        if pane():
            with suppress(Exception):
                print(f"--- pane {pane()} ---\n{tmux.capture(pane())}")
        raise


def statuses(frames: Frames, since: int) -> list[messages.ProgramStatus]:
    return [m for m in frames.items[since:] if isinstance(m, messages.ProgramStatus)]


async def wait_status(
    frames: Frames, since: int, predicate: Callable[[messages.ProgramStatus], bool]
) -> messages.ProgramStatus:
    await frames.wait_for(lambda _: any(predicate(m) for m in statuses(frames, since)))
    return next(m for m in statuses(frames, since) if predicate(m))


async def type_keys(tmux: AgentTmuxServer, pane: str, text: str) -> int:
    """Type ``text`` and wait until it shows, so Enter is not taken as part of a paste."""
    tmux.run("send-keys", "-t", pane, "-l", text)
    await tmux.wait_text(pane, text)
    return 0


# A turn has started once the program reports any of these. Not only ``working``: a turn the
# mock API answers at once can be reported straight as ``done`` (or ``blocked``, for a tool that
# needs approval) — the programs report their newest state, and two clean-clone runs saw idle ->
# done with no working between.
STARTED: Final = frozenset({"working", "blocked", "done"})


async def submit(
    tmux: AgentTmuxServer, pane: str, frames: Frames, text: str, started: frozenset[str] = STARTED
) -> int:
    """Type ``text``, press Enter until a turn has started (a record in ``started``); return
    the frame mark.

    Both CLIs can take an Enter that comes right after typed text as part of a paste (and
    Codex drops its first Enter after start), so Enter is repeated until a turn starts.
    """
    await type_keys(tmux, pane, text)
    return await press_until(tmux, pane, frames, "Enter", started)


async def press_until_approved(tmux: AgentTmuxServer, pane: str, frames: Frames, key: str) -> int:
    """Press ``key`` every 2 s until the dialog is answered; return the frame mark.

    Answered means a ``working`` record follows, or straight away ``done``: the rest of the
    turn is one instant reply from the mock API, and the program may report only its newest
    state (a flaky run saw blocked -> done with no working between).
    """
    return await press_until(tmux, pane, frames, key, frozenset({"working", "done"}))


async def press_until(
    tmux: AgentTmuxServer, pane: str, frames: Frames, key: str, states: frozenset[str]
) -> int:
    """Press ``key`` every 2 s until a main record in ``states`` follows; return the mark.

    Claude ignores keys for a moment after it opens a permission dialog (a guard against
    approving by accident), so one press at a fixed time would be a race.
    """
    mark = len(frames.items)
    for _ in range(10):
        tmux.run("send-keys", "-t", pane, key)
        with anyio.move_on_after(2):
            await wait_status(frames, mark, lambda m: is_main(m) and m.state in states)
            return mark
    raise AssertionError(f"{key!r} never led to {sorted(states)}")


def is_main(m: messages.ProgramStatus) -> bool:
    return m.child_id is None
