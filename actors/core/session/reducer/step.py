"""One reduction step, the public entry: :func:`reduce` drops exact duplicates, hands the
message to its rule (:mod:`actors.core.session.reducer.dispatch`), opens a completion that became
due, applies the proof gate (:mod:`actors.core.session.reducer.proof`) and decides whether the
visible activity changed (:class:`Step`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from actors.core.session.reducer.claims import open_deferred
from actors.core.session.reducer.dispatch import dispatch
from actors.core.session.reducer.proof import only_proven
from actors.core.session.reducer.published import derive
from actors.core.session.reducer.state import SessionState
from messages.activity import Activity
from messages.codec import SessionMessage
from messages.evidence import (
    HookHint,
    LifecycleBoundary,
    ProgramStatus,
    RegistryStatus,
    ThreadStatus,
)

if TYPE_CHECKING:
    from actors.core.session.harness import ProofTable

__all__ = ["Step", "reduce"]

# How many recent fingerprints a session remembers. Small and bounded: memory follows live
# sessions, not history.
_RECENT: Final = 32


class Step(msgspec.Struct, frozen=True, gc=False):
    """The result of one :func:`reduce`: the new state and what to publish.

    ``publish`` is the new activity when its visible fields changed, else None.
    ``ignored`` names why a message changed nothing (stale, duplicate, ...).
    """

    state: SessionState
    publish: Activity | None = None
    ignored: str | None = None


def reduce(
    state: SessionState,
    message: SessionMessage,
    proof_table: ProofTable | None = None,
) -> Step:
    """Apply one routed message to one session (pure).

    ``proof_table`` is what each harness can prove (``actors.core.session.harness.ProofTable``:
    harness id
    -> axis value -> the sources that prove it; the supervisor passes
    ``actors.harnesses.catalog.PROOF_TABLE``). A value this message's source cannot prove for the
    session's harness is never published as proven: a turn stays ``unknown``, a presence, a
    ``turn_done`` or a ``failed`` is not taken
    (:func:`actors.core.session.reducer.proof.only_proven`). ``None``, or a harness the table does
    not name: nothing is limited.

    :return: the new state, and the activity to publish if it visibly changed.
    """
    fingerprint = _fingerprint(message)
    recent = state.recent
    if fingerprint is not None:
        if fingerprint in recent:
            return Step(state, None, "duplicate")
        recent = (*recent, fingerprint)[-_RECENT:]
    new = dispatch(state, message)
    if new is not None and new.deferred is not None:
        # A completion that waited for background work: settle it now that it may be due.
        new = open_deferred(new)
    if new is not None and proof_table is not None:
        limits = proof_table.get(state.key.harness)
        if limits:
            # Every session message states its source on its type (a HookHint in its field):
            # none is left out of what its harness can prove.
            new = only_proven(state, new, message.source, limits)
    if new is None:
        if recent is state.recent:
            return Step(state, None, "no claim")
        return Step(msgspec.structs.replace(state, recent=recent), None, "no claim")
    activity = derive(new)
    previous = new.activity
    if activity is None or (previous is not None and previous.visible() == activity.visible()):
        new = msgspec.structs.replace(new, recent=recent)
        return Step(new, None, None if activity is None else "repeat")
    new = msgspec.structs.replace(new, recent=recent, activity=activity)
    return Step(new, activity, None)


def _fingerprint(message: SessionMessage) -> int | None:
    """Identity of an evidence record, for dropping exact duplicates."""
    identity = _identity(message)
    return None if identity is None else hash(identity)


def _identity(message: SessionMessage) -> tuple[object, ...] | None:
    if isinstance(message, RegistryStatus):
        return ("reg", message.status, message.waiting_for, message.at_ms, message.pid)
    if isinstance(message, HookHint):
        return (
            "hook",
            message.source,
            message.event,
            message.at_ms,
            message.prompt_id,
            message.turn_id,
            message.agent_id,
            message.tool,
            message.serial,
        )
    if isinstance(message, LifecycleBoundary):
        return ("rollout", message.key.session_id, message.boundary, message.turn_id, message.at_ms)
    if isinstance(message, ProgramStatus):
        return ("osc", message.state, message.child_id, message.at_ms, message.message,
                message.serial)
    if isinstance(message, ThreadStatus):
        return ("daemon", message.key.session_id, message.status, message.flags, message.at_ms,
                message.summary, message.serial)
    return None
