"""Whether the tmux bridge still works, and what tmux shows when it does not (pure).

Who uses what: :class:`actors.sinks.tmux.TmuxBridge` feeds every connection try's outcome to
one :class:`BridgeHealth` and asks it whether the bridge is *stalled*; while it is, it writes
:func:`stalled_commands` with a one-shot ``tmux`` process (the control client being what does
not work) and says ``stalled`` in its statistics, so ``paneward status`` shows
``tmux STALLED: <reason>`` (:func:`actors.core.views.status_table.actor_line`); stopping while
stalled, it writes :func:`stopped_commands`.
:class:`actors.sinks.tmux_client.ControlClient` raises the two errors that tell the outcomes
apart (:class:`TmuxNoAnswer`, :class:`TmuxClosedAtOnce`).

A bridge is stalled -- its badges may be stale truth -- when:

- **tmux does not answer.** While badges are shown the bridge sends :data:`PROBE_COMMAND` every
  :data:`PROBE_EVERY_S`; no reply within :data:`STALL_AFTER_S` (or none to any other batch
  within the client's reply timeout) ends the client and stalls the bridge (a stopped or
  hung server, a control client that swallows commands). Reconnect tries that tmux leaves
  unanswered keep it stalled.
- **tmux closes every control client at once.** :data:`CLOSES_IN_A_ROW` tries in a row whose
  connection the server took and then closed before it worked for
  :data:`~actors.core.backoff.HEALTHY_AFTER_S` (a server stuck in its exit answers every
  client ``server exited unexpectedly``; a wedged control mode lets a client attach and ends
  it).

It stops being stalled when a connection has rewritten every badge (:meth:`BridgeHealth.ready`:
the truth is back), when the server is gone (nothing of ours is shown there any more: the
bridge is ``waiting``/``disconnected``), or when another daemon drives it (``refused``).

Nothing here does I/O.
"""

from __future__ import annotations

from typing import Final

from actors.core.backoff import HEALTHY_AFTER_S
from actors.core.tmux.badges import (
    AGE_OPTION,
    ATTENTION_OPTION,
    BADGE_OPTION,
    BADGES,
    REASON_OPTION,
    SUMMARY_OPTION,
    TURN_OPTION,
    WINDOW_OPTION,
)
from actors.core.tmux.hold import DAEMON_OPTION, DOWN_SUMMARY, operand_literal
from actors.core.tmux.protocol import TmuxConnectionLost, TmuxUnavailable, quote

__all__ = [
    "CLOSES_IN_A_ROW",
    "PROBE_COMMAND",
    "PROBE_EVERY_S",
    "SERVER_CLOSED",
    "STALLED_SUMMARY",
    "STALL_AFTER_S",
    "BridgeHealth",
    "TmuxClosedAtOnce",
    "TmuxNoAnswer",
    "closed_at_once",
    "stalled_commands",
    "stopped_commands",
]

#: The round trip that proves the control client works (one reply line, no side effect).
PROBE_COMMAND: Final = "display-message -p ok"
#: Seconds between probes while the bridge shows at least one badge (none while it shows none).
PROBE_EVERY_S: Final = 5.0
#: A probe not answered within this many seconds: the bridge is stalled.
STALL_AFTER_S: Final = 2.0
#: Connections in a row that tmux closed at once: the bridge is stalled.
CLOSES_IN_A_ROW: Final = 3
#: What ``@paneward_summary`` says while the bridge is stalled.
STALLED_SUMMARY: Final = "paneward: tmux bridge stalled"
#: What a tmux client says when the server takes its connection and closes it at once.
SERVER_CLOSED: Final = "server exited unexpectedly"

# What a badged pane shows while the bridge is stalled: no turn, no attention is proven.
_UNKNOWN_PANE: Final = (
    (BADGE_OPTION, BADGES["unknown"]),
    (TURN_OPTION, "unknown"),
    (ATTENTION_OPTION, ""),
    (REASON_OPTION, ""),
    (AGE_OPTION, ""),
)


class TmuxNoAnswer(TmuxConnectionLost):
    """tmux did not answer in time (a probe, a batch, or a connection try); the client, if
    one was attached, is closed."""


class TmuxClosedAtOnce(TmuxUnavailable):
    """The server took the connection and closed it before the control client attached."""


def closed_at_once(stderr: str) -> bool:
    """Whether a failed ``tmux`` command's stderr says the server closed its connection at
    once (the server is there, unlike ``no server running``)."""
    return SERVER_CLOSED in stderr


class BridgeHealth:
    """The stall decision of one bridge over its connection tries.

    The bridge calls, per try: :meth:`connected` when a control client attached, then
    :meth:`ended` when that connection ended; or, for a try that did not connect,
    :meth:`no_answer`, :meth:`closed` (the server closed it at once) or :meth:`gone` (no
    server); :meth:`refused` when another daemon drives the server; :meth:`ready` once a
    connection rewrote every badge. :attr:`stalled` is the reason the bridge is stalled
    (``None``: it is not); :attr:`stalls` counts the times it became stalled. Times are
    monotonic seconds, passed in by the caller.
    """

    __slots__ = ("_closes", "_connected_at", "closes_in_a_row", "healthy_after", "stalled",
                 "stalls")

    def __init__(
        self, *, closes_in_a_row: int = CLOSES_IN_A_ROW, healthy_after: float = HEALTHY_AFTER_S
    ) -> None:
        self.closes_in_a_row = closes_in_a_row
        self.healthy_after = healthy_after
        self.stalled: str | None = None
        self.stalls = 0
        self._closes = 0
        self._connected_at: float | None = None

    def _stall(self, reason: str) -> None:
        if self.stalled is None:
            self.stalls += 1
        self.stalled = reason

    def no_answer(self, reason: str) -> None:
        """tmux left a probe, a batch or a try unanswered (``reason``: which): stalled."""
        self._connected_at = None
        self._stall(reason)

    def closed(self, reason: str) -> None:
        """The server closed a connection at once (``reason``: what the client said)."""
        self._connected_at = None
        self._closes += 1
        if self._closes >= self.closes_in_a_row:
            self._stall(
                f"tmux closes every control client at once ({self._closes} in a row): {reason}"
            )

    def connected(self, now: float) -> None:
        """A control client attached at ``now``."""
        self._connected_at = now

    def ended(self, now: float, reason: str) -> None:
        """The connection made at :meth:`connected` ended (not by us, not unanswered): one
        more close at once if it had not worked for :attr:`healthy_after` seconds."""
        began, self._connected_at = self._connected_at, None
        if began is not None and now - began >= self.healthy_after:
            self._closes = 0
        else:
            self.closed(reason)

    def gone(self) -> None:
        """No server to connect to: nothing of ours is shown there, nothing is stalled."""
        self._connected_at = None
        self._closes = 0
        self.stalled = None

    def refused(self) -> None:
        """Another live daemon drives the server: its badges are its own, not stalled ones."""
        self.gone()

    def ready(self) -> bool:
        """A connection rewrote every badge (the truth is back); whether it was stalled."""
        was, self.stalled = self.stalled is not None, None
        return was


def _pane_loop_body() -> str:
    """``run-shell -C``'s format: for every pane carrying a badge, the commands that make it
    show :data:`_UNKNOWN_PANE`, and for every window carrying a marker, ``? unknown``; literal
    text around the live ``#{pane_id}`` / ``#{window_id}``."""
    pane = "".join(
        operand_literal("set-option -p -t ") + "#{pane_id}" + operand_literal(
            f" {name} {quote(value)} ; "
        )
        for name, value in _UNKNOWN_PANE
    )
    window = (
        operand_literal("set-option -w -t ")
        + "#{window_id}"
        + operand_literal(f" {WINDOW_OPTION} {quote(BADGES['unknown'])} ; ")
    )
    return (
        f"#{{S:#{{W:#{{?{WINDOW_OPTION},{window},}}"
        f"#{{P:#{{?{BADGE_OPTION},{pane},}}}}}}}}"
    )


def _if_ours(mine: str, commands: list[str]) -> list[str]:
    """``commands`` as one ``if-shell -F`` command (argv words) that runs them only while the
    server's hold is unset or ``mine``."""
    held = f"#{{{DAEMON_OPTION}}}"
    condition = f"#{{||:#{{==:{held},}},#{{==:{held},{operand_literal(mine)}}}}}"
    return ["if-shell", "-F", condition, " ; ".join(commands)]


def stalled_commands(mine: str) -> list[str]:
    """The one ``if-shell -F`` command (as argv words, for a one-shot ``tmux`` process) that
    shows a stalled bridge: every pane carrying a badge shows ``? unknown`` (turn ``unknown``,
    no attention, reason or age; presence and harness as they were), every window marker
    ``? unknown``, ``@paneward_summary`` :data:`STALLED_SUMMARY`.

    Only while the server's hold (:data:`~actors.core.tmux.hold.DAEMON_OPTION`) is unset or
    ``mine``: the badges of another live daemon are never touched. A write sent while tmux
    was stopped runs when it resumes, ahead of the reconnection whose full rewrite replaces it.
    """
    return _if_ours(
        mine,
        [
            f"run-shell -C {quote(_pane_loop_body())}",
            f"set-option -g {SUMMARY_OPTION} {quote(STALLED_SUMMARY)}",
        ],
    )


def stopped_commands(mine: str) -> list[str]:
    """The command (argv words) a bridge that stops while stalled leaves behind: the summary
    :data:`~actors.core.tmux.hold.DOWN_SUMMARY`, as tmux's own hook says it when the daemon
    goes (that hook belongs to a client that is already gone then); the badges keep
    ``? unknown``. Only while the hold is unset or ``mine``."""
    return _if_ours(mine, [f"set-option -g {SUMMARY_OPTION} {quote(DOWN_SUMMARY)}"])
