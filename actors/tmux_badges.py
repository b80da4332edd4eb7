"""Per-pane badges: the pure decision of which tmux options each pane should carry.

Who calls what: :class:`actors.tmux.TmuxBridge` reads a ``latest`` subscription of the broadcast
hub and feeds every :class:`~messages.Snapshot` / :class:`~messages.Transition` to
:meth:`BadgeBook.apply`. The book keeps the newest :class:`~messages.Activity` per session and
decides, per pane, the options that pane shows; the bridge turns the difference between what
tmux has and what the book wants into one pipelined batch (:func:`option_commands`).

Nothing here does I/O or needs an event loop.

Options set on a bound pane (pane user options, ``set-option -p``):

``@paneward_presence``   ``persisted`` / ``running`` / ``shutting_down``
``@paneward_turn``       ``unknown`` / ``idle`` / ``working`` / ``needs_input``
``@paneward_attention``  ``needs_input`` / ``failed`` / ``turn_done``, or empty
``@paneward_harness``    ``claude-code`` / ``codex`` / ``cursor`` / ``hermes`` / ``terminal``
``@paneward_badge``      a glyph and a word, see :data:`BADGES`

plus the global ``@paneward_summary`` (e.g. ``2 need you · 3 working``). A pane with no bound
session carries none of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Final, NamedTuple

import msgspec

from actors.tmux_control import quote
from messages import Activity, SessionKey, Snapshot, Transition

__all__ = [
    "BADGES",
    "OPTION_NAMES",
    "SUMMARY_OPTION",
    "BadgeBook",
    "BadgeStatistics",
    "PaneChange",
    "badge_word",
    "option_commands",
    "pane_options",
    "summary_command",
    "summary_text",
]

PRESENCE_OPTION: Final = "@paneward_presence"
TURN_OPTION: Final = "@paneward_turn"
ATTENTION_OPTION: Final = "@paneward_attention"
HARNESS_OPTION: Final = "@paneward_harness"
BADGE_OPTION: Final = "@paneward_badge"
SUMMARY_OPTION: Final = "@paneward_summary"
OPTION_NAMES: Final = (
    PRESENCE_OPTION,
    TURN_OPTION,
    ATTENTION_OPTION,
    HARNESS_OPTION,
    BADGE_OPTION,
)

#: word -> badge text. Glyphs are single-width in every common terminal font (no emoji
#: presentation), and each word has its own glyph so the badge reads at a glance in colour-less
#: themes too.
BADGES: Final[Mapping[str, str]] = {
    "needs you": "▲ needs you",
    "failed": "✖ failed",
    "done": "✔ done",
    "working": "● working",
    "idle": "○ idle",
    "exited": "■ exited",
    "unknown": "? unknown",
}

# Which words count in the status-line summary, in display order.
_SUMMARY_WORDS: Final = ("needs you", "failed", "done", "working")
_SUMMARY_LABEL: Final = {
    "needs you": "need you",
    "failed": "failed",
    "done": "done",
    "working": "working",
}
_ATTENTION_RANK: Final = {"needs_input": 3, "failed": 2, "turn_done": 1}


def badge_word(activity: Activity) -> str:
    """The one word a pane shows for ``activity``.

    Open attention comes first (it is what the user must act on); then a session that is no
    longer proven alive shows ``exited``; else the turn.
    """
    attention = activity.attention
    if attention is not None:
        return {"needs_input": "needs you", "failed": "failed", "turn_done": "done"}[attention.kind]
    if activity.presence == "persisted":
        return "exited"
    return {
        "needs_input": "needs you",
        "working": "working",
        "idle": "idle",
        "unknown": "unknown",
    }[activity.turn]


def pane_options(activity: Activity) -> dict[str, str]:
    """The full set of pane options for a pane showing ``activity``."""
    attention = activity.attention
    return {
        PRESENCE_OPTION: activity.presence,
        TURN_OPTION: activity.turn,
        ATTENTION_OPTION: attention.kind if attention is not None else "",
        HARNESS_OPTION: activity.key.harness,
        BADGE_OPTION: BADGES[badge_word(activity)],
    }


def _rank(seq: int, activity: Activity) -> tuple[int, int, int, str]:
    """Sort key when several sessions claim one pane: the largest wins.

    Attention needs_input > failed > turn_done > none, then a live owner over a persisted one,
    then the newest ``seq``, then the key (only to be deterministic).
    """
    attention = activity.attention
    return (
        _ATTENTION_RANK[attention.kind] if attention is not None else 0,
        0 if activity.presence == "persisted" else 1,
        seq,
        str(activity.key),
    )


def summary_text(words: Iterable[str]) -> str:
    """``2 need you · 1 done · 3 working`` from the badge words of the bound panes."""
    counts = Counter(words)
    parts = [f"{counts[w]} {_SUMMARY_LABEL[w]}" for w in _SUMMARY_WORDS if counts[w]]
    return " · ".join(parts)


class PaneChange(NamedTuple):
    """What one pane should now carry: the full option set, or ``None`` for no options."""

    pane: str
    options: Mapping[str, str] | None


class BadgeStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of a :class:`BadgeBook`."""

    snapshots: int
    transitions: int
    stale: int
    ignored: int
    sessions: int
    panes: int


class BadgeBook:
    """The newest activity per session and the options each bound pane should show.

    :meth:`apply` takes the items of a ``latest`` subscription in order and returns the panes
    whose options changed, each with its full option set (``None``: clear every option).
    """

    def __init__(self) -> None:
        self._sessions: dict[SessionKey, tuple[int, Activity]] = {}
        self._by_pane: dict[str, set[SessionKey]] = {}
        self._shown: dict[str, dict[str, str]] = {}
        self._words: dict[str, str] = {}
        self._snapshots = 0
        self._transitions = 0
        self._stale = 0
        self._ignored = 0

    @property
    def shown(self) -> Mapping[str, Mapping[str, str]]:
        """Pane -> the options it should carry now (only bound panes)."""
        return self._shown

    def summary(self) -> str:
        """The status-line summary over all bound panes (empty when nothing to report)."""
        return summary_text(self._words.values())

    def apply(self, item: object) -> list[PaneChange]:
        """Take one subscription item; return the panes whose options changed.

        A :class:`Snapshot` replaces every session; a :class:`Transition` older than (or as old
        as) what the book has for its key is stale and ignored (counted). Any other item (e.g.
        an ``Overflow`` marker) changes nothing and is counted as ignored.
        """
        if isinstance(item, Snapshot):
            self._snapshots += 1
            affected = set(self._by_pane)
            self._sessions.clear()
            self._by_pane.clear()
            for activity in item.activities:
                affected |= self._put(item.seq, activity)
            return self._recompute(affected)
        if isinstance(item, Transition):
            current = self._sessions.get(item.key)
            if current is not None and current[0] >= item.seq:
                self._stale += 1
                return []
            self._transitions += 1
            return self._recompute(self._put(item.seq, item.after))
        self._ignored += 1
        return []

    def _put(self, seq: int, activity: Activity) -> set[str]:
        """Record ``activity``; return the panes it left or entered."""
        key = activity.key
        affected: set[str] = set()
        previous = self._sessions.get(key)
        if previous is not None and previous[1].pane is not None:
            old = previous[1].pane
            affected.add(old)
            keys = self._by_pane.get(old)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_pane[old]
        self._sessions[key] = (seq, activity)
        if activity.pane is not None:
            affected.add(activity.pane)
            self._by_pane.setdefault(activity.pane, set()).add(key)
        return affected

    def _recompute(self, panes: Iterable[str]) -> list[PaneChange]:
        changes: list[PaneChange] = []
        for pane in sorted(panes):
            keys = self._by_pane.get(pane)
            if keys:
                _seq, winner = max(
                    (self._sessions[k] for k in keys), key=lambda pair: _rank(*pair)
                )
                options = pane_options(winner)
                if self._shown.get(pane) != options:
                    self._shown[pane] = options
                    self._words[pane] = badge_word(winner)
                    changes.append(PaneChange(pane, options))
            elif pane in self._shown:
                del self._shown[pane]
                del self._words[pane]
                changes.append(PaneChange(pane, None))
        return changes

    def statistics(self) -> BadgeStatistics:
        return BadgeStatistics(
            snapshots=self._snapshots,
            transitions=self._transitions,
            stale=self._stale,
            ignored=self._ignored,
            sessions=len(self._sessions),
            panes=len(self._shown),
        )


def option_commands(
    pane: str, want: Mapping[str, str] | None, have: Mapping[str, str] | None
) -> list[str]:
    """The tmux commands that turn ``have`` into ``want`` on ``pane`` (only changed options)."""
    commands: list[str] = []
    target = quote(pane)
    for name in OPTION_NAMES:
        new = want.get(name) if want is not None else None
        old = have.get(name) if have is not None else None
        if new == old:
            continue
        if new is None:
            commands.append(f"set-option -p -u -t {target} {name}")
        else:
            commands.append(f"set-option -p -t {target} {name} {quote(new)}")
    return commands


def summary_command(text: str) -> str:
    """Set (or, when empty, unset) the global ``@paneward_summary``."""
    if not text:
        return f"set-option -g -u {SUMMARY_OPTION}"
    return f"set-option -g {SUMMARY_OPTION} {quote(text)}"
