"""``paneward install-hooks gemini``: the ``~/.gemini/settings.json`` edit (pure, text in/out).

One command hook per event in :data:`.hooks.INSTALLED_EVENTS` (``hooks.<Event>: [{hooks: [{name,
type: command, command, timeout}]}]``; no ``matcher`` matches everything), running ``paneward
hook --harness gemini --owner parent``: Gemini runs the hook itself, so the hook's parent is its
node process (the owner). ``hooksConfig.enabled`` must be true for Gemini to run any hook: it
is set when missing (and removed again by ``--uninstall`` when nothing else is left in it).
Gemini's hooks are synchronous -- it waits for each one before it goes on -- which is why only
these events are installed and why the hook client's start-up is measured (bench/bench_hook.py).
:mod:`actors.cli.install` reads and writes the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from actors.core.install.config_edit import (
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
from actors.harnesses.gemini import paths
from actors.harnesses.gemini.hooks import INSTALLED_EVENTS

__all__ = ["INSTALLER", "OWNER", "TIMEOUT_MS", "edits", "install_settings", "uninstall_settings"]

#: The hook client's owner rule for Gemini CLI (``paneward hook --owner``): Gemini runs the hook.
OWNER: Final = "parent"
#: Gemini's ``timeout`` is in milliseconds; the hook client gives up on its own within 2.5 s.
TIMEOUT_MS: Final = 5000


def _enable(data: dict[str, Any], label: str) -> None:
    config = data.setdefault("hooksConfig", {})
    if not isinstance(config, dict):
        raise InstallError(
            f"{label}: \"hooksConfig\" is a {type(config).__name__}, expected an object"
        )
    config["enabled"] = True


def install_settings(
    text: str | None,
    target: HookTarget,
    *,
    events: Sequence[str] = INSTALLED_EVENTS,
    label: str = "settings.json",
) -> str | None:
    """The new settings.json text with paneward's hooks merged in, or ``None`` if unchanged."""
    entry = {
        "name": "paneward",
        "type": "command",
        "command": target.command("gemini", OWNER),
        "timeout": TIMEOUT_MS,
    }
    wanted = {event: dict(entry) for event in events}

    def change(data: dict[str, Any]) -> None:
        merge_grouped(data, wanted, label)
        _enable(data, label)

    return transform_json(text, label, change)


def uninstall_settings(text: str | None, label: str = "settings.json") -> str | None:
    """The settings.json text without paneward's hooks, or ``None`` if there were none."""
    if text is None:
        return None

    def change(data: dict[str, Any]) -> None:
        before = data.get("hooks")
        remove_grouped(data)
        if before is not None and "hooks" not in data and data.get("hooksConfig") == {
            "enabled": True
        }:
            del data["hooksConfig"]  # only our hooks needed it

    return transform_json(text, label, change)


def edits(
    config_dir: Path, target: HookTarget, *, http: bool, events: Sequence[str] | None
) -> list[Edit]:
    """The one file install-hooks edits: ``<config_dir>/settings.json`` (``http`` is ignored)."""
    path = config_dir / "settings.json"
    label = path.name
    chosen = tuple(events or INSTALLED_EVENTS)
    return [
        Edit(
            path=path,
            install=lambda t: (install_settings(t, target, events=chosen, label=label), None),
            uninstall=lambda t: (uninstall_settings(t, label), None),
            same=json_same(label),
            has_ours=has_ours,
        )
    ]


INSTALLER: Final = Installer(
    harness="gemini",
    title="Gemini CLI",
    default_dir=paths.gemini_dir,
    default_dir_help="$GEMINI_CLI_HOME/.gemini or ~/.gemini",
    edits=edits,
    notes=(
        "Gemini CLI runs user hooks from settings.json without asking; each one runs before "
        "Gemini goes on, so only the events paneward needs are installed "
        f"({', '.join(INSTALLED_EVENTS)})",
    ),
)
