"""``paneward install-hooks claude-code``: the ``settings.json`` edit (pure, text in, text out).

One ``hooks`` entry per event in :data:`.hooks.INSTALLED_EVENTS`, as a command hook
``paneward hook --harness claude-code --owner env:CLAUDE_PID``: Claude Code runs hooks under
``/bin/sh``, so the hook's parent is not the owner; ``$CLAUDE_PID`` is. With ``--http`` every
event except :data:`.hooks.HTTP_REFUSED_EVENTS` becomes an ``http`` hook to the loopback
listener carrying the token header. :mod:`actors.cli.install` reads and writes the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from actors.core.install.config_edit import (
    COMMAND_TIMEOUT_S,
    TOKEN_HEADER_NAME,
    Edit,
    HookTarget,
    Installer,
    InstallError,
    has_ours,
    json_same,
    merge_grouped,
    remove_grouped,
    transform_json,
)
from actors.harnesses.claude_code import paths
from actors.harnesses.claude_code.hooks import HTTP_REFUSED_EVENTS, INSTALLED_EVENTS

__all__ = ["INSTALLER", "OWNER", "edits", "entries", "install_settings", "uninstall_settings"]

#: The hook client's owner rule for Claude Code (``paneward hook --owner``).
OWNER: Final = "env:CLAUDE_PID"


def entries(
    target: HookTarget, events: Sequence[str], http: bool
) -> dict[str, dict[str, Any]]:
    """The hook entry paneward wants for each event (raises :class:`InstallError` when
    ``http`` is asked without a URL and token)."""
    wanted: dict[str, dict[str, Any]] = {}
    for event in events:
        if http and event not in HTTP_REFUSED_EVENTS:
            if target.http_url is None or target.token is None:
                raise InstallError("--http needs a URL and a token")
            wanted[event] = {
                "type": "http",
                "url": target.http_url,
                "headers": {TOKEN_HEADER_NAME: target.token},
                "timeout": COMMAND_TIMEOUT_S,
            }
        else:
            wanted[event] = {
                "type": "command",
                "command": target.command("claude-code", OWNER),
                "timeout": COMMAND_TIMEOUT_S,
            }
    return wanted


def install_settings(
    text: str | None,
    target: HookTarget,
    *,
    http: bool = False,
    events: Sequence[str] = INSTALLED_EVENTS,
    label: str = "settings.json",
) -> str | None:
    """The new settings.json text with paneward's hooks merged in, or ``None`` if unchanged."""
    wanted = entries(target, events, http)
    return transform_json(text, label, lambda d: merge_grouped(d, wanted, label))


def uninstall_settings(text: str | None, label: str = "settings.json") -> str | None:
    """The settings.json text without paneward's hooks, or ``None`` if there were none."""
    if text is None:
        return None
    return transform_json(text, label, remove_grouped)


def edits(
    config_dir: Path, target: HookTarget, *, http: bool, events: Sequence[str] | None
) -> list[Edit]:
    """The one file install-hooks edits: ``<config_dir>/settings.json``."""
    path = config_dir / "settings.json"
    label = path.name
    chosen = tuple(events or INSTALLED_EVENTS)
    return [
        Edit(
            path=path,
            install=lambda t: (
                install_settings(t, target, http=http, events=chosen, label=label),
                None,
            ),
            uninstall=lambda t: (uninstall_settings(t, label), None),
            same=json_same(label),
            has_ours=has_ours,
            private=http,  # it will hold the http token
        )
    ]


INSTALLER: Final = Installer(
    harness="claude-code",
    title="Claude Code",
    default_dir=paths.config_dir,
    default_dir_help="$CLAUDE_CONFIG_DIR or ~/.claude",
    edits=edits,
    http=True,
    http_notes=(
        "SessionStart stays a command hook: Claude Code does not send it over http, "
        "and the command hook is what reports the owner pid (CLAUDE_PID)",
    ),
)
