"""Per-pane badges: the pure decision of which tmux options each pane should carry.

Who calls what: :class:`actors.sinks.tmux.TmuxBridge` reads a ``latest`` subscription of the
broadcast hub and feeds every :class:`~messages.Snapshot` / :class:`~messages.Transition` to
:meth:`BadgeBook.apply`. The book keeps the newest :class:`~messages.Activity` per session and
decides, per pane, the options that pane shows; the bridge turns the difference between what
tmux has and what the book wants into one pipelined batch (:func:`option_commands`).

Nothing here does I/O or needs an event loop.

Options set on a bound pane (pane user options, ``set-option -p``):

``@paneward_presence``   ``persisted`` / ``running`` / ``shutting_down``
``@paneward_turn``       ``unknown`` / ``idle`` / ``working`` / ``needs_input``
``@paneward_attention``  ``needs_input`` / ``failed`` / ``turn_done``, or empty
``@paneward_harness``    the session's harness id (``messages.common.Harness``: a package of
                        :mod:`actors.harnesses.catalog`, or ``terminal``)
``@paneward_badge``      a glyph and a word, see :data:`BADGES`
``@paneward_reason``     the open attention's reason, redacted (:mod:`actors.core.views.redact`)
``@paneward_age``        how long the open attention has been open (``<1m``, ``2m``, ``3h``),
                        rewritten only when its text changes: at most once a minute

plus the global ``@paneward_summary`` (e.g. ``2 need you · 3 working``). A pane with no bound
session carries none of them.

Each window with a bound pane carries the window option ``@paneward_window``: the most urgent
badge of its panes (:func:`window_badge`); :class:`WindowMarks` knows which window each pane is
in (from the bridge's pane listing) and says which windows' markers to rewrite.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, NamedTuple

import msgspec

from actors.core.clock import now_ms as _now_ms
from actors.core.session.reducer import pane_rank
from actors.core.tmux.protocol import quote
from actors.core.views.attention import elapsed, next_change_ms
from actors.core.views.redact import shown_reason
from messages import Activity, SessionKey, Snapshot, Transition

__all__ = [
    "BADGES",
    "OPTION_NAMES",
    "SUMMARY_OPTION",
    "WINDOW_OPTION",
    "BadgeBook",
    "BadgeStatistics",
    "PaneChange",
    "PaneOptions",
    "WindowMarks",
    "badge_word",
    "option_commands",
    "pane_options",
    "activity_word",
    "fleet_summary",
    "summary_command",
    "summary_text",
    "window_badge",
    "window_command",
]

PRESENCE_OPTION: Final = "@paneward_presence"
TURN_OPTION: Final = "@paneward_turn"
ATTENTION_OPTION: Final = "@paneward_attention"
HARNESS_OPTION: Final = "@paneward_harness"
BADGE_OPTION: Final = "@paneward_badge"
REASON_OPTION: Final = "@paneward_reason"
AGE_OPTION: Final = "@paneward_age"
SUMMARY_OPTION: Final = "@paneward_summary"
WINDOW_OPTION: Final = "@paneward_window"
OPTION_NAMES: Final = (
    PRESENCE_OPTION,
    TURN_OPTION,
    ATTENTION_OPTION,
    HARNESS_OPTION,
    BADGE_OPTION,
    REASON_OPTION,
    AGE_OPTION,
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
    "exited · done": "■ exited · done",
    "unknown": "? unknown",
}

# The badges from the most urgent down, for a window's marker: what the user must act on
# (the attention queue's order), then a turn running, then what needs nothing.
_URGENCY: Final = tuple(
    BADGES[w]
    for w in (
        "needs you", "failed", "done", "exited · done", "working", "unknown", "idle", "exited"
    )
)
_URGENCY_RANK: Final = {badge: rank for rank, badge in enumerate(_URGENCY)}

# Which words count in the status-line summary, in display order.
_SUMMARY_WORDS: Final = ("needs you", "failed", "done", "working")
_SUMMARY_LABEL: Final = {
    "needs you": "need you",
    "failed": "failed",
    "done": "done",
    "working": "working",
}


_ATTENTION_WORD: Final[Mapping[str, str]] = {
    "needs_input": "needs you",
    "failed": "failed",
    "turn_done": "done",
}
_TURN_WORD: Final[Mapping[str, str]] = {
    "needs_input": "needs you",
    "working": "working",
    "idle": "idle",
    "unknown": "unknown",
}


def badge_word(activity: Activity) -> str:
    """The one word a pane shows for ``activity``.

    Open attention comes first (it is what the user must act on) -- a finished turn nobody saw
    of an agent that is gone reads ``exited · done``: gone, and the done still to see; then a
    session that is no longer proven alive shows ``exited``; else the turn.
    """
    attention = activity.attention
    if attention is not None:
        if attention.kind == "turn_done" and activity.presence == "persisted":
            return "exited · done"
        return _ATTENTION_WORD[attention.kind]
    if activity.presence == "persisted":
        return "exited"
    return _TURN_WORD[activity.turn]


class PaneOptions(NamedTuple):
    """The values of the pane options, in :data:`OPTION_NAMES` order (``attention``,
    ``reason`` and ``age``: ``""`` when none is open)."""

    presence: str
    turn: str
    attention: str
    harness: str
    badge: str
    reason: str = ""
    age: str = ""

    def as_dict(self) -> dict[str, str]:
        """Option name -> value."""
        return dict(zip(OPTION_NAMES, self, strict=True))


# (presence, turn, attention kind, harness, reason, age, full text) -> the pane's options, and
# options -> their ``name "value"`` command words. Without attention every field is a closed
# literal set (a few hundred entries); reasons are free text, so the caches are bounded. They
# make a transition one dict lookup on the badge writer's hot path.
_OPTIONS_CACHE: dict[tuple[str, str, str, str, str, str, bool], PaneOptions] = {}
_SHOWN_ASSIGNMENTS: dict[PaneOptions, tuple[str, ...]] = {}
_OPTIONS_LIMIT: Final = 4096


def pane_options(
    activity: Activity, now_ms: int | None = None, *, full_text: bool = False
) -> PaneOptions:
    """The full set of pane options for a pane showing ``activity`` at ``now_ms`` (default:
    the clock; only the age depends on it). The reason is redacted unless ``full_text``."""
    attention = activity.attention
    reason = age = ""
    if attention is not None:
        reason = attention.reason
        age = elapsed(attention.since_ms, _now_ms() if now_ms is None else now_ms)
    cache_key = (
        activity.presence,
        activity.turn,
        attention.kind if attention is not None else "",
        activity.key.harness,
        reason,
        age,
        full_text,
    )
    options = _OPTIONS_CACHE.get(cache_key)
    if options is None:
        if len(_OPTIONS_CACHE) >= _OPTIONS_LIMIT:
            _OPTIONS_CACHE.clear()
            _SHOWN_ASSIGNMENTS.clear()
        options = _OPTIONS_CACHE[cache_key] = PaneOptions(
            *cache_key[:4],
            BADGES[badge_word(activity)],
            shown_reason(reason, full_text=full_text) if reason else "",
            age,
        )
        _SHOWN_ASSIGNMENTS[options] = _render_assignments(options)
    return options


def summary_text(words: Iterable[str]) -> str:
    """``2 need you · 1 done · 3 working`` from the badge words of the bound panes."""
    return _summary_of_counts(Counter(words))


def _summary_of_counts(counts: Mapping[str, int]) -> str:
    shown = {word: counts.get(word, 0) for word in _SUMMARY_WORDS}
    shown["done"] += counts.get("exited · done", 0)  # a done still to see, of an agent gone
    return " · ".join(f"{shown[w]} {_SUMMARY_LABEL[w]}" for w in _SUMMARY_WORDS if shown[w])


def activity_word(activity: Activity) -> str:
    """The badge word of one session's activity (its attention's, else its turn's)."""
    if activity.attention is not None:
        return _ATTENTION_WORD[activity.attention.kind]
    return _TURN_WORD[activity.turn]


def fleet_summary(local: Mapping[str, int], remote: Iterable[Activity]) -> str:
    """The summary with a fleet's sessions counted in: ``local`` the bound panes' counts per
    badge word, ``remote`` the fleet's activities (their key's ``host``). Each word's total,
    then where the remote ones are: ``2 need you (1 on gpu1) · 3 working``."""
    counts: Counter[str] = Counter(local)
    counts["done"] += counts.pop("exited · done", 0)  # as _summary_of_counts counts it
    where: dict[str, Counter[str]] = {}
    for activity in remote:
        word = activity_word(activity)
        counts[word] += 1
        where.setdefault(word, Counter())[activity.key.host or "?"] += 1
    parts = []
    for word in _SUMMARY_WORDS:
        if not counts[word]:
            continue
        text = f"{counts[word]} {_SUMMARY_LABEL[word]}"
        hosts = where.get(word)
        if hosts:
            text += " (" + ", ".join(f"{n} on {host}" for host, n in sorted(hosts.items())) + ")"
        parts.append(text)
    return " · ".join(parts)


class PaneChange(NamedTuple):
    """What one pane should now carry: the full option set, or ``None`` for no options."""

    pane: str
    options: PaneOptions | None


class BadgeStatistics(msgspec.Struct, kw_only=True):
    """Counters of a :class:`BadgeBook`: one record it keeps, copied by ``statistics()``
    (``sessions`` and ``panes`` are sizes, filled in then)."""

    snapshots: int = 0
    transitions: int = 0
    stale: int = 0
    ignored: int = 0
    sessions: int = 0
    panes: int = 0


class BadgeBook:
    """The newest activity per session and the options each bound pane should show.

    :meth:`apply` takes the items of a ``latest`` subscription in order and returns the panes
    whose options changed, each with its full option set (``None``: clear every option).
    :meth:`tick` rewrites the age of panes with open attention when its text changes;
    :meth:`next_tick_ms` says when that is next due (``None``: no pane has attention open,
    nothing to wake up for). ``clock`` gives the time (epoch ms); ``full_text`` shows reasons
    unredacted.
    """

    def __init__(self, *, clock: Callable[[], int] = _now_ms, full_text: bool = False) -> None:
        self._clock = clock
        self._full_text = full_text
        # Panes whose shown session has attention open: pane -> its since_ms.
        self._aging: dict[str, int] = {}
        # When the first of their ages is due to change, or earlier (a pane that stopped aging
        # leaves it as it was: the timer then finds nothing due once, and tick() recomputes):
        # kept as panes start aging, so a change costs O(1) here and not a walk of every pane.
        self._due: int | None = None
        #: Bumped whenever :meth:`next_tick_ms` moved earlier or became ``None``: a timer armed
        #: for it must be re-armed then, and only then.
        self.aging_changes = 0
        self._sessions: dict[SessionKey, tuple[int, Activity]] = {}
        self._by_pane: dict[str, set[SessionKey]] = {}
        self._shown: dict[str, PaneOptions] = {}
        # How many bound panes show each badge, kept as panes change: the summary costs the
        # same with 5 panes as with 500.
        self._badge_counts: dict[str, int] = dict.fromkeys(BADGES.values(), 0)
        self._stats = BadgeStatistics()

    @property
    def shown(self) -> Mapping[str, PaneOptions]:
        """Pane -> the options it should carry now (only bound panes)."""
        return self._shown

    def winner(self, pane: str) -> Activity | None:
        """The activity ``pane`` shows (:func:`actors.core.session.reducer.pane_rank`), ``None``: no
        session is bound to it."""
        keys = self._by_pane.get(pane)
        if not keys:
            return None
        return max((self._sessions[k][1] for k in keys), key=pane_rank)

    def summary(self, remote: Sequence[Activity] = ()) -> str:
        """The status-line summary over all bound panes (empty when nothing to report), with
        a fleet's ``remote`` sessions counted in (:func:`fleet_summary`)."""
        counts = self._badge_counts
        local = {word: counts[badge] for word, badge in BADGES.items()}
        if remote:
            return fleet_summary(local, remote)
        return _summary_of_counts(local)

    def apply(self, item: object) -> list[PaneChange]:
        """Take one subscription item; return the panes whose options changed.

        A :class:`Snapshot` replaces every session; a :class:`Transition` older than (or as old
        as) what the book has for its key is stale and ignored (counted). Any other item (e.g.
        an ``Overflow`` marker) changes nothing and is counted as ignored.
        """
        if isinstance(item, Transition):
            key = item.key
            current = self._sessions.get(key)
            if current is not None:
                if current[0] >= item.seq:
                    self._stats.stale += 1
                    return []
                after = item.after
                pane = after.pane
                if pane is not None and pane == current[1].pane:
                    # The common case — a session changes state on the pane it already had —
                    # touches one pane and, when it is the pane's only session, ranks nothing.
                    self._stats.transitions += 1
                    self._sessions[key] = (item.seq, after)
                    if len(self._by_pane[pane]) == 1:
                        return self._show(pane, after)
                    return self._recompute((pane,))
            self._stats.transitions += 1
            return self._recompute(self._put(item.seq, item.after))
        if isinstance(item, Snapshot):
            self._stats.snapshots += 1
            affected = set(self._by_pane)
            self._sessions.clear()
            self._by_pane.clear()
            for activity in item.activities:
                affected |= self._put(item.seq, activity)
            return self._recompute(affected)
        self._stats.ignored += 1
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

    def _show(self, pane: str, activity: Activity) -> list[PaneChange]:
        attention = activity.attention
        if attention is None:
            self._stop_aging(pane)
        elif self._aging.get(pane) != attention.since_ms:
            self._aging[pane] = attention.since_ms
            due = next_change_ms(attention.since_ms, self._clock())
            if self._due is None or due < self._due:
                self._due = due
                self.aging_changes += 1
        options = pane_options(activity, self._clock(), full_text=self._full_text)
        old = self._shown.get(pane)
        if old == options:
            return []
        if old is not None:
            self._badge_counts[old.badge] -= 1
        self._badge_counts[options.badge] += 1
        self._shown[pane] = options
        return [PaneChange(pane, options)]

    def _recompute(self, panes: Iterable[str]) -> list[PaneChange]:
        changes: list[PaneChange] = []
        for pane in sorted(panes):
            keys = self._by_pane.get(pane)
            if keys:
                _seq, winner = max(
                    (self._sessions[k] for k in keys), key=lambda pair: pane_rank(pair[1])
                )
                changes += self._show(pane, winner)
            elif pane in self._shown:
                self._badge_counts[self._shown.pop(pane).badge] -= 1
                self._stop_aging(pane)
                changes.append(PaneChange(pane, None))
        return changes

    def _stop_aging(self, pane: str) -> None:
        if self._aging.pop(pane, None) is not None and not self._aging:
            self._due = None
            self.aging_changes += 1

    def next_tick_ms(self) -> int | None:
        """When the first shown age changes its text (epoch ms; possibly earlier, once, after
        that pane stopped aging), or ``None``: no pane has attention open. One deadline for
        every pane: the caller needs one timer at most. Never walks the panes."""
        return self._due if self._aging else None

    def tick(self) -> list[PaneChange]:
        """The panes whose age text changed by now (their full option sets); the next deadline
        is recomputed exactly (the one walk of every aging pane, once per due change)."""
        now = self._clock()
        due = [
            pane
            for pane, since in self._aging.items()
            if self._shown[pane].age != elapsed(since, now)
        ]
        changes = self._recompute(due) if due else []
        self._due = min((next_change_ms(since, now) for since in self._aging.values()),
                        default=None)
        return changes

    def statistics(self) -> BadgeStatistics:
        """A point-in-time copy of the counters (see :class:`BadgeStatistics`)."""
        return msgspec.structs.replace(
            self._stats, sessions=len(self._sessions), panes=len(self._shown)
        )


# The writer's hot path renders the same (pane, new options, old options) again and again
# (a pane going working -> idle -> working ...), so the command lines are cached. Option values
# are closed literal sets and panes are the server's pane ids; the bound only guards a very
# long-lived daemon.
_CACHE_LIMIT: Final = 4096
_LINES_CACHE: dict[tuple[str, PaneOptions, PaneOptions], list[str]] = {}


def _render_assignments(options: PaneOptions) -> tuple[str, ...]:
    """``name "value"`` per option."""
    return tuple(
        f"{name} {quote(value)}" for name, value in zip(OPTION_NAMES, options, strict=True)
    )


def _assignments(options: PaneOptions) -> tuple[str, ...]:
    found = _SHOWN_ASSIGNMENTS.get(options)
    # Built by hand rather than by pane_options(): rendered here, not cached.
    return found if found is not None else _render_assignments(options)


def option_commands(
    pane: str, want: PaneOptions | None, have: PaneOptions | None
) -> list[str]:
    """The tmux commands that turn ``have`` into ``want`` on ``pane`` (only changed options).

    ``have`` is what tmux holds as far as the caller knows (``None``: nothing); a sentinel
    whose values match no real value forces every option to be rewritten or removed.
    """
    if want == have:
        return []
    if want is None:
        target = quote(pane)
        return [f"set-option -p -u -t {target} {name}" for name in OPTION_NAMES]
    if have is None:
        prefix = f"set-option -p -t {quote(pane)} "
        return [prefix + assignment for assignment in _assignments(want)]
    key = (pane, want, have)
    lines = _LINES_CACHE.get(key)
    if lines is None:
        prefix = f"set-option -p -t {quote(pane)} "
        lines = [
            prefix + assignment
            for assignment, new, old in zip(_assignments(want), want, have, strict=True)
            if new != old
        ]
        if len(_LINES_CACHE) >= _CACHE_LIMIT:
            _LINES_CACHE.clear()
        _LINES_CACHE[key] = lines
    return lines.copy()


def window_badge(badges: Iterable[str]) -> str:
    """The most urgent of ``badges`` (the badges of one window's panes), ``""`` for none:
    ``▲ needs you`` > ``✖ failed`` > ``✔ done`` > ``■ exited · done`` > ``● working`` >
    ``? unknown`` > ``○ idle`` > ``■ exited``."""
    return min(badges, key=lambda b: _URGENCY_RANK.get(b, len(_URGENCY)), default="")


class WindowMarks:
    """Which window each pane is in, and so which windows' markers a change touches.

    The bridge hands it the pane -> window map of every pane listing (:meth:`place`) and
    asks, for the panes whose options changed, which windows to recompute
    (:meth:`windows_of`); :meth:`marker` is a window's ``@paneward_window`` value. A pane the
    listings have not shown yet belongs to no window.
    """

    def __init__(self) -> None:
        self._window_of: dict[str, str] = {}
        self._panes: dict[str, set[str]] = {}

    @property
    def windows(self) -> Mapping[str, set[str]]:
        """Window -> its panes, as last listed."""
        return self._panes

    def place(self, window_of: Mapping[str, str]) -> set[str]:
        """Take a full listing's pane -> window map; return the windows that gained or lost a
        pane (a pane opened, closed or moved), whose markers may differ now."""
        old = self._window_of
        changed = {w for p, w in old.items() if window_of.get(p) != w}
        changed |= {w for p, w in window_of.items() if old.get(p) != w}
        if changed:
            self._window_of = dict(window_of)
            panes: dict[str, set[str]] = {}
            for pane, window in window_of.items():
                panes.setdefault(window, set()).add(pane)
            self._panes = panes
        return changed

    def windows_of(self, panes: Iterable[str]) -> set[str]:
        """The windows of ``panes`` (those the listings showed)."""
        window_of = self._window_of
        return {window_of[p] for p in panes if p in window_of}

    def marker(self, window: str, shown: Mapping[str, PaneOptions]) -> str:
        """``window``'s marker: the most urgent badge of its panes in ``shown`` (``""``: none
        of its panes is bound, or the window is gone)."""
        return window_badge(shown[p].badge for p in self._panes.get(window, ()) if p in shown)


def window_command(window: str, marker: str) -> str:
    """Set (or, when empty, unset) ``@paneward_window`` on ``window`` (``@N``)."""
    if not marker:
        return f"set-option -w -u -t {quote(window)} {WINDOW_OPTION}"
    return f"set-option -w -t {quote(window)} {WINDOW_OPTION} {quote(marker)}"


def summary_command(text: str) -> str:
    """Set (or, when empty, unset) the global ``@paneward_summary``."""
    if not text:
        return f"set-option -g -u {SUMMARY_OPTION}"
    return f"set-option -g {SUMMARY_OPTION} {quote(text)}"
