"""Which daemon drives a tmux server, and what tmux itself does when that daemon goes (pure).

Who uses what: :class:`actors.sinks.tmux.TmuxBridge`, right after its control client attached
and before it writes anything:

1. **One daemon per server.** It takes hold of the server option :data:`DAEMON_OPTION` (``<pid>
   <start token>`` of the daemon's process) with :func:`hold_commands`, a compare-and-swap that
   tmux runs as one command (``set-option -F``: no other client's command runs in between), and
   reads back who holds it (:func:`parse_holder`). The hold is taken when the option is unset
   or names a process that is gone (its pid dead, or reused: the start token differs, which the
   bridge checks); when it names another live process the bridge writes nothing to that server
   and says why (:func:`refusal`), naming the holder's pid and state directory
   (:data:`DAEMON_STATE_OPTION`).
2. **A dead daemon is visible.** It installs a ``client-detached`` hook (:func:`down_hook_commands`)
   that fires when *its* control client goes -- a ``kill -9`` of the daemon closes the client's
   stdin, so tmux sees the client leave at once -- and then, inside tmux: sets the status-line
   summary to :data:`DOWN_SUMMARY`, marks every badge stale (:data:`STALE_SUFFIX` appended to
   each pane's ``@paneward_badge`` and each window's ``@paneward_window``, once: the bridge
   names them, :func:`down_hook_command` again whenever they change), releases the hold and
   removes itself. The daemon's graceful shutdown ends the same way (it only closes
   the client), so a restart never blanks the badges: the next daemon's first write replaces
   each stale one with what it re-proved.

Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, NamedTuple

from actors.core.tmux.badges import BADGE_OPTION, SUMMARY_OPTION, WINDOW_OPTION
from actors.core.tmux.protocol import TmuxError, quote

__all__ = [
    "CLIENT_NAME_COMMAND",
    "DAEMON_OPTION",
    "DAEMON_STATE_OPTION",
    "DOWN_HOOK",
    "DOWN_SUMMARY",
    "STALE_SUFFIX",
    "Holder",
    "TmuxRefused",
    "hold_commands",
    "down_hook_command",
    "down_hook_commands",
    "operand_literal",
    "parse_holder",
    "refusal",
]

#: Server option: ``<pid> <start token>`` of the daemon that drives this server's badges.
DAEMON_OPTION: Final = "@paneward_daemon"
#: Server option: that daemon's state directory (for the refusal's text only).
DAEMON_STATE_OPTION: Final = "@paneward_daemon_state"
#: What ``@paneward_summary`` says once the daemon is gone.
DOWN_SUMMARY: Final = "paneward: down"
#: Appended to each pane's ``@paneward_badge`` once the daemon is gone: ``✔ done (stale)``.
STALE_SUFFIX: Final = " (stale)"
#: The hook slot paneward uses (an array index of its own, so the user's hooks stay as they are).
DOWN_HOOK: Final = "client-detached[7501]"
#: The name of the client that runs it: over the control connection, paneward's own client.
CLIENT_NAME_COMMAND: Final = f"display-message -p {quote('#{client_name}')}"



class TmuxRefused(TmuxError):
    """Another live daemon drives the server (:func:`refusal` says which); nothing was written."""


class Holder(NamedTuple):
    """Who holds :data:`DAEMON_OPTION`: a process incarnation."""

    pid: int
    token: str

    def value(self) -> str:
        return f"{self.pid} {self.token}"


def operand_literal(text: str) -> str:
    """``text`` as literal text inside a tmux format (``#``, ``,`` and ``}`` escaped), so that
    expanding the format yields ``text`` unchanged."""
    return text.replace("#", "##").replace(",", "#,").replace("}", "#}")


def parse_holder(text: str) -> Holder | None:
    """:data:`DAEMON_OPTION`'s value (``None``: unset or not ours to read -- taken over)."""
    pid, _, token = text.strip().partition(" ")
    if not pid.isdigit() or not 0 < int(pid) <= 2**31 - 1 or not token or " " in token:
        return None
    return Holder(int(pid), token)


def hold_commands(mine: Holder, expected: str) -> list[str]:
    """Set :data:`DAEMON_OPTION` to ``mine`` if it still reads ``expected`` (``""``: unset),
    then read back who holds it (the second reply's first line) and that holder's state
    directory (the third's)."""
    # One command, so nothing runs between the comparison and the write; and no `if-shell`,
    # whose branch would answer with a reply block of its own.
    held = f"#{{{DAEMON_OPTION}}}"
    condition = f"#{{==:{held},{operand_literal(expected)}}}"
    value = f"#{{?{condition},{operand_literal(mine.value())},{held}}}"
    return [
        f"set-option -s -F {DAEMON_OPTION} {quote(value)}",
        f"show-options -sqv {DAEMON_OPTION}",
        f"show-options -sqv {DAEMON_STATE_OPTION}",
    ]


def refusal(where: str, holder: Holder, state_dir: str) -> str:
    """Why a second daemon leaves the server alone."""
    dir_text = f", state dir {state_dir}" if state_dir else ""
    return (
        f"{where} is driven by another paneward daemon (pid {holder.pid}{dir_text}); "
        "leaving it alone"
    )


def _stale_command(target: str, option: str) -> str:
    """The hook's command that marks ``option`` of the pane (``%3``) or window (``@2``)
    ``target`` stale. Its new value is a format (expanded by ``set-option -F`` when it runs)
    that appends :data:`STALE_SUFFIX` only to a value that lacks it; it runs only while that
    pane or window exists and holds the option (a guard format over every pane or window of
    every session, expanded by ``if-shell -F``): a command that fails inside a hook ends the
    commands of its list and puts the error on a user's status line."""
    scope, id_format = ("-p", "#{pane_id}") if target.startswith("%") else ("-w", "#{window_id}")
    value = f"#{{{option}}}"
    stale = f"#{{?#{{m:*{STALE_SUFFIX},{value}}},{value},{value}{STALE_SUFFIX}}}"
    here = f"#{{?#{{==:{id_format},{operand_literal(target)}}},#{{?{option},1,}},}}"
    guard = f"#{{S:#{{W:#{{P:{here}}}}}}}" if scope == "-p" else f"#{{S:#{{W:{here}}}}}"
    write = f"set-option {scope} -F -t {quote(target)} {option} {quote(stale)}"
    return f"if-shell -F {quote(guard)} {quote(write)}"


def down_hook_command(
    client: str,
    *,
    badges: bool,
    panes: Iterable[str] = (),
    windows: Iterable[str] = (),
) -> str:
    """Install :data:`DOWN_HOOK` for the control client named ``client`` (it replaces the hook
    of an earlier connection, daemon or pane set).

    When the client goes, tmux runs (only for that client): the summary becomes
    :data:`DOWN_SUMMARY` and each badge of ``panes`` and marker of ``windows`` gets
    :data:`STALE_SUFFIX` (with ``badges``), the hold is released, the hook removes itself.
    The bridge installs it again whenever the panes and windows it wrote change, before it
    writes a new one, so every option it set is covered.

    Every command is one tmux runs at once (``set-option``, ``set-hook``, ``if-shell -F``):
    tmux 3.3a gives a hook's commands the most recently created attached client, and a command
    that waits (``run-shell``) lets tmux lose that client meanwhile -- the daemon's output
    client, killed with it -- and then crash running the rest (docs/tmux.md, "A killed
    daemon's control clients").
    """
    actions: list[str] = []
    if badges:
        actions.append(f"set-option -g {SUMMARY_OPTION} {quote(DOWN_SUMMARY)}")
        actions += [_stale_command(pane, BADGE_OPTION) for pane in panes]
        actions += [_stale_command(window, WINDOW_OPTION) for window in windows]
    actions.append(f"set-option -su {DAEMON_OPTION}")
    actions.append(f"set-option -su {DAEMON_STATE_OPTION}")
    actions.append(f"set-hook -gu {quote(DOWN_HOOK)}")
    condition = f"#{{==:#{{hook_client}},{operand_literal(client)}}}"
    body = f"if-shell -F {quote(condition)} {quote(' ; '.join(actions))}"
    return f"set-hook -g {quote(DOWN_HOOK)} {quote(body)}"


def down_hook_commands(
    client: str,
    state_dir: str,
    *,
    badges: bool,
    panes: Iterable[str] = (),
    windows: Iterable[str] = (),
) -> list[str]:
    """Record ``state_dir`` with the hold, then :func:`down_hook_command`."""
    return [
        f"set-option -s {DAEMON_STATE_OPTION} {quote(state_dir)}",
        down_hook_command(client, badges=badges, panes=panes, windows=windows),
    ]


