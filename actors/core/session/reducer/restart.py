"""What supervision decides about a session: :func:`crashed` (its actor stopped after repeated
crashes) and :func:`reprove` (a state restored after a restart, re-proven against its owner's
live start token, docs/design.md §4, Restart).
"""

from __future__ import annotations

import msgspec

from actors.core.session.reducer.published import derive
from actors.core.session.reducer.state import SessionState
from actors.core.session.reducer.step import Step
from messages.common import Attention

__all__ = ["Reproof", "crashed", "reprove"]


def crashed(state: SessionState, reason: str, at_ms: int) -> Step:
    """The session's actor stopped after repeated crashes: attention ``failed`` (published).

    Called by the supervisor (the actor's own reducer can no longer be trusted with the
    message that crashed it); the state stays otherwise as it was.
    """
    failed = msgspec.structs.replace(
        state, known=True, failed=Attention("failed", reason[:500], at_ms)
    )
    activity = derive(failed)
    return Step(msgspec.structs.replace(failed, activity=activity), activity)


class Reproof(msgspec.Struct, frozen=True, gc=False):
    """The outcome of :func:`reprove` for one restored session.

    ``step.publish`` is set when the restored activity must be corrected (published under
    ``cause``); ``live`` when the owner is proven to be the same incarnation.
    """

    step: Step
    cause: str | None = None
    live: bool = False


def reprove(state: SessionState, live_token: str | None, observed_at_ms: int) -> Reproof:
    """Re-prove a session restored after a restart, before anything is published.

    The rule is docs/design.md §4 (Restart).

    ``live_token`` is the current start token of the recorded owner pid (``None``: gone, or no
    owner recorded). A session that was not ``persisted`` keeps its state only when its owner
    is alive with the same start token; otherwise it becomes ``persisted`` / ``unknown`` with
    evidence ``persisted_store`` (cause ``persisted_store:owner_dead`` / ``owner_recycled`` /
    ``owner_unknown``), its attention kept except ``needs_input`` (nobody can be waiting on a
    prompt of a process that is gone).
    """
    if state.presence == "persisted":
        return Reproof(Step(state))
    if state.owner_pid is not None and state.owner_token is not None:
        if live_token == state.owner_token:
            return Reproof(Step(state), live=True)
        reason = "owner_dead" if live_token is None else "owner_recycled"
    else:
        reason = "owner_unknown"
    ended = msgspec.structs.replace(
        state,
        presence="persisted",
        turn="unknown",
        source="persisted_store",
        native=None,
        evidence_at_ms=None,
        observed_at_ms=observed_at_ms,
        version=None,
        needs_reason="",
        needs_since_ms=0,
        pty_working=False,
        subagents=frozenset(),
        background=frozenset(),
        deferred=None,
        registry_busy=False,
        children=(),
        host_owned=False,
    )
    activity = derive(ended)
    step = Step(msgspec.structs.replace(ended, activity=activity), activity)
    return Reproof(step, f"persisted_store:{reason}")
