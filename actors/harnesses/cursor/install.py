"""``paneward install-hooks cursor``: the ``~/.cursor/hooks.json`` edit (pure, text in, text out).

One command hook per event in :data:`.hooks.INSTALLED_EVENTS`, running ``paneward hook
--harness cursor --owner none``: Cursor's hooks name no owner process, so they claim none (they
prove turns, never presence). :mod:`actors.cli.install` reads and writes the file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from actors.core.install.config_edit import (
    Edit,
    HookTarget,
    Installer,
    has_ours,
    json_same,
    merge_flat,
    remove_flat,
    transform_json,
)
from actors.harnesses.cursor.hooks import INSTALLED_EVENTS

__all__ = [
    "INSTALLER",
    "OWNER",
    "default_dir",
    "edits",
    "install_hooks_json",
    "uninstall_hooks_json",
]

#: The hook client's owner rule for Cursor (``paneward hook --owner``): no owner.
OWNER: Final = "none"


def default_dir() -> Path:
    """Cursor's user directory, ``~/.cursor`` (it has no environment override)."""
    return Path.home() / ".cursor"


def install_hooks_json(
    text: str | None,
    target: HookTarget,
    *,
    events: Sequence[str] = INSTALLED_EVENTS,
    label: str = "hooks.json",
) -> str | None:
    """The new hooks.json text with paneward's hooks merged in, or ``None`` if unchanged."""
    wanted = {event: {"command": target.command("cursor", OWNER)} for event in events}
    return transform_json(text, label, lambda d: merge_flat(d, wanted, label))


def uninstall_hooks_json(text: str | None, label: str = "hooks.json") -> str | None:
    """The hooks.json text without paneward's hooks, or ``None`` if there were none."""
    if text is None:
        return None
    return transform_json(text, label, remove_flat)


def _same(label: str) -> Callable[[str, str | None], bool]:
    """:func:`json_same`, where no file at all is the same as ``{"version": 1}``: that is all
    that is left of a file paneward created once its hooks are removed (``version`` is what
    paneward puts in a new file), so ``--uninstall`` deletes it again."""
    same = json_same(label)

    def cursor_same(after: str, original: str | None) -> bool:
        if original is None and same(after, '{"version": 1}'):
            return True
        return same(after, original)

    return cursor_same


def edits(
    config_dir: Path, target: HookTarget, *, http: bool, events: Sequence[str] | None
) -> list[Edit]:
    """The one file install-hooks edits: ``<config_dir>/hooks.json`` (``http`` is ignored)."""
    path = config_dir / "hooks.json"
    label = path.name
    chosen = tuple(events or INSTALLED_EVENTS)
    return [
        Edit(
            path=path,
            install=lambda t: (install_hooks_json(t, target, events=chosen, label=label), None),
            uninstall=lambda t: (uninstall_hooks_json(t, label), None),
            same=_same(label),
            has_ours=has_ours,
        )
    ]


INSTALLER: Final = Installer(
    harness="cursor",
    title="Cursor",
    default_dir=default_dir,
    default_dir_help="~/.cursor",
    edits=edits,
)
