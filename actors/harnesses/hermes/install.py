"""``paneward install-hooks hermes``: shell hooks in ``$HERMES_HOME/config.yaml`` (pure).

Hermes reads ``hooks: {<event>: [{command, timeout}]}`` from its ``config.yaml``; it
``shlex``-splits each command (no shell) and runs it itself, with the payload on stdin, so the
hook's parent is the ``hermes`` process: the command is ``paneward hook --harness hermes --owner
parent``. One entry per event in :data:`.hooks.INSTALLED_EVENTS`.

The edit is line surgery (a YAML round trip would lose the user's comments and layout): with no
top-level ``hooks:`` a block is appended, marked as paneward's; with one (a block mapping),
paneward's item is appended to each event's list, or the event is added at the end of the
block. Every other line stays as it was, and the result is checked by parsing both texts with
PyYAML (the meaning may change only by paneward's entries). paneward's own items are located in
the parsed node tree (:func:`_our_items`), so they are found in whatever layout Hermes writes
back (``hermes config set`` dumps the whole file: comments gone, a long command folded over two
lines): a re-run rewrites a stale command in place, ``--uninstall`` removes exactly those items'
lines, the events and the ``hooks:`` block they leave empty; the backup restores the exact bytes.

Hermes asks once per (event, command) on its TTY ("Allow this hook to run? [y/N]") and keeps
the answers in ``shell-hooks-allowlist.json``; without a TTY it skips unapproved hooks unless
``--accept-hooks``, ``HERMES_ACCEPT_HOOKS=1`` or ``hooks_auto_accept: true`` is given. The notes
printed by install-hooks say so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from actors.core.install.config_edit import (
    COMMAND_TIMEOUT_S,
    Edit,
    HookTarget,
    Installer,
    InstallError,
    is_paneward_command,
    lines_same,
)
from actors.harnesses.hermes import paths
from actors.harnesses.hermes.hooks import INSTALLED_EVENTS

__all__ = ["HOOKS_MARKER", "INSTALLER", "OWNER", "edits", "install_config", "uninstall_config"]

#: The hook client's owner rule for Hermes (``paneward hook --owner``): Hermes runs the hook.
OWNER: Final = "parent"
HOOKS_MARKER: Final = (
    "# added by paneward install-hooks; `paneward install-hooks hermes --uninstall` removes it"
)
_KEY: Final = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][A-Za-z0-9_]*):[ \t]*(?P<rest>.*)$")
_NULL: Final = "tag:yaml.org,2002:null"
_ITEM: Final = re.compile(r"^(?P<indent> *)- ")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _load(text: str, label: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise InstallError(
            f"{label} is not valid YAML ({exc}); fix it by hand first, nothing was changed"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InstallError(f"{label} holds a YAML {type(data).__name__}, not a mapping")
    return data


def _item(indent: str, command: str) -> list[str]:
    # A JSON string is a YAML double-quoted scalar: the command may hold quotes and spaces.
    return [
        f"{indent}- command: {json.dumps(command)}\n",
        f"{indent}  timeout: {COMMAND_TIMEOUT_S}\n",
    ]


def _block_end(lines: list[str], start: int, parent_indent: int) -> int:
    """The index after the last content line of the block under ``lines[start - 1]``."""
    end = start
    for i in range(start, len(lines)):
        if _content(lines[i]):
            if _indent(lines[i]) <= parent_indent:
                break
            end = i + 1
    return end


def _find_key(lines: list[str], key: str, indent: int, start: int, stop: int) -> int | None:
    for i in range(start, stop):
        match = _KEY.match(lines[i].rstrip("\n"))
        if match and len(match["indent"]) == indent and match["key"] == key:
            return i
    return None


@dataclass(frozen=True, slots=True)
class _Ours:
    """One of paneward's hook items in config.yaml, located in the parsed node tree: the lines
    ``first``..``last`` (inclusive) it spans, and where its ``command`` key starts and its value
    ends (line, column), however the value is written (quoted, or a plain scalar Hermes's YAML
    dump folded over two lines)."""

    event: str
    first: int
    last: int
    command: str
    start: tuple[int, int]
    end: tuple[int, int]


def _last_line(node: yaml.Node) -> int:
    """The last line holding ``node``'s own text (a block collection's end mark is the next
    token, past comments and blank lines: its last child's is used instead)."""
    if isinstance(node, yaml.MappingNode) and node.value:
        return max(max(_last_line(k), _last_line(v)) for k, v in node.value)
    if isinstance(node, yaml.SequenceNode) and node.value:
        return max(_last_line(item) for item in node.value)
    mark = node.end_mark
    return int(mark.line) if mark.column > 0 else int(mark.line) - 1


def _our_items(text: str, label: str) -> list[_Ours]:
    """paneward's items under ``hooks:``, found by parsing (recognised by their command).

    Raises :class:`InstallError` for text that is not YAML, or one of paneward's items written
    in flow style (``[{command: …}]``): it shares its lines with others.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise InstallError(
            f"{label} is not valid YAML ({exc}); fix it by hand first, nothing was changed"
        ) from None
    if not isinstance(root, yaml.MappingNode):
        return []
    hooks = next((v for k, v in root.value if k.value == "hooks"), None)
    if not isinstance(hooks, yaml.MappingNode):
        return []
    lines = text.splitlines()
    found: list[_Ours] = []
    for key, items in hooks.value:
        if not isinstance(items, yaml.SequenceNode):
            continue
        for item in items.value:
            if not isinstance(item, yaml.MappingNode):
                continue
            command = next((p for p in item.value if p[0].value == "command"), None)
            if command is None or not isinstance(command[1], yaml.ScalarNode):
                continue
            if not is_paneward_command(command[1].value):
                continue
            first = item.start_mark.line
            if items.flow_style or lines[first][: item.start_mark.column].strip() != "-":
                raise InstallError(
                    f"{label}: hooks.{key.value} holds paneward's hook written inline; "
                    "remove it by hand"
                )
            k, v = command
            found.append(
                _Ours(
                    event=str(key.value),
                    first=first,
                    last=_last_line(item),
                    command=str(v.value),
                    start=(k.start_mark.line, k.start_mark.column),
                    end=(v.end_mark.line, v.end_mark.column),
                )
            )
    return found


def install_config(
    text: str | None,
    target: HookTarget,
    *,
    events: Sequence[str] = INSTALLED_EVENTS,
    label: str = "config.yaml",
) -> tuple[str | None, str | None]:
    """The new config.yaml text (``None`` if unchanged) and a note (``None``: the default).

    Raises :class:`InstallError` when the file is not YAML or ``hooks`` has a shape paneward
    cannot edit line by line (a flow mapping, a non-list event).
    """
    source = text or ""
    before = _load(source, label)
    command = target.command("hermes", OWNER)
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    # paneward's entry of an event already there (an older release's, a moved executable, or
    # the one Hermes wrote back in its own style): its command is rewritten in place, bottom up
    # so the positions above stay right.
    placed: dict[str, _Ours] = {}
    for found in _our_items(source, label):
        placed.setdefault(found.event, found)
    for found in sorted(placed.values(), key=lambda o: o.start, reverse=True):
        if found.command == command:
            continue
        (l0, c0), (l1, c1) = found.start, found.end
        tail = lines[l1][c1:] if c1 > 0 else "\n" + lines[l1]
        lines[l0 : l1 + 1] = [lines[l0][:c0] + f"command: {json.dumps(command)}" + tail]
    hooks_at = _find_key(lines, "hooks", 0, 0, len(lines))
    if hooks_at is None:
        block = [f"hooks:  {HOOKS_MARKER}\n"]
        for event in events:
            block += [f"  {event}:\n", *_item("    ", command)]
        if lines and lines[-1].strip():
            block.insert(0, "\n")
        lines += block
    else:
        rest = _KEY.match(lines[hooks_at].rstrip("\n"))
        assert rest is not None
        if _content(rest["rest"]):
            raise InstallError(
                f"{label}: `hooks:` is written inline ({rest['rest'].strip()}); make it a block "
                "mapping (one event per line) or add paneward's hooks by hand"
            )
        end = _block_end(lines, hooks_at + 1, 0)
        children = [i for i in range(hooks_at + 1, end) if _content(lines[i])]
        child = _indent(lines[children[0]]) if children else 2
        for event in events:
            if event in placed:
                continue
            end = _block_end(lines, hooks_at + 1, 0)
            at = _find_key(lines, event, child, hooks_at + 1, end)
            if at is None:
                lines[end:end] = [
                    f"{' ' * child}{event}:\n",
                    *_item(" " * (child + 2), command),
                ]
                continue
            match = _KEY.match(lines[at].rstrip("\n"))
            assert match is not None
            if _content(match["rest"]):
                raise InstallError(
                    f"{label}: hooks.{event} is written inline; make it a block list or add "
                    "paneward's hook by hand"
                )
            event_end = _block_end(lines, at + 1, child)
            items = [i for i in range(at + 1, event_end) if _ITEM.match(lines[i])]
            dash_indent = (
                _ITEM.match(lines[items[0]])["indent"]  # type: ignore[index]
                if items
                else " " * (child + 2)
            )
            lines[event_end:event_end] = _item(dash_indent, command)
    result = "".join(lines)
    if result == source:
        return None, "paneward's hooks are already installed; nothing to do"
    _verify(before, _load(result, label), events, command, label)
    return result, None


def _verify(
    before: dict[str, Any],
    after: dict[str, Any],
    events: Sequence[str],
    command: str,
    label: str,
) -> None:
    """The edit may change the meaning only by paneward's entries (a bug guard)."""
    expected = dict(before)
    hooks = dict(expected.get("hooks") or {})
    for event in events:
        mine = {"command": command, "timeout": COMMAND_TIMEOUT_S}
        current = [
            e
            for e in (hooks.get(event) or [])
            if not (isinstance(e, dict) and is_paneward_command(e.get("command")))
        ]
        kept_ours = [
            e
            for e in (hooks.get(event) or [])
            if isinstance(e, dict) and is_paneward_command(e.get("command"))
        ]
        if kept_ours:
            current = list(hooks.get(event) or [])
            index = current.index(kept_ours[0])
            current[index] = {**kept_ours[0], "command": command}
            hooks[event] = current
        else:
            hooks[event] = [*current, mine]
    expected["hooks"] = hooks
    if after != expected:
        raise InstallError(
            f"{label}: paneward cannot add its hooks here line by line without changing other "
            "settings; add them by hand (see `paneward install-hooks hermes --dry-run`)"
        )


def uninstall_config(text: str | None, label: str = "config.yaml") -> tuple[str | None, str]:
    """The config.yaml text without paneward's hooks, or ``None`` when there are none.

    paneward's items are found by parsing (:func:`_our_items`) and exactly their lines are
    removed; then the events they leave empty, and a ``hooks:`` left empty that paneward added
    (its marker) or that held paneward's entries alone. Raises :class:`InstallError` for text
    that is not YAML or an item of paneward's written inline.
    """
    if text is None:
        return None, "does not exist; nothing to do"
    hooks = _load(text, label).get("hooks")
    ours = _our_items(text, label)
    if not ours:
        return None, "no paneward hooks; nothing to do"
    # Hermes rewrites config.yaml itself (`hermes config set`: a YAML dump, comments and
    # paneward's marker gone): a `hooks:` that held paneward's entries alone is paneward's too.
    only_ours = isinstance(hooks, dict) and all(
        isinstance(items, list)
        and all(isinstance(e, dict) and is_paneward_command(e.get("command")) for e in items)
        for items in hooks.values()
    )
    emptied = {
        event
        for event, items in (hooks or {}).items()
        if isinstance(items, list)
        and all(isinstance(e, dict) and is_paneward_command(e.get("command")) for e in items)
    }
    drop = {i for found in ours for i in range(found.first, found.last + 1)}
    lines = text.splitlines(keepends=True)
    kept = [line for i, line in enumerate(lines) if i not in drop]
    kept = _drop_empty_keys(kept, emptied, only_ours)
    result = "".join(kept)
    _load(result, label)
    return result, "removed paneward's hooks"


def _empty_keys(text: str, wanted: set[str]) -> tuple[int | None, list[int]]:
    """The line of the top-level ``hooks`` key, and the lines of its keys named in ``wanted``
    whose value is now empty."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        return None, []
    for key, value in root.value:
        if key.value != "hooks":
            continue
        empty: list[int] = []
        if isinstance(value, yaml.MappingNode):
            empty = [
                k.start_mark.line
                for k, v in value.value
                if k.value in wanted and isinstance(v, yaml.ScalarNode) and v.tag == _NULL
            ]
        return key.start_mark.line, empty
    return None, []


def _drop_empty_keys(lines: list[str], emptied: set[str], only_ours: bool) -> list[str]:
    """Remove the keys under ``hooks:`` of ``emptied`` (events that held paneward's entries
    alone) now empty, and a ``hooks:`` left empty that paneward added (its marker) or that held
    paneward's entries alone (``only_ours``)."""
    hooks_at, empty = _empty_keys("".join(lines), emptied)
    lines = [line for i, line in enumerate(lines) if i not in set(empty)]
    hooks_at, _ = _empty_keys("".join(lines), set())
    if hooks_at is None:
        return lines
    end = _block_end(lines, hooks_at + 1, 0)
    if end == hooks_at + 1 and (only_ours or lines[hooks_at].rstrip("\n").endswith(HOOKS_MARKER)):
        del lines[hooks_at]
        if hooks_at > 0 and not lines[hooks_at - 1].strip() and hooks_at == len(lines):
            del lines[hooks_at - 1]  # the blank line paneward put before its block
    return lines


def edits(
    config_dir: Path, target: HookTarget, *, http: bool, events: Sequence[str] | None
) -> list[Edit]:
    """The one file install-hooks edits: ``<config_dir>/config.yaml`` (``http`` is ignored)."""
    path = config_dir / "config.yaml"
    label = str(path)
    chosen = tuple(events or INSTALLED_EVENTS)
    return [
        Edit(
            path=path,
            install=lambda t: install_config(t, target, events=chosen, label=label),
            uninstall=lambda t: uninstall_config(t, label),
            same=lines_same,
            has_ours=lambda content: "hook --harness hermes" in content,
        )
    ]


INSTALLER: Final = Installer(
    harness="hermes",
    title="Hermes Agent",
    default_dir=paths.home,
    default_dir_help="$HERMES_HOME or ~/.hermes",
    edits=edits,
    notes=(
        "Hermes asks once per hook on its terminal at the next start (\"Allow this hook to "
        f"run? [y/N]\", {len(INSTALLED_EVENTS)} hooks: answer y to each) and remembers the "
        "answers in shell-hooks-allowlist.json. Without a terminal it skips them unless you "
        "consent with `hermes --accept-hooks`, HERMES_ACCEPT_HOOKS=1 or "
        "`hooks_auto_accept: true` in config.yaml",
    ),
)
