"""Panes from tmux: the pure diff of pane listings into host control messages.

Who calls what: :class:`actors.sinks.tmux.TmuxBridge` runs :data:`LIST_PANES_COMMAND` over its one
control-mode client whenever tmux tells it something about panes may have changed (control-mode
notifications such as ``%layout-change`` / ``%window-pane-changed`` / ``%unlinked-window-add``,
and a ``refresh-client -B`` subscription over every pane of every session, which tmux itself
re-evaluates at most once a second and reports only when it changed). It feeds the parsed rows
to :meth:`PaneTable.update`, which returns the messages to inject:

- :class:`~messages.PaneOpened` for a new pane (or a respawned one: same id, new root pid),
- :class:`~messages.PaneClosed` for a pane that is gone (and for every pane of a previous
  server when the server was replaced),
- :class:`~messages.PaneFocused` when a pane becomes the active pane of its session's active
  window, and when the pane an attached client shows (:data:`VIEWS_COMMAND`: the client the
  user touched last) is another than at the last listing -- so the first listing after a
  (re)connect focuses the pane the user looks at, whatever other sessions' active panes are,
  and a split in front of the user focuses the new pane (a new pane is otherwise never a focus
  change: the first pane of a detached session is no pane the user looks at),
- :class:`~messages.PtyExit` (``pane=``, ``code=pane_dead_status``, ``signal=pane_dead_signal``)
  when a pane's program exits and ``remain-on-exit`` keeps the pane.

A tmux bug this module works around (measured: about 1 pane death in 3 on tmux 3.3a here).
A tmux built with libutempter (Debian's is) calls ``utempter_remove_record`` when a pane's pty
closes; libutempter installs its own SIGCHLD handler while its helper runs, so when the pane's
program exits in that window tmux never sees the SIGCHLD (tmux/tmux#311). The pane then stays
``pane_dead=1`` with neither ``pane_dead_status`` nor ``pane_dead_signal`` and its process a
zombie until tmux reaps *some other* child: its SIGCHLD handler loops ``waitpid(WAIT_ANY)``.
:meth:`PaneTable.take_unreaped` names such panes (once per pane incarnation) and the bridge
then runs :data:`REAP_COMMAND` before its next listing: tmux forks ``true`` and the reply
arrives only after tmux reaped it, and the stuck zombie with it.

Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, NamedTuple

import msgspec

from actors.core.tmux.protocol import quote, quote_exact
from messages import Inbound, PaneClosed, PaneFocused, PaneOpened, PtyExit
from messages.common import MAX_TEXT_LEN

__all__ = [
    "LIST_PANES_COMMAND",
    "LIST_PANES_FORMAT",
    "REAP_COMMAND",
    "SUBSCRIPTION_COMMAND",
    "SUBSCRIPTION_NAME",
    "TRIGGER_NOTIFICATIONS",
    "SERVER_ID_COMMAND",
    "VIEWS_COMMAND",
    "PaneRow",
    "PaneTable",
    "PaneTableStatistics",
    "parse_pane_rows",
    "unescape_path",
    "viewed_pane",
]

#: The pane's directory as one line: a directory's name may hold anything but NUL and ``/``,
#: and the listing is parsed line by line, so tmux escapes it (``q:`` puts a backslash before
#: ``\\``, ``|`` and the shell's other specials) and then writes each line feed and carriage
#: return as ``\\n`` / ``\\r`` (``s``, applied to the escaped text). :func:`unescape_path`
#: reads it back, every byte kept.
_PATH_FIELD: Final = "#{s/\r/\\\\r/:#{s/\n/\\\\n/:#{q:pane_current_path}}}"
#: One row per pane (linked windows repeat a pane; rows are merged by id). No field holds a
#: line break; the path, the only one that may hold the separator, goes last.
LIST_PANES_FORMAT: Final = (
    "#{pane_id}|#{pane_pid}|#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}"
    f"|#{{&&:#{{pane_active}},#{{window_active}}}}|#{{window_id}}|{_PATH_FIELD}"
)
#: quote_exact: the format holds a line feed and a carriage return (the patterns).
LIST_PANES_COMMAND: Final = f"list-panes -a -F {quote_exact(LIST_PANES_FORMAT)}"
#: The server's identity: pane ids restart at %0 on a new server, so a listing is only
#: comparable with one from the same server (pid and start time).
SERVER_ID_COMMAND: Final = f"display-message -p {quote('#{pid}:#{start_time}')}"

#: Every client: control mode or not, when the user last touched it, the pane it shows (the
#: active pane of its session's current window). Only numbers and a pane id: one row per line.
VIEWS_COMMAND: Final = (
    f"list-clients -F {quote('#{client_control_mode}|#{client_activity}|#{pane_id}')}"
)

#: Makes tmux fork and reap a child (see the module docstring): its SIGCHLD handler then reaps
#: every zombie pane whose SIGCHLD was lost. Without ``-b`` the reply waits for the job, so a
#: listing in the same batch after it sees the exit status.
REAP_COMMAND: Final = "run-shell true"

SUBSCRIPTION_NAME: Final = "paneward-panes"
#: Every pane of every session with the fields whose change no notification reports:
#: existence (splits and kills in sessions other than the one our client is attached to get no
#: ``%layout-change``), root pid (``respawn-pane``) and death (a pane kept by
#: ``remain-on-exit``). tmux evaluates it at most once a second and reports only changes. That
#: evaluation is what the idle daemon costs tmux: it grows with the panes, and each field looked
#: up per pane is a share of it (figures in docs/tmux.md). So focus is left to the notifications,
#: which tmux sends for every session (``%window-pane-changed``, ``%session-window-changed``),
#: and the exit status and signal are looked up only for a dead pane. They still change the
#: value when they arrive after the death, as they do when tmux loses a SIGCHLD (see above).
_SUBSCRIPTION_FORMAT: Final = (
    "#{S:#{W:#{P:#{pane_id}.#{pane_pid}.#{?pane_dead,d#{pane_dead_status}#{pane_dead_signal},}"
    " }}}"
)
SUBSCRIPTION_COMMAND: Final = (
    f"refresh-client -B {quote(SUBSCRIPTION_NAME + '::' + _SUBSCRIPTION_FORMAT)}"
)

#: Control-mode notifications after which the pane listing may differ.
TRIGGER_NOTIFICATIONS: Final = frozenset(
    {
        "layout-change",
        "window-add",
        "window-close",
        "unlinked-window-add",
        "unlinked-window-close",
        "window-pane-changed",
        "session-window-changed",
        "sessions-changed",
        "session-changed",
        "client-session-changed",
        "client-detached",  # another client may now be the one the user touched last
        "subscription-changed",
    }
)


class PaneRow(NamedTuple):
    """One pane as tmux lists it.

    tmux marks a pane dead when its pty closes and learns the exit status a moment later
    (SIGCHLD), so a dead row may briefly have neither status nor signal: :attr:`exit_known`.
    """

    pane: str
    pid: int
    dead: bool
    dead_status: int | None
    dead_signal: int | None
    focused: bool
    cwd: str | None
    window: str | None = None  # ``@N``: where the pane is (a window marker's scope)

    @property
    def exit_known(self) -> bool:
        return self.dead and (self.dead_status is not None or self.dead_signal is not None)


_ESCAPED: Final = re.compile(r"\\(.)", re.DOTALL)
_ESCAPES: Final = {"n": "\n", "r": "\r"}


def unescape_path(text: str) -> str:
    """The directory :data:`_PATH_FIELD` escaped: ``\\n`` / ``\\r`` a line feed / carriage
    return, ``\\`` and any other character after a backslash that character."""
    if "\\" not in text:
        return text
    return _ESCAPED.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), text)


def _opt_int(text: str) -> int | None:
    return int(text) if text.lstrip("-").isdigit() else None


def parse_pane_rows(lines: Iterable[str]) -> tuple[list[PaneRow], list[str]]:
    """Parse :data:`LIST_PANES_FORMAT` output; returns (rows, one error text per bad line).

    Rows for the same pane (a window linked into several sessions) are merged: focused if
    focused anywhere.
    """
    rows: dict[str, PaneRow] = {}
    errors: list[str] = []
    for line in lines:
        parts = line.split("|", 7)
        if len(parts) != 8:
            errors.append(f"expected 8 fields, got {len(parts)}: {line[:80]!r}")
            continue
        pane, pid, dead, status, signal, focused, window, cwd = parts
        if not (pane.startswith("%") and pane[1:].isdigit()) or not pid.isdigit():
            errors.append(f"bad pane id or pid: {line[:80]!r}")
            continue
        if not 1 <= int(pid) <= 2**31 - 1:
            errors.append(f"pid out of range: {line[:80]!r}")
            continue
        row = PaneRow(
            pane=pane,
            pid=int(pid),
            dead=dead == "1",
            dead_status=_opt_int(status),
            dead_signal=_opt_int(signal),
            focused=focused == "1",
            cwd=unescape_path(cwd)[:MAX_TEXT_LEN] or None,
            window=window if window.startswith("@") and window[1:].isdigit() else None,
        )
        seen = rows.get(pane)
        if seen is not None and seen.focused:
            row = row._replace(focused=True)
        rows[pane] = row
    return list(rows.values()), errors


def viewed_pane(lines: Iterable[str]) -> str | None:
    """The pane shown by the attached client the user touched last, from
    :data:`VIEWS_COMMAND` output (``None``: no client but control-mode ones, such as
    paneward's own). Malformed rows are skipped."""
    best: tuple[int, str] | None = None
    for line in lines:
        parts = line.split("|")
        if len(parts) != 3 or parts[0] != "0" or not parts[1].isdigit():
            continue
        pane = parts[2]
        if not (pane.startswith("%") and pane[1:].isdigit()):
            continue
        if best is None or int(parts[1]) > best[0]:
            best = (int(parts[1]), pane)
    return None if best is None else best[1]


class PaneTableStatistics(msgspec.Struct, kw_only=True):
    """Counters of a :class:`PaneTable`: one record it keeps, copied by ``statistics()``
    (``panes``, the size of the last listing, is filled in then)."""

    listings: int = 0
    panes: int = 0
    opened: int = 0
    closed: int = 0
    focused: int = 0
    exited: int = 0
    server_changes: int = 0
    unreaped: int = 0  # dead panes whose exit status tmux had not collected (see take_unreaped)


class PaneTable:
    """The panes last seen, and the messages that describe each new listing's difference."""

    def __init__(self) -> None:
        self._server: str | None = None
        self._rows: dict[str, PaneRow] = {}
        self._viewed: str | None = None  # the pane the user's client showed at the last listing
        # (pane, pid) of dead panes already returned by take_unreaped: asked once each.
        self._reap_asked: set[tuple[str, int]] = set()
        self._stats = PaneTableStatistics()

    @property
    def panes(self) -> dict[str, PaneRow]:
        return dict(self._rows)

    def update(
        self, server: str, rows: Iterable[PaneRow], now_ms: int, viewed: str | None = None
    ) -> list[Inbound]:
        """Compare a full listing from ``server`` with the previous one; return the messages.

        ``viewed`` is the pane the user's client shows (:func:`viewed_pane`), if known: when it
        differs from the last listing's, it is focused last, so it wins over the active panes
        of sessions nobody looks at.

        Order: closes, then opens (with the exit of a pane already dead when first seen), then
        exits, then focus, so a consumer never sees focus for a pane it was not told about.
        """
        self._stats.listings += 1
        out: list[Inbound] = []
        if self._server is not None and server != self._server:
            # A new server reuses pane ids from %0: every old pane is gone.
            self._stats.server_changes += 1
            for pane in sorted(self._rows, key=_pane_order):
                out.append(PaneClosed(pane=pane, at_ms=now_ms))
                self._stats.closed += 1
            self._rows = {}
            self._viewed = None
        self._server = server
        new = {row.pane: row for row in rows}
        for pane in sorted(self._rows.keys() - new.keys(), key=_pane_order):
            out.append(PaneClosed(pane=pane, at_ms=now_ms))
            self._stats.closed += 1
        exits: list[Inbound] = []
        focus: list[Inbound] = []
        for pane in sorted(new, key=_pane_order):
            row = new[pane]
            old = self._rows.get(pane)
            if old is None or old.pid != row.pid:
                # New pane, or respawn-pane: same id, a new root process.
                out.append(
                    PaneOpened(
                        pane=pane, root_pid=row.pid, at_ms=now_ms, cwd=row.cwd, focused=row.focused
                    )
                )
                self._stats.opened += 1
                if row.exit_known:
                    exits.append(self._exit(row, now_ms))
                continue
            if row.exit_known and not old.exit_known:
                # Reported once, when the status is known (see PaneRow).
                exits.append(self._exit(row, now_ms))
            if row.focused and not old.focused:
                focus.append(PaneFocused(pane=pane, at_ms=now_ms))
                self._stats.focused += 1
        if viewed is not None and viewed != self._viewed and viewed in new:
            # Last, so that it wins; once, even when its row became active too.
            kept = [m for m in focus if not (isinstance(m, PaneFocused) and m.pane == viewed)]
            if len(kept) == len(focus):
                self._stats.focused += 1
            focus = [*kept, PaneFocused(pane=viewed, at_ms=now_ms)]
        self._viewed = viewed if viewed in new else None
        self._rows = new
        self._reap_asked &= {(row.pane, row.pid) for row in new.values()}
        return out + exits + focus

    def take_unreaped(self) -> list[str]:
        """Dead panes of the last listing without an exit status, each returned only once.

        Either tmux has not handled the SIGCHLD yet (a moment) or it lost it (the libutempter
        race in the module docstring, then it never will by itself). The caller asks tmux to
        reap (:data:`REAP_COMMAND`) and lists again; asking once per pane incarnation bounds
        that to one extra round trip per pane death.
        """
        panes: list[str] = []
        for pane in sorted(self._rows, key=_pane_order):
            row = self._rows[pane]
            if row.dead and not row.exit_known and (pane, row.pid) not in self._reap_asked:
                self._reap_asked.add((pane, row.pid))
                panes.append(pane)
        self._stats.unreaped += len(panes)
        return panes

    def _exit(self, row: PaneRow, now_ms: int) -> PtyExit:
        self._stats.exited += 1
        return PtyExit(
            at_ms=now_ms,
            observed_at_ms=now_ms,
            pane=row.pane,
            code=row.dead_status,
            signal=row.dead_signal,
        )

    def statistics(self) -> PaneTableStatistics:
        """A point-in-time copy of the counters (see :class:`PaneTableStatistics`)."""
        return msgspec.structs.replace(self._stats, panes=len(self._rows))


def _pane_order(pane: str) -> int:
    return int(pane[1:]) if pane[1:].isdigit() else -1
