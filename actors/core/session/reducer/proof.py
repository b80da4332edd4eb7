"""The proof gate (docs/design.md §4, "What a harness can prove"): :func:`only_proven` takes
back what a message's source cannot prove for its session's harness.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from actors.core.session.reducer.state import SessionState
from messages.common import Source

__all__ = ["UNLIMITED_SOURCES", "only_proven"]

#: Evidence that is no harness's own -- process identity, the host's PTY and signals, paneward's
#: own store and supervision -- proves the same for every harness: what a harness declares it
#: can prove (``reduce(..., proof_table=...)``) never limits these.
UNLIMITED_SOURCES: Final = frozenset(
    {"pid_probe", "pty_host", "host", "persisted_store", "supervisor", "pane_mapper"}
)


def only_proven(
    before: SessionState,
    after: SessionState,
    source: Source,
    limits: Mapping[str, frozenset[str]],
) -> SessionState:
    """``after`` without what ``source`` cannot prove for this harness (docs/design.md §4, "What a
    harness can prove"): a turn it cannot prove becomes ``unknown`` (with no ``needs_input``
    reason), a ``running``, ``turn_done`` or ``failed`` it cannot prove is not taken."""
    if source in UNLIMITED_SOURCES:
        return after

    def proven(value: str) -> bool:
        sources = limits.get(value)
        return sources is None or source in sources

    updates: dict[str, object] = {}
    if after.presence == "running" and before.presence != "running" and not proven("running"):
        updates.update(
            presence=before.presence, owner_pid=before.owner_pid, owner_token=before.owner_token
        )
    if after.turn != before.turn and after.turn != "unknown" and not proven(after.turn):
        updates.update(turn="unknown", needs_reason="", needs_since_ms=0)
    elif (
        after.turn == "needs_input"
        and (after.needs_reason, after.needs_since_ms)
        != (before.needs_reason, before.needs_since_ms)
        and not proven("needs_input")
    ):
        # A record of the open wait from a source that cannot prove one tells nothing of it.
        updates.update(
            needs_reason=before.needs_reason,
            needs_since_ms=before.needs_since_ms,
            needs_reason_at_ms=before.needs_reason_at_ms,
        )
    if after.done is not None and after.done != before.done and not proven("turn_done"):
        updates["done"] = before.done
    if after.failed is not None and after.failed != before.failed and not proven("failed"):
        updates["failed"] = before.failed
    return msgspec.structs.replace(after, **updates) if updates else after
