"""Acting on attention, pure: the attention queue, elapsed times and ``paneward wait`` predicates.

Who uses what:

- :func:`attention_queue` is the one ordered queue over all sessions (docs/design.md §9, "Acting on
  attention"): ``paneward status`` prints it, ``paneward next`` jumps to its first item,
  ``paneward pick`` lists it in a tmux menu. The order is the reducer's
  (:func:`actors.core.session.reducer.attention_order`: ``needs_input``, then ``failed``, then
  ``turn_done``, oldest first within a kind); a pane appears once, through the session it
  shows (:func:`actors.core.session.reducer.pane_winners`), so the queue, the badges and ``status``
  never disagree about a pane.
- :func:`elapsed` / :func:`attention_label` are the durations ``status`` and the badges show
  (``needs you 2m``), from the attention's ``since_ms``.
- :func:`parse_predicate` / :class:`WaitTarget` decide when ``paneward wait`` is done, over the
  same snapshot-then-transitions stream ``watch`` reads.
- :func:`match_sessions` / :func:`resolve_session` turn what a user typed (an id, ``harness:id``
  or a unique prefix of either, as the status table shows ids cut to 13 characters) into a
  session: ``wait``, ``ack`` and ``forget`` name sessions through them.

Nothing here does I/O or reads a clock: callers pass ``now_ms``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, get_args

from actors.core.session.reducer import ATTENTION_PRIORITY, attention_order, pane_winners
from messages.activity import Activity
from messages.common import AttentionKind, Presence, SessionKey, Turn

__all__ = [
    "ATTENTION_WORDS",
    "PREDICATE_HELP",
    "AmbiguousSession",
    "NoSuchTarget",
    "Predicate",
    "WaitTarget",
    "attention_label",
    "attention_queue",
    "elapsed",
    "match_sessions",
    "next_change_ms",
    "parse_kinds",
    "parse_predicate",
    "resolve_here",
    "resolve_session",
]

#: The word each attention kind is shown with (the badge word, ``actors.core.tmux.badges``).
ATTENTION_WORDS: Final[Mapping[AttentionKind, str]] = {
    "needs_input": "needs you",
    "failed": "failed",
    "turn_done": "done",
}

_TURNS: Final = frozenset(get_args(Turn))
_PRESENCES: Final = frozenset(get_args(Presence))
_KINDS: Final = frozenset(ATTENTION_PRIORITY)

PREDICATE_HELP: Final = (
    "attention (any open item), needs_input | failed | turn_done (that kind), "
    "attention=none, turn=unknown|idle|working|needs_input, "
    "presence=persisted|running|shutting_down"
)

Predicate = Callable[[Activity], bool]


def attention_queue(
    activities: Iterable[Activity], kinds: Iterable[AttentionKind] | None = None
) -> list[Activity]:
    """Every session with open attention, most urgent first, oldest first within a kind.

    A session bound to a pane that shows another session (the pane winner rule) is left
    out: its pane is represented by the session it shows. Panes are told apart by host: a fleet
    host's ``%3`` is a pane of its own tmux, never this machine's ``%3``. ``kinds`` keeps only
    those kinds.
    """
    items = list(activities)
    by_host: dict[str | None, list[Activity]] = {}
    for a in items:
        by_host.setdefault(a.key.host, []).append(a)
    shown = {(host, pane): a.key for host, group in by_host.items()
             for pane, a in pane_winners(group).items()}
    wanted = _KINDS if kinds is None else frozenset(kinds)
    queue = [
        a
        for a in items
        if a.attention is not None
        and a.attention.kind in wanted
        and (a.pane is None or shown[(a.key.host, a.pane)] == a.key)
    ]
    queue.sort(key=attention_order)
    return queue


def elapsed(since_ms: int, now_ms: int) -> str:
    """How long ago ``since_ms`` was, in whole minutes: ``<1m``, ``2m``, ``3h``, ``4d``.

    Minutes below an hour, hours below a day, then days: the text changes at most once a
    minute (the badges rely on that, see :func:`next_change_ms`).
    """
    minutes = max(0, now_ms - since_ms) // 60_000
    if minutes < 1:
        return "<1m"
    if minutes < 60:
        return f"{minutes}m"
    if minutes < 24 * 60:
        return f"{minutes // 60}h"
    return f"{minutes // (24 * 60)}d"


def next_change_ms(since_ms: int, now_ms: int) -> int:
    """The first time after ``now_ms`` at which :func:`elapsed` changes its text."""
    age = max(0, now_ms - since_ms)
    minutes = age // 60_000
    if minutes < 60:
        step = 60_000
    elif minutes < 24 * 60:
        step = 3_600_000
    else:
        step = 86_400_000
    return since_ms + (age // step + 1) * step


def attention_label(activity: Activity, now_ms: int) -> str:
    """``needs you 2m``: the attention's word and how long it has been open (``""``: none)."""
    attention = activity.attention
    if attention is None:
        return ""
    return f"{ATTENTION_WORDS[attention.kind]} {elapsed(attention.since_ms, now_ms)}"


def parse_kinds(text: str) -> tuple[AttentionKind, ...]:
    """``needs_input,failed`` -> the kinds, in priority order (``all``: every kind;
    ``none`` or empty: no kind).

    :raises ValueError: naming an unknown kind.
    """
    words = [w.strip() for w in text.split(",") if w.strip()]
    if words == ["all"]:
        return ATTENTION_PRIORITY
    if words == ["none"]:
        return ()
    unknown = [w for w in words if w not in _KINDS]
    if unknown:
        raise ValueError(
            f"unknown attention kind {unknown[0]!r} (expected {', '.join(ATTENTION_PRIORITY)},"
            " all or none)"
        )
    return tuple(k for k in ATTENTION_PRIORITY if k in words)


def parse_predicate(text: str) -> Predicate:
    """One ``paneward wait --until`` predicate (see :data:`PREDICATE_HELP`).

    :raises ValueError: with what was expected.
    """
    word = text.strip()
    if word == "attention":
        return lambda a: a.attention is not None
    if word in _KINDS:
        return lambda a: a.attention is not None and a.attention.kind == word
    name, sep, value = word.partition("=")
    if sep:
        if name == "turn" and value in _TURNS:
            return lambda a: a.turn == value
        if name == "presence" and value in _PRESENCES:
            return lambda a: a.presence == value
        if name == "attention" and value == "none":
            return lambda a: a.attention is None
        if name == "attention" and value in _KINDS:
            return lambda a: a.attention is not None and a.attention.kind == value
    raise ValueError(f"unknown predicate {text!r}: expected {PREDICATE_HELP}")


class NoSuchTarget(LookupError):
    """No session has the id (or prefix) given, or no session shows the pane given.

    Raised by :func:`resolve_session` and :meth:`WaitTarget.snapshot`; the text says which.
    """


class AmbiguousSession(LookupError):
    """A prefix names more than one session; the text lists them (``harness:id`` each)."""


def _names(text: str, key: SessionKey, *, exact: bool) -> bool:
    if exact:
        return text in (key.session_id, str(key))
    return key.session_id.startswith(text) or str(key).startswith(text)


def match_sessions(keys: Iterable[SessionKey], text: str) -> list[SessionKey]:
    """The sessions ``text`` names, sorted: those whose id or ``harness:id`` is ``text``; if
    none is, those whose id or ``harness:id`` starts with it (an empty ``text`` names none)."""
    if not text:
        return []
    known = sorted(set(keys), key=lambda k: (k.harness, k.session_id))
    exact = [k for k in known if _names(text, k, exact=True)]
    return exact or [k for k in known if _names(text, k, exact=False)]


def resolve_session(keys: Iterable[SessionKey], text: str) -> SessionKey:
    """The one session ``text`` names (see :func:`match_sessions`).

    :raises NoSuchTarget: it names none.
    :raises AmbiguousSession: it names several (listed, so the user can type more).
    """
    found = match_sessions(keys, text)
    if not found:
        raise NoSuchTarget(f"no session {text!r} (`paneward status --all` lists every one)")
    if len(found) > 1:
        shown = ", ".join(str(k) for k in found[:10])
        more = f" and {len(found) - 10} more" if len(found) > 10 else ""
        raise AmbiguousSession(
            f"{text!r} names {len(found)} sessions: {shown}{more}; give more of the id"
        )
    return found[0]


def resolve_here(keys: Iterable[SessionKey], text: str, verb: str) -> SessionKey:
    """The one session of this machine ``text`` names (:func:`resolve_session` over the keys
    without a host): what ``ack`` and ``forget`` act on, since a fleet host's session is its
    host's daemon's to change. ``verb``: the command, for the message.

    :raises NoSuchTarget: it names none of this machine's (saying so when it names a fleet
        host's session, and where to run ``verb`` instead).
    :raises AmbiguousSession: it names several of this machine's.
    """
    every = list(keys)
    try:
        return resolve_session([k for k in every if k.host is None], text)
    except NoSuchTarget:
        remote = match_sessions([k for k in every if k.host is not None], text)
        if not remote:
            raise
        hosts = ", ".join(sorted({str(k.host) for k in remote}))
        raise NoSuchTarget(f"{text!r} names a session of fleet host {hosts}: {verb} it there "
                           f"(`ssh HOST paneward {verb} ...`)") from None


class WaitTarget:
    """What ``paneward wait`` waits for: every predicate holding for one session.

    ``session`` names a session (its id, ``harness:id``, or a unique prefix of either:
    :func:`resolve_session`); ``pane`` a pane, judged through the session that pane shows (the
    pane winner rule); neither: any session. The named session, or a session on the pane, must
    be in the snapshot unless ``for_new``: then the first session the text names that appears
    is the one waited for (``pane``: the pane may show no session yet). Feed it the activities
    of a snapshot (:meth:`snapshot`), then each transition's ``after`` (:meth:`update`); each
    returns the first matching activity, or ``None``.
    """

    def __init__(
        self,
        predicates: Sequence[Predicate],
        *,
        session: str | None = None,
        pane: str | None = None,
        for_new: bool = False,
    ) -> None:
        if session is not None and pane is not None:
            raise ValueError("give --session or --pane, not both")
        self._predicates = tuple(predicates)
        self._session = session
        self._pane = pane
        self._for_new = for_new
        self._pinned: SessionKey | None = None
        self._current: dict[SessionKey, Activity] = {}

    def _selected(self, activity: Activity) -> bool:
        if self._session is None:
            return True
        if self._pinned is None and _names(self._session, activity.key, exact=False):
            # --for-new: the first session the prefix names is the one waited for.
            self._pinned = activity.key
        return activity.key == self._pinned

    def _holds(self, activity: Activity) -> bool:
        return self._selected(activity) and all(p(activity) for p in self._predicates)

    def _pane_match(self) -> Activity | None:
        assert self._pane is not None
        winner = pane_winners(self._current.values()).get(self._pane)
        return winner if winner is not None and self._holds(winner) else None

    def snapshot(self, activities: Iterable[Activity]) -> Activity | None:
        """Start from a snapshot; the first session that already matches (in queue order).

        :raises NoSuchTarget: the session or pane is not in the snapshot (and not ``for_new``).
        :raises AmbiguousSession: the session's prefix names several sessions.
        """
        self._current = {a.key: a for a in activities}
        if self._session is not None:
            found = match_sessions(self._current, self._session)
            if found or not self._for_new:
                self._pinned = resolve_session(found, self._session)
        if self._pane is not None:
            if not self._for_new and self._pane not in pane_winners(self._current.values()):
                raise NoSuchTarget(f"no session shows pane {self._pane!r}")
            return self._pane_match()
        for activity in sorted(self._current.values(), key=attention_order):
            if self._holds(activity):
                return activity
        return None

    def update(self, activity: Activity) -> Activity | None:
        """One transition's ``after``: it, when it now matches."""
        self._current[activity.key] = activity
        if self._pane is not None:
            # Any session's change can change which session the pane shows.
            return self._pane_match()
        return activity if self._holds(activity) else None
