"""The session state machine: a pure reducer over one session's evidence.

``reduce(state, message) -> Step`` implements every rule of docs/design.md §4. It does no
I/O and imports no async library, so it is tested exhaustively without an event
loop; :mod:`actors.runtime.session` is the thin actor around it. The state is a frozen
msgspec Struct so that a crashed actor restarts from exactly its last state.

Vocabulary: a *claim* is what one message says about presence or turn; the
*published* activity is derived from the state by :func:`derive` and is only
published when its visible fields changed (docs/design.md §4, Publishing).

This package is the ONLY place that decides a published field. Besides :func:`reduce` it holds
every other decision about what is shown: :func:`crashed` (an actor stopped after repeated
crashes: attention ``failed``), :func:`reprove` (a state restored after a restart, re-proven
against its owner's live start token), :func:`settled` (ended with nothing to act on: the actor
may retire, the table may hide it, the store may forget it), :data:`ATTENTION_PRIORITY`, and
:func:`pane_rank` (which session a pane shows when several are bound to it; :func:`pane_winners`
and :func:`pane_views` apply it). Sinks render an ``Activity``; they never re-decide it.

One job per module (importers use this package's names):

==================  =========================================================================
``step``            :func:`reduce`, the entry: duplicates, dispatch, the proof gate, publishing
``dispatch``        the per-message reduction; the harness-neutral messages' rules
``harness_claims``  each harness's own evidence words (registry, hooks, rollout, daemon, OSC,
                    ledger) as claims
``claims``          the shared apply path: a claim with event-time ordering, proof of death,
                    completions and the completions deferred behind background work
``proof``           the proof gate: what a source cannot prove for its harness is not taken
``published``       what is published for a state: :func:`derive`, the turn, background items
``state``           :class:`SessionState` and the states it starts from
``ranking``         the attention priority, the one winner per pane, the queue's order
``lifetime``        when a session is over (:func:`settled`), how long it stays shown and kept
``restart``         supervision's decisions: :func:`crashed`, :func:`reprove`
==================  =========================================================================
"""

from __future__ import annotations

from actors.core.session.reducer.dispatch import REPLACED
from actors.core.session.reducer.lifetime import (
    ENDED_RETENTION_MS,
    ENDED_SHOWN_MS,
    hidden_after,
    retirable,
    settled,
)
from actors.core.session.reducer.proof import UNLIMITED_SOURCES
from actors.core.session.reducer.published import background_items, derive
from actors.core.session.reducer.ranking import (
    ATTENTION_PRIORITY,
    attention_order,
    attention_rank,
    pane_rank,
    pane_views,
    pane_winners,
)
from actors.core.session.reducer.restart import Reproof, crashed, reprove
from actors.core.session.reducer.state import SessionState, from_activity, initial_state, restored
from actors.core.session.reducer.step import Step, reduce
from messages.codec import SessionMessage

__all__ = [
    "ATTENTION_PRIORITY",
    "ENDED_SHOWN_MS",
    "ENDED_RETENTION_MS",
    "REPLACED",
    "UNLIMITED_SOURCES",
    "Reproof",
    "SessionMessage",
    "SessionState",
    "Step",
    "attention_order",
    "attention_rank",
    "background_items",
    "crashed",
    "derive",
    "from_activity",
    "hidden_after",
    "initial_state",
    "pane_rank",
    "pane_views",
    "pane_winners",
    "reduce",
    "reprove",
    "restored",
    "retirable",
    "settled",
]
