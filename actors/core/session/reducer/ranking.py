"""Which session comes first: the attention priority, the one winner per pane, and the order
of the attention queue and the status table (docs/design.md §4). Everything here reads a
published ``Activity``, so a snapshot ranks exactly as the transitions that led to it did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from messages.activity import Activity, PaneView
from messages.common import AttentionKind

__all__ = [
    "ATTENTION_PRIORITY",
    "attention_order",
    "attention_rank",
    "pane_rank",
    "pane_views",
    "pane_winners",
]

#: Attention kinds, most urgent first (docs/design.md §4): the one priority derive, badges, the
#: status table and the attention queue all use.
ATTENTION_PRIORITY: Final[tuple[AttentionKind, ...]] = ("needs_input", "failed", "turn_done")
_ATTENTION_RANK: Final[dict[str, int]] = {
    kind: len(ATTENTION_PRIORITY) - i for i, kind in enumerate(ATTENTION_PRIORITY)
}


def attention_rank(kind: AttentionKind | None) -> int:
    """Higher is more urgent (:data:`ATTENTION_PRIORITY`); 0 for no attention."""
    return 0 if kind is None else _ATTENTION_RANK[kind]


def pane_rank(activity: Activity) -> tuple[bool, int, bool, int, str]:
    """The sort key of a session among those bound to one pane: the largest is shown.

    One rule (docs/design.md §4, "one winner per pane"), used by the tmux badges, ``paneward
    status`` and its JSON alike: the session that proves the most about the turn wins -- a proven
    turn (a live owner and a turn other than ``unknown``) beats ``unknown``, then open attention by
    :data:`ATTENTION_PRIORITY`, then a live owner over an ended one; ties go to the newest
    evidence, then the key (only to be deterministic). Everything it reads is in the activity,
    so a snapshot ranks exactly as the transitions that led to it did.
    """
    attention = activity.attention
    evidence = activity.evidence
    return (
        activity.presence != "persisted" and activity.turn != "unknown",
        attention_rank(attention.kind if attention is not None else None),
        activity.presence != "persisted",
        evidence.at_ms or evidence.observed_at_ms or 0,
        str(activity.key),
    )


def pane_winners(activities: Iterable[Activity]) -> dict[str, Activity]:
    """The session each pane shows (:func:`pane_rank`), for every pane some session is bound to."""
    shown: dict[str, Activity] = {}
    for activity in activities:
        pane = activity.pane
        if pane is not None:
            current = shown.get(pane)
            if current is None or pane_rank(activity) > pane_rank(current):
                shown[pane] = activity
    return shown


def pane_views(
    activities: Iterable[Activity], note: Callable[[Activity], str | None] | None = None
) -> list[PaneView]:
    """Which session each pane shows and which others are bound to it, by pane id: the same
    :func:`pane_rank` as the badges and the table. ``note(winner)`` says why a pane shows
    less than it could (its harness package's words, e.g. a Codex TUI whose thread nothing
    proves); ``None`` when there is nothing to say."""
    bound: dict[str, list[Activity]] = {}
    for activity in activities:
        if activity.pane is not None:
            bound.setdefault(activity.pane, []).append(activity)
    views: list[PaneView] = []
    for pane in sorted(bound):
        ranked = sorted(bound[pane], key=pane_rank, reverse=True)
        winner = ranked[0]
        views.append(
            PaneView(
                pane=pane,
                key=winner.key,
                turn=winner.turn,
                hidden=tuple(a.key for a in ranked[1:]),
                note=note(winner) if note is not None else None,
            )
        )
    return views


def attention_order(activity: Activity) -> tuple[int, int, int, str]:
    """The order of the attention queue and of the status table: the most urgent attention first
    (:data:`ATTENTION_PRIORITY`), oldest first within a kind, then live sessions, then the key."""
    attention = activity.attention
    return (
        -attention_rank(attention.kind if attention is not None else None),
        attention.since_ms if attention is not None else 0,
        0 if activity.presence == "running" else 1,
        str(activity.key),
    )
