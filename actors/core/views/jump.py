"""Jumping to attention, pure: the tmux commands ``paneward next`` and ``paneward pick`` run.

Who uses what: :mod:`actors.cli.jump` builds the attention queue
(:func:`actors.core.views.attention.attention_queue`) from the daemon's status, asks tmux for its
clients and pane locations (:data:`CLIENTS_COMMAND`, :data:`LOCATIONS_COMMAND`), then runs
what :func:`jump_commands` or :func:`menu_command` return, in one ``tmux`` process. Nothing
here does I/O; none of these commands can start a tmux server.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    from messages.activity import Activity

# The menu's helpers (attention labels, redaction, tmux quoting) are imported by the menu
# functions themselves: `paneward next`, on a key binding, uses only the jump commands, and
# those imports would load msgspec and the reducer into it.

__all__ = [
    "CLIENTS_COMMAND",
    "LOCATIONS_COMMAND",
    "MENU_KEYS",
    "JumpClient",
    "choose_client",
    "jump_commands",
    "menu_command",
    "menu_label",
    "message_command",
    "parse_jump_clients",
    "parse_locations",
]

#: argv (after ``tmux [-L|-S]``) listing every client: control mode, name, last activity.
CLIENTS_COMMAND: Final = (
    "list-clients",
    "-F",
    "#{client_control_mode}|#{client_name}|#{client_activity}",
)
#: argv listing where every pane is, as ``%N|session:window.pane``.
LOCATIONS_COMMAND: Final = (
    "list-panes",
    "-a",
    "-F",
    "#{pane_id}|#{session_name}:#{window_index}.#{pane_index}",
)
#: The keys of the menu's items, in order (tmux menus take one key each).
MENU_KEYS: Final = "123456789abcdefghijklmnopqrstuvwxyz"


class JumpClient(NamedTuple):
    control: bool
    name: str
    activity: int


def parse_jump_clients(text: str) -> list[JumpClient]:
    """Parse the output of :data:`CLIENTS_COMMAND` (malformed rows are skipped)."""
    clients: list[JumpClient] = []
    for line in text.splitlines():
        control, _, rest = line.partition("|")
        name, _, activity = rest.rpartition("|")
        if control in ("0", "1") and name and activity.isdigit():
            clients.append(JumpClient(control == "1", name, int(activity)))
    return clients


def parse_locations(text: str) -> dict[str, str]:
    """Parse the output of :data:`LOCATIONS_COMMAND`: pane id -> ``session:window.pane``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        pane, sep, where = line.partition("|")
        if sep and pane.startswith("%"):
            out.setdefault(pane, where)
    return out


def choose_client(clients: Iterable[JumpClient]) -> str | None:
    """The client to move when none was named and we are not inside tmux: the attached
    client the user touched last (control-mode clients, such as paneward's own, never)."""
    users = [c for c in clients if not c.control]
    if not users:
        return None
    return max(users, key=lambda c: (c.activity, c.name)).name


def jump_commands(pane: str, client: str | None, *, current: bool = False) -> list[list[str]]:
    """The tmux commands that bring ``pane`` in front of ``client``.

    ``switch-client -t %N`` moves the client to the pane's session, window and pane at once.
    ``current``: no client named, but we run inside tmux, so tmux's current client is the
    user's. With neither, the pane is made its window's active pane and the window its
    session's current one, so the next ``attach`` lands there.
    """
    if client is not None:
        return [["switch-client", "-c", client, "-t", pane]]
    if current:
        return [["switch-client", "-t", pane]]
    return [["select-window", "-t", pane], ["select-pane", "-t", pane]]


def message_command(client: str, text: str) -> list[str]:
    """``display-message`` on ``client`` (the text is a format, expanded once: shown as
    written)."""
    from actors.core.tmux.protocol import format_literal

    return ["display-message", "-c", client, format_literal(text)]


def menu_label(
    activity: Activity, location: str | None, now_ms: int, *, full_text: bool = False
) -> str:
    """One menu line: ``needs you 2m  claude-code  main:1.0 (%3)  permission: Bash`` (the
    reason redacted unless ``full_text``: a menu is on a screen others may see); a fleet host's
    session is where it is, ``gpu1 %3`` (``location`` is never looked up for it: the local
    panes' locations are not its host's)."""
    from actors.core.text import printable
    from actors.core.tmux.protocol import format_literal
    from actors.core.views.attention import attention_label
    from actors.core.views.redact import shown_reason

    attention = activity.attention
    reason = shown_reason(attention.reason, full_text=full_text) if attention else ""
    if activity.key.host is not None:
        where = printable(f"{activity.key.host} {activity.pane or '-'}")
    else:
        where = f"{location} ({activity.pane})" if location else (activity.pane or "-")
    parts = (attention_label(activity, now_ms), activity.key.harness, where, reason)
    # A leading '-' would make tmux draw the item disabled; the label is a format, expanded
    # once when the menu is built.
    return format_literal("  ".join(p for p in parts if p).lstrip("-"))


def menu_command(
    client: str,
    queue: Sequence[Activity],
    locations: Mapping[str, str],
    jump_argv: Sequence[str],
    now_ms: int,
    *,
    full_text: bool = False,
) -> list[str]:
    """``display-menu`` on ``client`` listing ``queue`` (items with a pane) in order; choosing
    an item runs ``jump_argv --pane %N`` (``paneward next ...``; a fleet host's item ``jump_argv
    --host HOST --pane %N``) through ``run-shell``, which jumps (to a remote pane through a
    local window attached to it) and acknowledges a ``turn_done`` exactly as ``paneward next``
    does.

    An item's command is a command string expanded as a format twice (when tmux builds the
    menu, and by ``run-shell``), so the shell text, which names paths (this paneward, its
    socket), is made literal for two expansions and quoted exactly. The argv goes through
    :func:`actors.core.tmux.protocol.commands_argv` (a label may end in ``;``).
    """
    from actors.core.tmux.protocol import format_literal, quote_exact

    argv = ["display-menu", "-c", client, "-T", "#[align=centre] paneward: attention ", "-x", "C",
            "-y", "C"]
    items = [a for a in queue if a.pane is not None]
    for key, activity in zip(MENU_KEYS, items, strict=False):
        assert activity.pane is not None
        host = activity.key.host
        which = ["--pane", activity.pane] if host is None else ["--host", host, "--pane",
                                                                 activity.pane]
        shell = format_literal(shlex.join([*jump_argv, *which]), 2)
        location = locations.get(activity.pane) if host is None else None
        argv += [
            menu_label(activity, location, now_ms, full_text=full_text),
            key,
            f"run-shell -b {quote_exact(shell)}",
        ]
    return argv
