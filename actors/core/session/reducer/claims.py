"""The shared apply path: a *claim* is what one message says about presence or turn
(:class:`Claim`); :func:`apply_claim` applies it with event-time ordering, :func:`end_session`
applies a proof of death, and completions open ``turn_done`` at once or, while work the turn
started still runs, once it has ended (:func:`open_deferred`).
"""

from __future__ import annotations

from typing import Final

import msgspec

from actors.core.session.hints import reason_detail
from actors.core.session.reducer.published import background_items, derive_turn
from actors.core.session.reducer.state import SessionState
from messages.common import Attention, ExitInfo, Source, Turn

__all__ = [
    "COMPLETED",
    "Claim",
    "apply_claim",
    "end_session",
    "open_deferred",
    "open_done",
    "remember",
    "with_evidence",
]

# How many completed turn ids a session remembers. Small and bounded: memory follows live
# sessions, not history.
COMPLETED: Final = 16

_STATE_WORD_SOURCES: Final = frozenset(
    {"claude_registry", "pty_status", "tmux_output", "hermes_executions", "codex_daemon"}
)


class Claim(msgspec.Struct, frozen=True, gc=False):
    """What one message says, normalized for the shared apply path."""

    source: Source
    native: str | None
    at_ms: int
    observed_at_ms: int
    version: str | None = None
    turn: Turn | None = None  # a turn claim (subject to event-time ordering)
    completion: str | None = None  # "completed" | "interrupted" | None
    turn_id: str | None = None
    reason: str | None = None  # for needs_input
    running: bool = False  # proves a live owner
    owner: tuple[int, str] | None = None


def remember(items: tuple[str, ...], item: str | None, limit: int) -> tuple[str, ...]:
    if item is None or item in items:
        return items
    return (*items, item)[-limit:]


def with_evidence(state: SessionState, claim: Claim) -> SessionState:
    return msgspec.structs.replace(
        state,
        source=claim.source,
        native=claim.native,
        evidence_at_ms=claim.at_ms,
        observed_at_ms=claim.observed_at_ms,
        version=claim.version or state.version,
    )


def open_done(state: SessionState, at_ms: int, reason: str) -> SessionState:
    return _complete(state, Attention("turn_done", reason, at_ms))


def end_session(
    state: SessionState,
    at_ms: int,
    source: Source,
    native: str | None,
    observed_at_ms: int,
    *,
    failed_reason: str | None = None,
    exit: ExitInfo | None = None,
    graceful: bool = False,
) -> SessionState:
    """Proof of death: presence persisted, turn unknown (docs/design.md §4, Presence).

    An abrupt death while working opens attention ``failed``; a graceful end
    (``SessionEnd``, the registry file removed by the exiting program) does not.
    """
    was_working = state.presence == "running" and derive_turn(state) == "working"
    failed = state.failed
    if failed_reason is None and was_working and not graceful:
        failed_reason = f"exited while working ({native or source})"
    if failed_reason is not None:
        failed = Attention("failed", failed_reason, at_ms)
    return msgspec.structs.replace(
        state,
        known=True,
        presence="persisted",
        turn="unknown",
        source=source,
        native=native,
        evidence_at_ms=at_ms,
        observed_at_ms=observed_at_ms,
        ended_at_ms=max(state.ended_at_ms, at_ms),
        turn_at_ms=max(state.turn_at_ms, at_ms),
        failed=failed,
        exit=exit if exit is not None else state.exit,
        pty_working=False,
        subagents=frozenset(),
        background=frozenset(),
        deferred=None,
        registry_busy=False,
        children=(),
        needs_reason="",
        needs_since_ms=0,
    )


def apply_claim(state: SessionState, claim: Claim) -> SessionState:
    """Apply presence and turn claims with event-time ordering (the shared path).

    Collects every field change and replaces the state once (this is the hot path).
    """
    updates: dict[str, object] = {}
    changed = False
    presence = state.presence
    if claim.running and not state.host_owned and claim.at_ms > state.ended_at_ms:
        if presence != "running" or not state.known:
            changed = True
        presence = "running"
        updates["known"] = True
        updates["presence"] = "running"
        if state.exit is not None:
            updates["exit"] = None
        if state.left_pane:
            updates["left_pane"] = False  # alive again: its pane shows it
        if claim.owner is not None:
            updates["owner_pid"], updates["owner_token"] = claim.owner
    if claim.turn is not None and claim.at_ms >= state.turn_at_ms:
        known = state.known or bool(updates)
        before: Turn = "unknown"
        if known and presence != "persisted":
            before = derive_turn(state) if state.presence == presence else state.turn
        turn = claim.turn
        updates["turn"] = turn
        updates["turn_at_ms"] = claim.at_ms
        updates["known"] = True
        needs_reason = ""
        if turn == "needs_input":
            if state.turn != "needs_input":
                updates["needs_since_ms"] = claim.at_ms
                updates["needs_after_ms"] = state.turn_at_ms
                needs_reason = claim.reason or "input required"
                updates["needs_reason_at_ms"] = claim.at_ms
            else:
                needs_reason = _kept_reason(state, claim, updates)
        elif state.needs_since_ms:
            updates["needs_since_ms"] = 0
        updates["needs_reason"] = needs_reason
        done = state.done
        deferred = state.deferred
        if turn == "working" and before != "working" and before != "needs_input":
            done = None  # the next turn closes turn_done
            updates["interrupted"] = None
        if turn == "working" and state.turn != "working" and state.turn != "needs_input":
            deferred = None  # a new turn: the last one's completion is past
        if claim.completion == "completed":
            if (
                claim.turn_id is None or claim.turn_id not in state.completed
            ) and not state.focused:
                attention = Attention(
                    "turn_done", f"turn done ({claim.native or claim.source})", claim.at_ms
                )
                if _still_working(state):
                    deferred = attention  # opens when the work it started has ended
                else:
                    done, deferred = attention, None
            updates["completed"] = remember(state.completed, claim.turn_id, COMPLETED)
            updates["interrupted"] = None
        elif claim.completion == "interrupted":
            deferred = None  # Esc: the turn ended without completing
        if done is not state.done:
            updates["done"] = done
        if deferred is not state.deferred:
            updates["deferred"] = deferred
        if presence == "persisted":
            after: Turn = "unknown"
        elif state.children or state.deferred is not None or "deferred" in updates:
            after = derive_turn(msgspec.structs.replace(state, **updates))
        else:
            after = turn
        if after != before or needs_reason != state.needs_reason:
            changed = True
        elif deferred is not None and deferred is not state.deferred:
            changed = True  # the turn ended while its background work runs: that is news
    elif (
        claim.turn == "needs_input"
        and state.turn == "needs_input"
        and claim.at_ms >= state.needs_after_ms
        and presence != "persisted"
    ):
        # An older record of the wait that is still open (nothing closed it since): it may
        # name what the newer one did not, and the wait opened when it says.
        needs_reason = _kept_reason(state, claim, updates)
        if needs_reason != state.needs_reason:
            updates["needs_reason"] = needs_reason
        if claim.at_ms < state.needs_since_ms:
            updates["needs_since_ms"] = claim.at_ms
    # A new native word from the same state-word source is news (registry idle -> shell);
    # event names of hooks are not (every tool call would publish).
    reworded = (
        claim.turn is not None
        and claim.source in _STATE_WORD_SOURCES
        and claim.source == state.source
        and claim.native != state.native
    )
    if changed or reworded or not state.known:
        updates["source"] = claim.source
        updates["native"] = claim.native
        updates["evidence_at_ms"] = claim.at_ms
        updates["observed_at_ms"] = claim.observed_at_ms
        if claim.version:
            updates["version"] = claim.version
    if not updates:
        return state
    return msgspec.structs.replace(state, **updates)


def _kept_reason(state: SessionState, claim: Claim, updates: dict[str, object]) -> str:
    """The reason of the open wait after ``claim``, another record of it: the one that says
    most (:func:`actors.core.session.hints.reason_detail`), the newer of two that say as much -- so
    the hook's ``permission: Bash: echo hi`` is not replaced by the registry's ``permission
    prompt`` for the same dialog, in either order. Records ``needs_reason_at_ms`` in
    ``updates`` when the claim's reason is taken."""
    reason = claim.reason
    if not reason:
        return state.needs_reason or "input required"
    held = state.needs_reason
    if (reason_detail(reason), claim.at_ms) >= (reason_detail(held), state.needs_reason_at_ms):
        updates["needs_reason_at_ms"] = claim.at_ms
        return reason
    return held


def _still_working(state: SessionState) -> bool:
    """The turn ended but work it started still runs (docs/design.md §4, work that outlives the
    turn): background items, or -- for a Claude that does not list its background work in ``Stop``
    -- its registry still ``busy`` after the hook said the turn ended."""
    if background_items(state) > 0:
        return True
    return state.has_registry and state.registry_busy and not state.background_listed


def _complete(state: SessionState, attention: Attention) -> SessionState:
    """A turn completed: open ``turn_done`` now, or, while work it started still runs, keep
    the completion until that work has ended and the harness says it is idle
    (:func:`open_deferred`). Nothing opens while the pane is focused."""
    if state.focused:
        return msgspec.structs.replace(state, deferred=None)
    if _still_working(state):
        return msgspec.structs.replace(state, deferred=attention)
    return msgspec.structs.replace(state, done=attention, deferred=None)


def open_deferred(state: SessionState) -> SessionState:
    """Open a deferred completion once the last background item has ended and the session's
    own turn is idle (the harness says it is idle)."""
    if state.deferred is None or _still_working(state):
        return state
    if state.presence != "running" or state.turn != "idle":
        return state
    done = None if state.focused else state.deferred
    return msgspec.structs.replace(state, done=done or state.done, deferred=None)
