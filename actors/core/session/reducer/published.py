"""What is published for a state: :func:`derive` (the activity), :func:`derive_turn` (its turn,
children rolled up) and :func:`background_items` (its ``subagents`` count).
"""

from __future__ import annotations

from typing import Final

from actors.core.session.reducer.state import SessionState
from messages.activity import Activity
from messages.common import Attention, Evidence, Turn

__all__ = ["background_items", "derive", "derive_turn"]

_RANK: Final[dict[str, int]] = {"unknown": 0, "idle": 1, "working": 2, "needs_input": 3}


def derive(state: SessionState) -> Activity | None:
    """The activity to publish for ``state`` (None while nothing is known)."""
    if not state.known:
        return None
    turn = derive_turn(state)
    attention: Attention | None
    if turn == "needs_input":
        attention = Attention(
            "needs_input",
            state.needs_reason or "input required",
            state.needs_since_ms or state.evidence_at_ms or 0,
        )
        if attention.since_ms <= 0:
            attention = Attention("needs_input", attention.reason, state.turn_at_ms or 1)
    else:
        # failed before turn_done (ATTENTION_PRIORITY): the more urgent one is shown.
        attention = state.failed or state.done
    return Activity(
        key=state.key,
        presence=state.presence,
        turn=turn,
        evidence=Evidence(
            source=state.source,
            native_state=state.native,
            observed_at_ms=state.observed_at_ms,
            at_ms=state.evidence_at_ms,
            harness_version=state.version,
        ),
        attention=attention,
        pane=None if state.left_pane else state.pane,
        exit=state.exit,
        subagents=background_items(state),
    )


def background_items(state: SessionState) -> int:
    """How many pieces of background work of this session are running (published as
    ``subagents``): subagents started and not stopped, OSC 7501 child records, the in-flight
    background work the harness listed, and child threads that are not idle."""
    # Hot path (every derive): no union set or generator for what is empty, as it mostly is.
    subagents, background = state.subagents, state.background
    count = (
        len(subagents | background) if subagents and background
        else len(subagents) + len(background)
    )
    if state.children:
        count += sum(
            1 for _, child_turn, _ in state.children if child_turn in ("working", "needs_input")
        )
    return count


def derive_turn(state: SessionState) -> Turn:
    """The turn as it would be published for ``state`` (children rolled up).

    The same rule as :func:`derive`, without building the activity (hot path).
    """
    if not state.known or state.presence == "persisted":
        return "unknown"
    turn = state.turn
    if state.presence == "running" and turn != "needs_input":
        # Child threads roll up to their root: the strongest wins.
        for _, child_turn, _ in state.children:
            if _RANK[child_turn] > _RANK[turn] and child_turn != "needs_input":
                turn = child_turn
        if turn == "idle" and state.deferred is not None:
            turn = "working"  # the turn completed; work it started still runs
    return turn
