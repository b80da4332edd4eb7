"""When a session is over: :func:`settled` (ended with nothing to act on), the same rule on the
state (:func:`retirable`), and how long a settled session stays shown and kept.
"""

from __future__ import annotations

from typing import Final

from actors.core.session.reducer.state import SessionState
from messages.activity import Activity

__all__ = ["ENDED_RETENTION_MS", "ENDED_SHOWN_MS", "hidden_after", "retirable", "settled"]

#: A settled session (ended, nothing to act on) leaves the ``paneward status`` table after a day
#: (``--all`` lists it) ...
ENDED_SHOWN_MS: Final = 24 * 3600 * 1000
#: ... and the store forgets it after a week (deleted at load rather than restored).
ENDED_RETENTION_MS: Final = 7 * 24 * 3600 * 1000


def settled(activity: Activity) -> bool:
    """Ended (no live owner proven) with nothing for the user to act on.

    The one rule for "ended": a settled session's actor retires, the status table hides it
    after :data:`ENDED_SHOWN_MS`, the store forgets it after :data:`ENDED_RETENTION_MS`. A
    ``failed`` or ``turn_done`` nobody acknowledged keeps a session unsettled.
    """
    return activity.presence == "persisted" and activity.attention is None


def retirable(state: SessionState) -> bool:
    """True when the session's actor may stop: :func:`settled` (the same rule, on the state)."""
    return state.presence == "persisted" and state.done is None and state.failed is None


def hidden_after(activity: Activity, now_ms: int, after_ms: int = ENDED_SHOWN_MS) -> bool:
    """:func:`settled` for longer than ``after_ms`` (by its evidence time): the status table
    leaves it out (``--all`` lists it)."""
    if not settled(activity):
        return False
    evidence = activity.evidence
    at_ms = evidence.at_ms or evidence.observed_at_ms
    return at_ms is not None and now_ms - at_ms > after_ms
