"""``paneward top``'s decisions, pure: which rows it shows, in what order, and each session's
turn over the last hour as a strip of block characters.

Who uses what: the Textual shell (:mod:`actors.cli.top`) reads the control socket's watch stream
with its snapshot first and the journal's last hour after it (``{"op": "watch", "snapshot":
true, "since_ms": now - WINDOW_MS}``) and feeds each item to :class:`TopModel`
(:meth:`~TopModel.snapshot`, :meth:`~TopModel.transition`); it asks tmux where each pane is
(:data:`actors.core.views.jump.LOCATIONS_COMMAND`) and in which directory
(:data:`DIRECTORIES_COMMAND`), and draws what :meth:`TopModel.rows` returns, filtered by
:class:`Filter`.

The order is the attention queue's first (:func:`actors.core.views.attention.attention_queue`: the
most urgent kind, oldest first; what ``paneward next`` jumps to), then every other session in
the status table's order (:func:`actors.core.session.reducer.attention_order`); sessions settled
more than a day ago are left out unless asked (:func:`actors.core.session.reducer.hidden_after`), as
``paneward status`` does.

The strip: the window (the last :data:`WINDOW_MS`, ending now) cut into equal cells, oldest on
the left; each cell shows the most urgent state the session was in at any moment of it (a
short wait for the user is never hidden by the work around it), ranked as
:data:`STRIP_STATES` lists them, drawn with :data:`STRIP_CHARS`. A state changes at the time of
the evidence that made it (:func:`change_ms`); the state before a session's first transition in
the window is that transition's ``before`` (blank for a new session).

Nothing here does I/O or reads a clock: callers pass ``now_ms``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from actors.core.session.reducer import attention_order, hidden_after, pane_winners
from actors.core.text import clip, printable
from actors.core.views.attention import attention_label, attention_queue, elapsed
from messages.activity import Activity, Snapshot, Transition
from messages.common import AttentionKind, SessionKey

__all__ = [
    "DIRECTORIES_COMMAND",
    "STRIP_CELLS",
    "STRIP_CHARS",
    "STRIP_STATES",
    "WINDOW_MS",
    "Filter",
    "StripState",
    "TopModel",
    "TopRow",
    "change_ms",
    "parse_directories",
    "short_path",
    "strip_cells",
    "strip_state",
    "strip_text",
]

#: How far back the strip reaches: the last hour.
WINDOW_MS: Final = 3_600_000
#: Cells in a strip: two minutes each over the hour.
STRIP_CELLS: Final = 30

StripState = Literal["absent", "gone", "unknown", "idle", "working", "needs_input"]
#: Least urgent first: a cell shows the highest of the states it held.
STRIP_STATES: Final[tuple[StripState, ...]] = (
    "absent", "gone", "unknown", "idle", "working", "needs_input"
)
_RANK: Final[Mapping[StripState, int]] = {state: i for i, state in enumerate(STRIP_STATES)}
#: One character per state: no record yet (blank), the agent not running (``·``), running with
#: its turn not proven (``░``), idle (``▁``), working (``▅``), needs you (``█``).
STRIP_CHARS: Final[Mapping[StripState, str]] = {
    "absent": " ",
    "gone": "·",
    "unknown": "░",
    "idle": "▁",
    "working": "▅",
    "needs_input": "█",
}

#: argv (after ``tmux [-L|-S]``) listing every pane's working directory, as ``%N|PATH``.
DIRECTORIES_COMMAND: Final = ("list-panes", "-a", "-F", "#{pane_id}|#{pane_current_path}")


def strip_state(activity: Activity | None) -> StripState:
    """What the strip shows for ``activity`` (``None``: no record of the session yet)."""
    if activity is None:
        return "absent"
    if activity.presence != "running":
        return "gone"
    return activity.turn


def change_ms(activity: Activity) -> int | None:
    """When ``activity``'s state began: its evidence's own time, else when it was observed (the
    time the journal files the transition under, ``actors/sinks/store/``)."""
    evidence = activity.evidence
    return evidence.at_ms or evidence.observed_at_ms


def strip_cells(
    initial: StripState,
    changes: Iterable[tuple[int, StripState]],
    start_ms: int,
    end_ms: int,
    cells: int = STRIP_CELLS,
) -> tuple[StripState, ...]:
    """The strip of ``[start_ms, end_ms)`` cut into ``cells`` cells: per cell the most urgent
    state held at any moment of it. ``initial`` holds until the first of ``changes``
    (``(at_ms, state)``, oldest first); a change before ``start_ms`` sets the state the window
    starts in.

    :raises ValueError: ``cells`` below 1 or an empty window.
    """
    if cells < 1 or end_ms <= start_ms:
        raise ValueError(f"a strip needs cells >= 1 and a window, not {cells}, "
                         f"[{start_ms}, {end_ms})")
    pending = sorted(changes, key=lambda change: change[0])
    state = initial
    index = 0
    while index < len(pending) and pending[index][0] < start_ms:
        state = pending[index][1]
        index += 1
    span = end_ms - start_ms
    out: list[StripState] = []
    for cell in range(cells):
        cell_end = start_ms + (cell + 1) * span // cells
        best = state
        while index < len(pending) and pending[index][0] < cell_end:
            state = pending[index][1]
            index += 1
            if _RANK[state] > _RANK[best]:
                best = state
        out.append(best)
    return tuple(out)


def strip_text(cells: Iterable[StripState]) -> str:
    """The cells as characters (:data:`STRIP_CHARS`)."""
    return "".join(STRIP_CHARS[cell] for cell in cells)


def parse_directories(text: str) -> dict[str, str]:
    """Parse the output of :data:`DIRECTORIES_COMMAND`: pane id -> its working directory
    (malformed rows, and panes without one, are skipped)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        pane, sep, path = line.partition("|")
        if sep and pane.startswith("%") and path:
            out.setdefault(pane, path)
    return out


def short_path(path: str, home: str | None, width: int = 32) -> str:
    """``path`` as a user reads it: ``~`` for ``home``, escaped, and cut from the left to
    ``width`` characters (``…`` first): the last components say the most."""
    if home and home != "/" and (path == home or path.startswith(home.rstrip("/") + "/")):
        path = "~" + path[len(home.rstrip("/")) :]
    shown = printable(path)
    if len(shown) > width:
        shown = "…" + shown[len(shown) - width + 1 :]
    return shown


@dataclass(frozen=True, slots=True)
class Filter:
    """What the user narrowed the view to: ``text`` (every row whose shown text contains it,
    case-insensitively) and ``needs_you`` (only sessions waiting for the user)."""

    text: str = ""
    needs_you: bool = False

    def keeps(self, row: TopRow) -> bool:
        if self.needs_you and row.kind != "needs_input":
            return False
        needle = self.text.strip().casefold()
        return not needle or needle in row.haystack()


@dataclass(frozen=True, slots=True)
class TopRow:
    """One session as ``paneward top`` shows it; every text field is escaped already
    (:func:`actors.core.text.printable`).

    ``queued``: it is in the attention queue (its pane, if any, shows it); ``kind``: its open
    attention's kind; ``attention``: ``needs you 2m`` or ``""``; ``state``: its turn (or
    ``ended``) and for how long; ``host``: the fleet host it runs on (``local``: this
    machine); ``pane``: this machine's pane id (``None``: not in a local pane), ``where`` the
    pane as the user finds it (``main:1.0 (%3)``; a fleet host's session: its pane id there), in
    parentheses when the pane shows another session; ``cells`` / ``strip``: the last hour.
    """

    key: SessionKey
    queued: bool
    kind: AttentionKind | None
    attention: str
    harness: str
    session: str
    state: str
    strip: str
    cells: tuple[StripState, ...]
    host: str
    pane: str | None
    where: str
    directory: str
    reason: str

    @property
    def id(self) -> str:
        """The row's identity across redraws: the session key."""
        return str(self.key)

    def haystack(self) -> str:
        return " ".join(
            (self.attention, self.host, self.harness, printable(self.key.session_id),
             self.state, self.where, self.directory, self.reason)
        ).casefold()


@dataclass(slots=True)
class _Track:
    initial: StripState
    changes: list[tuple[int, StripState]] = field(default_factory=list)
    moved: bool = False  # a transition was seen: ``initial`` is its ``before``


class TopModel:
    """Every session's newest activity and its turn over the window, from the watch stream.

    Feed it the stream's :class:`~messages.Snapshot` (which starts it afresh: after an
    ``Overflow`` the shell subscribes again), then each :class:`~messages.Transition`: the
    journal's replay (seq up to the snapshot's: history only, the snapshot is newer) and the
    live ones after it. ``window_ms``: how far back the strips reach.
    """

    def __init__(self, window_ms: int = WINDOW_MS) -> None:
        self.window_ms = window_ms
        self.seq = 0
        self._activities: dict[SessionKey, Activity] = {}
        self._tracks: dict[SessionKey, _Track] = {}

    def snapshot(self, snapshot: Snapshot) -> None:
        """Start from ``snapshot``: its sessions, each in its current state for the whole
        window until a transition says otherwise."""
        self.seq = snapshot.seq
        self._activities = {a.key: a for a in snapshot.activities}
        self._tracks = {a.key: _Track(strip_state(a)) for a in snapshot.activities}

    def transition(self, transition: Transition, received_ms: int) -> None:
        """One transition: a replayed one (``seq`` up to the snapshot's) adds history only; a
        live one also becomes the session's activity; one that forgets the session
        (:attr:`~messages.Transition.forgets`) removes it. ``received_ms`` dates one whose
        evidence has no time."""
        key = transition.key
        # A fleet host's line carries its host's seq: never replayed here (the journal is this
        # machine's), so it is always live.
        live = key.host is not None or transition.seq > self.seq
        if transition.forgets:
            # The user forgot the session: it leaves the view, its history with it. A replayed
            # one is older than the snapshot, which holds the key only if evidence started it
            # again: that session's history starts afresh after it.
            if live:
                self._activities.pop(key, None)
            self._tracks.pop(key, None)
            return
        if live:
            self._activities[key] = transition.after
        elif key not in self._activities:
            return  # history of a session the snapshot no longer holds
        track = self._tracks.get(key)
        if track is None or not track.moved:
            track = _Track(strip_state(transition.before), moved=True)
            self._tracks[key] = track
        at = change_ms(transition.after) or received_ms
        last = track.changes[-1] if track.changes else None
        if last is not None:
            at = max(at, last[0])  # seq order rules: a change never goes back in time
        state = strip_state(transition.after)
        if state != (last[1] if last is not None else track.initial):
            track.changes.append((at, state))

    def prune(self, now_ms: int) -> None:
        """Fold changes older than the window into the state each strip starts in (bounds the
        memory of a long-running view)."""
        start = now_ms - self.window_ms
        for track in self._tracks.values():
            old = [c for c in track.changes if c[0] < start]
            if old:
                track.initial = old[-1][1]
                del track.changes[: len(old)]

    def activities(self) -> tuple[Activity, ...]:
        return tuple(self._activities.values())

    def rows(
        self,
        now_ms: int,
        *,
        locations: Mapping[str, str] | None = None,
        directories: Mapping[str, str] | None = None,
        home: str | None = None,
        show_all: bool = False,
        view: Filter | None = None,
        cells: int = STRIP_CELLS,
    ) -> list[TopRow]:
        """The rows to draw, in order (see the module), narrowed by ``view``.

        ``locations`` / ``directories``: per pane id, ``session:window.pane`` and the working
        directory, as tmux says (missing: shown as ``-``).
        """
        activities = [
            a for a in self._activities.values() if show_all or not hidden_after(a, now_ms)
        ]
        queue = attention_queue(activities)
        queued = {a.key for a in queue}
        rest = sorted((a for a in activities if a.key not in queued), key=attention_order)
        local = [a for a in activities if a.key.host is None]  # a remote pane is its host's
        shown = {pane: a.key for pane, a in pane_winners(local).items()}
        start = now_ms - self.window_ms
        out: list[TopRow] = []
        for activity in (*queue, *rest):
            row = self._row(
                activity, now_ms, start, cells, activity.key in queued,
                locations or {}, directories or {}, home, shown,
            )
            if view is None or view.keeps(row):
                out.append(row)
        return out

    def _row(
        self,
        a: Activity,
        now_ms: int,
        start_ms: int,
        cells: int,
        queued: bool,
        locations: Mapping[str, str],
        directories: Mapping[str, str],
        home: str | None,
        shown: Mapping[str, SessionKey],
    ) -> TopRow:
        track = self._tracks.get(a.key) or _Track(strip_state(a))
        strip = strip_cells(track.initial, track.changes, start_ms, now_ms, cells)
        since = track.changes[-1][0] if track.changes else change_ms(a)
        word = a.turn.replace("_", " ") if a.presence == "running" else (
            "ended" if a.presence == "persisted" else "shutting down"
        )
        state = f"{word} {elapsed(since, now_ms)}" if since else word
        pane = a.pane
        if a.key.host is not None:
            # a pane on its host, never one of this machine's: shown, not jumped to from here
            where = printable(pane) if pane is not None else "-"
            pane = None
        elif pane is None:
            where = "-"
        else:
            location = locations.get(pane)
            where = f"{printable(location)} ({printable(pane)})" if location else printable(pane)
            if shown.get(pane, a.key) != a.key:
                where = f"({where})"
        directory = directories.get(pane) if pane is not None else None
        attention = a.attention
        return TopRow(
            key=a.key,
            queued=queued,
            kind=attention.kind if attention is not None else None,
            attention=attention_label(a, now_ms),
            harness=a.key.harness,
            session=clip(a.key.session_id, 13),
            state=state,
            strip=strip_text(strip),
            cells=strip,
            host=printable(a.key.host or "local"),
            pane=pane,
            where=where,
            directory=short_path(directory, home) if directory else "-",
            reason=printable(attention.reason) if attention is not None else "",
        )
