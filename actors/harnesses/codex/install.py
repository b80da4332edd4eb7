"""``paneward install-hooks codex``: the ``config.toml`` ``notify`` and ``hooks.json`` edits (pure).

- ``$CODEX_HOME/config.toml`` top-level ``notify`` runs ``paneward hook --harness codex --owner
  parent`` (Codex runs it itself, so the hook's parent is the owner). ``notify`` holds ONE
  command: when the user already has one, paneward CHAINS it -- the user's lines are kept
  verbatim as ``# paneward-original: `` comments and paneward's ``notify`` gets ``--forward-json
  '<your argv>'``, so the hook client sends its frame and then ``exec``s the user's command with
  the same payload. :func:`uninstall_config` puts the original lines back byte for byte.
- ``$CODEX_HOME/hooks.json``: one command hook per event in :data:`.hooks.INSTALLED_EVENTS`.

:mod:`actors.cli.install` reads and writes the files; everything here is text in, text out.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from actors.core.config_edit import (
    COMMAND_TIMEOUT_S,
    Edit,
    HookTarget,
    Installer,
    InstallError,
    has_ours,
    is_paneward_command,
    json_same,
    merge_grouped,
    parse_toml,
    remove_grouped,
    toml_array,
    top_level_insert_at,
    top_level_span,
    transform_json,
)
from actors.harnesses.codex import paths
from actors.harnesses.codex.hooks import INSTALLED_EVENTS

__all__ = [
    "INSTALLER",
    "NOTIFY_MARKER",
    "ORIGINAL_PREFIX",
    "OWNER",
    "edits",
    "install_config",
    "install_hooks_json",
    "uninstall_config",
    "uninstall_hooks_json",
]

#: The hook client's owner rule for Codex (``paneward hook --owner``): Codex runs the hook.
OWNER: Final = "parent"
NOTIFY_MARKER: Final = (
    "# added by paneward install-hooks; `paneward install-hooks codex --uninstall` removes it"
)
ORIGINAL_PREFIX: Final = "# paneward-original: "
_FORWARD: Final = "--forward-json"  # the hook client's chaining option


# ---------------------------------------------------------------------------------------------
# config.toml notify


def install_config(
    text: str | None, target: HookTarget, label: str = "config.toml"
) -> tuple[str | None, str]:
    """The new config.toml text (``None`` if unchanged) and what was found and done.

    Raises :class:`InstallError` when the file is not TOML, or ``notify`` is not a list of
    strings or cannot be located at the top level.
    """
    source = text or ""
    data = parse_toml(source, label)
    lines = source.splitlines(keepends=True)
    ours_argv = target.argv("codex", OWNER)
    current = data.get("notify")
    span = top_level_span(lines, "notify", label)
    if current is not None and span is None:
        raise InstallError(
            f"{label}: `notify` is set in a form paneward cannot edit safely; "
            f"set it by hand to {toml_array(ours_argv)}"
        )
    if current is not None and (
        not isinstance(current, list) or not all(isinstance(p, str) for p in current) or not current
    ):
        raise InstallError(
            f"{label}: `notify` is {current!r}, not a list of strings; nothing was changed"
        )
    if current is not None and span is not None and is_paneward_command(" ".join(current)):
        # Already ours -- perhaps from an older release (no --owner) or with a moved executable:
        # rewrite our part, keep the chained user command (--forward-json ...) as it is.
        tail = current[current.index(_FORWARD) :] if _FORWARD in current else []
        wanted = [*ours_argv, *tail]
        if current == wanted and lines[span[0]].rstrip("\n").endswith(NOTIFY_MARKER):
            return None, "notify already runs paneward; nothing to do"
        new_line = f"notify = {toml_array(wanted)}  {NOTIFY_MARKER}\n"
        result = "".join([*lines[: span[0]], new_line, *lines[span[1] :]])
        _verify_notify(result, data, wanted, label)
        return result, f"updated paneward's notify to {wanted[0]}"
    if current is None:
        new_line = f"notify = {toml_array(ours_argv)}  {NOTIFY_MARKER}\n"
        at = top_level_insert_at(lines)
        result = "".join([*lines[:at], new_line, *lines[at:]])
        _verify_notify(result, data, ours_argv, label)
        return result, "no notify was set; added paneward's"
    assert span is not None
    chained = [*ours_argv, _FORWARD, json.dumps(current, ensure_ascii=False)]
    kept = [ORIGINAL_PREFIX + line for line in lines[span[0] : span[1]]]
    if not kept[-1].endswith("\n"):
        kept[-1] += "\n"
    new_line = f"notify = {toml_array(chained)}  {NOTIFY_MARKER}\n"
    result = "".join([*lines[: span[0]], *kept, new_line, *lines[span[1] :]])
    _verify_notify(result, data, chained, label)
    return result, (
        f"found your notify = {json.dumps(current)}; kept it (commented with "
        f"'{ORIGINAL_PREFIX.strip()}') and chained it: paneward sends its frame, then runs your "
        "command with the same payload. `--uninstall` restores your line exactly"
    )


def _verify_notify(result: str, before: dict[str, Any], notify: list[str], label: str) -> None:
    after = parse_toml(result, label)
    expected = dict(before)
    expected["notify"] = notify
    if after != expected:  # pragma: no cover - a bug guard: never write a changed meaning
        raise InstallError(f"{label}: internal error: the edit would change other settings")


def uninstall_config(text: str | None, label: str = "config.toml") -> tuple[str | None, str]:
    """The config.toml text without paneward's notify (the user's original lines restored),
    or ``None`` when there is nothing to remove; and what was done.

    Raises :class:`InstallError` when ``notify`` runs paneward but lost paneward's marker
    (edited by hand: removing it could lose the user's change).
    """
    if text is None:
        return None, "does not exist; nothing to do"
    lines = text.splitlines(keepends=True)
    ours = [
        i
        for i, line in enumerate(lines)
        if line.lstrip().startswith("notify") and line.rstrip("\n").endswith(NOTIFY_MARKER)
    ]
    originals = [i for i, line in enumerate(lines) if line.startswith(ORIGINAL_PREFIX)]
    if not ours and not originals:
        data = parse_toml(text, label)
        if is_paneward_command(" ".join(map(str, data.get("notify") or []))):
            raise InstallError(
                f"{label}: notify runs paneward but was edited by hand; remove it by hand"
            )
        return None, "no paneward notify; nothing to do"
    new_lines: list[str] = []
    restored_forward: list[str] | None = None
    for i, line in enumerate(lines):
        if i in ours:
            restored_forward = _forwarded(line) or restored_forward
            continue
        if i in originals:
            new_lines.append(line[len(ORIGINAL_PREFIX) :])
            continue
        new_lines.append(line)
    if not originals and restored_forward is not None:
        # The commented original was deleted by hand: rebuild it from the chain argument.
        new_lines.insert(ours[0], f"notify = {toml_array(restored_forward)}\n")
    result = "".join(new_lines)
    parse_toml(result, label)
    what = "restored your original notify" if originals or restored_forward else "removed it"
    return result, f"removed paneward's notify and {what}"


def _forwarded(line: str) -> list[str] | None:
    """The user's argv chained on one of our notify lines, if it carries one."""
    try:
        argv = tomllib.loads(line).get("notify")
    except tomllib.TOMLDecodeError:
        return None
    if isinstance(argv, list) and _FORWARD in argv:
        index = argv.index(_FORWARD)
        if index + 1 < len(argv):
            try:
                forwarded = json.loads(argv[index + 1])
            except (TypeError, ValueError):  # hand-edited: nothing to rebuild from
                return None
            if isinstance(forwarded, list):
                return [str(part) for part in forwarded]
    return None


def _config_same(after: str, original: str | None) -> bool:
    # Our notify edit is line surgery: an uninstall that undid it reproduces the user's text
    # exactly, so "the same" is byte equality (or an emptied file that did not exist).
    return (original or "") == after or (after.strip() == "" and original is None)


# ---------------------------------------------------------------------------------------------
# hooks.json


def install_hooks_json(
    text: str | None,
    target: HookTarget,
    *,
    events: Sequence[str] = INSTALLED_EVENTS,
    label: str = "hooks.json",
) -> str | None:
    """The new hooks.json text with paneward's command hooks merged in, or ``None``."""
    entry = {
        "type": "command",
        "command": target.command("codex", OWNER),
        "timeout": COMMAND_TIMEOUT_S,
    }
    wanted = {event: dict(entry) for event in events}
    return transform_json(text, label, lambda d: merge_grouped(d, wanted, label))


def uninstall_hooks_json(text: str | None, label: str = "hooks.json") -> str | None:
    """The hooks.json text without paneward's hooks, or ``None`` if there were none."""
    if text is None:
        return None
    return transform_json(text, label, remove_grouped)


def edits(
    config_dir: Path, target: HookTarget, *, http: bool, events: Sequence[str] | None
) -> list[Edit]:
    """``config.toml`` (notify) then ``hooks.json``; ``http`` is not supported (ignored)."""
    config = config_dir / "config.toml"
    config_label = str(config)
    hooks_json = config_dir / "hooks.json"
    hooks_label = hooks_json.name
    chosen = tuple(events or INSTALLED_EVENTS)
    return [
        Edit(
            path=config,
            install=lambda t: install_config(t, target, config_label),
            uninstall=lambda t: uninstall_config(t, config_label),
            same=_config_same,
            has_ours=lambda content: NOTIFY_MARKER in content,
        ),
        Edit(
            path=hooks_json,
            install=lambda t: (
                install_hooks_json(t, target, events=chosen, label=hooks_label),
                None,
            ),
            uninstall=lambda t: (uninstall_hooks_json(t, hooks_label), None),
            same=json_same(hooks_label),
            has_ours=has_ours,
        ),
    ]


INSTALLER: Final = Installer(
    harness="codex",
    title="Codex",
    default_dir=paths.home,
    default_dir_help="$CODEX_HOME or ~/.codex",
    edits=edits,
    notes=(
        "Codex runs hooks.json commands only once they are trusted (Codex asks; "
        "`--dangerously-bypass-hook-trust` skips it); notify needs no trust",
    ),
)
