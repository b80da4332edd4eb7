"""``paneward install-hooks``: merge paneward's hooks into a harness's own configuration.

What it edits (and nothing else):

- Claude Code: ``$CLAUDE_CONFIG_DIR/settings.json`` (default ``~/.claude``), one ``hooks`` entry
  per event in :data:`CLAUDE_EVENTS`. ``--http`` turns every event except ``SessionStart`` into
  an ``http`` hook to the loopback listener (Claude never sends SessionStart over http, and the
  command hook is what carries ``CLAUDE_PID``); the token is created 0600 in
  :func:`actors.core.paths.http_token_path` on first use and reused afterwards.
- Codex: ``$CODEX_HOME/config.toml`` (default ``~/.codex``) top-level ``notify`` and
  ``$CODEX_HOME/hooks.json`` (:data:`CODEX_EVENTS`). ``notify`` holds ONE command. When the user
  already has one, paneward CHAINS it: the user's lines are kept verbatim as
  ``# paneward-original: `` comments and paneward's ``notify`` runs ``paneward hook --harness
  codex --forward-json '<your argv>'``, which sends the frame and then ``exec``s the user's
  command with the same payload. ``--uninstall`` puts the original lines back byte for byte.
- Cursor: ``~/.cursor/hooks.json`` (:data:`CURSOR_EVENTS`).

Guarantees: every other key, hook and comment is kept; entries are recognised as paneward's by
their command (``…paneward hook --harness …``) or, for http hooks, by the ``X-Paneward-Token``
header, and a stale one is rewritten in place (Codex trusts hooks by position and content); a
second run changes nothing and writes nothing; before any write the previous file is copied to
``<file>.paneward-backup-<UTC time>`` (``….absent`` when there was no file); writes are atomic
(temp file + rename) onto the symlink's target, keeping the file mode. ``--uninstall`` removes
exactly paneward's entries; when the result means the same as the newest paneward-free backup,
that backup's bytes are restored (byte-for-byte, including formatting), and a file paneward
created is deleted again. A file that does not parse is never touched: the command says why.

Planning is pure (text in, text out) and unit-tested; :func:`run` is the I/O shell.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import secrets
import shlex
import shutil
import stat
import sys
import time
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from actors.core import paths
from actors.harnesses.claude_code import paths as claude_paths
from actors.harnesses.codex import paths as codex_paths
from messages import PanewardError

if TYPE_CHECKING:
    import argparse

__all__ = [
    "CLAUDE_EVENTS",
    "CODEX_EVENTS",
    "CURSOR_EVENTS",
    "DEFAULT_HTTP_PORT",
    "FileChange",
    "HookTarget",
    "InstallError",
    "Plan",
    "add_arguments",
    "apply_plan",
    "ensure_http_token",
    "install_claude_settings",
    "install_codex_config",
    "install_codex_hooks",
    "install_cursor_hooks",
    "is_paneward_command",
    "plan",
    "run",
    "uninstall_claude_settings",
    "uninstall_codex_config",
    "uninstall_codex_hooks",
    "uninstall_cursor_hooks",
]

HarnessName = Literal["claude-code", "codex", "cursor"]

# Every Claude event the session reducer uses (DESIGN §4) -- all exist in Claude Code 2.1.332.
# Older releases reject unknown names with a "settings errors" dialog: use --events there.
CLAUDE_EVENTS: Final[tuple[str, ...]] = (
    "SessionStart",
    "SessionEnd",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "PermissionRequest",
    "PermissionDenied",
    "Notification",
    "Stop",
    "StopFailure",
    "SubagentStart",
    "SubagentStop",
)
CODEX_EVENTS: Final[tuple[str, ...]] = (
    "SessionStart",
    "SessionEnd",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PermissionRequest",
    "Stop",
)
CURSOR_EVENTS: Final[tuple[str, ...]] = (
    "sessionStart",
    "sessionEnd",
    "beforeSubmitPrompt",
    "beforeShellExecution",
    "beforeMCPExecution",
    "afterShellExecution",
    "afterMCPExecution",
    "afterFileEdit",
    "afterAgentResponse",
    "stop",
)
HTTP_COMMAND_EVENTS: Final = frozenset({"SessionStart", "Setup"})
DEFAULT_HTTP_PORT: Final = 47501
COMMAND_TIMEOUT_S: Final = 10
TOKEN_HEADER: Final = "X-Paneward-Token"
NOTIFY_MARKER: Final = (
    "# added by paneward install-hooks; `paneward install-hooks codex --uninstall` removes it"
)
ORIGINAL_PREFIX: Final = "# paneward-original: "
BACKUP_INFIX: Final = ".paneward-backup-"

_OURS = re.compile(r"paneward['\"]?\s+hook\s+--harness[ =]")


class InstallError(PanewardError):
    """The configuration cannot be changed safely; the text says what was found and why."""


@dataclass(frozen=True, slots=True)
class HookTarget:
    """How the harness should reach paneward: a shell command, and optionally http."""

    executable: str
    http_url: str | None = None
    token: str | None = None

    def command(self, harness: HarnessName) -> str:
        return f"{shlex.quote(self.executable)} hook --harness {harness}"

    def argv(self, harness: HarnessName) -> list[str]:
        return [self.executable, "hook", "--harness", harness]


def is_paneward_command(command: object) -> bool:
    """Whether a hook command string is one paneward installed."""
    return isinstance(command, str) and _OURS.search(command) is not None


def _is_ours(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    if is_paneward_command(entry.get("command")):
        return True
    headers = entry.get("headers")
    return (
        entry.get("type") == "http"
        and isinstance(headers, dict)
        and any(str(k).lower() == TOKEN_HEADER.lower() for k in headers)
    )


# ---------------------------------------------------------------------------------------------
# JSON documents (Claude settings.json, Codex hooks.json, Cursor hooks.json)


def _load_json(text: str | None, path_label: str) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InstallError(
            f"{path_label} is not valid JSON ({exc}); fix it by hand first, nothing was changed"
        ) from None
    if not isinstance(data, dict):
        raise InstallError(f"{path_label} holds a JSON {type(data).__name__}, not an object")
    return data


_INDENT = re.compile(r"\A\s*\{\s*?\n([ \t]+)\S")


def _dump_json(data: dict[str, Any], like: str | None) -> str:
    indent: str | int = 2
    if like:
        match = _INDENT.match(like)
        if match:
            indent = match.group(1)
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    if like is None or like.endswith("\n"):
        text += "\n"
    return text


def _hooks_table(data: dict[str, Any], label: str) -> dict[str, Any]:
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InstallError(f"{label}: \"hooks\" is a {type(hooks).__name__}, expected an object")
    return hooks


def _event_list(hooks: dict[str, Any], event: str, label: str) -> list[Any]:
    entries = hooks.setdefault(event, [])
    if not isinstance(entries, list):
        raise InstallError(
            f"{label}: hooks.{event} is a {type(entries).__name__}, expected an array"
        )
    return entries


def _merge_grouped(data: dict[str, Any], wanted: dict[str, dict[str, Any]], label: str) -> None:
    """Claude/Codex shape: ``hooks.<Event> = [{"matcher"?, "hooks": [entry, ...]}, ...]``."""
    hooks = _hooks_table(data, label)
    for event, entry in wanted.items():
        groups = _event_list(hooks, event, label)
        placed = False
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                continue
            kept: list[Any] = []
            for item in inner:
                if _is_ours(item):
                    if placed:
                        continue  # a duplicate of ours: drop it
                    item, placed = entry, True  # rewrite a stale entry in place
                kept.append(item)
            inner[:] = kept
        if not placed:
            groups.append({"hooks": [entry]})


def _remove_grouped(data: dict[str, Any]) -> None:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        changed = False
        for group in list(groups):
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list) or not any(_is_ours(i) for i in inner):
                continue
            inner[:] = [i for i in inner if not _is_ours(i)]
            changed = True
            if not inner:  # we emptied it: it was ours alone
                groups.remove(group)
        if changed and not groups:
            del hooks[event]
    if not hooks:
        del data["hooks"]


def _merge_flat(data: dict[str, Any], wanted: dict[str, dict[str, Any]], label: str) -> None:
    """Cursor shape: ``{"version": 1, "hooks": {"event": [{"command": ...}, ...]}}``."""
    data.setdefault("version", 1)
    hooks = _hooks_table(data, label)
    for event, entry in wanted.items():
        entries = _event_list(hooks, event, label)
        positions = [i for i, item in enumerate(entries) if _is_ours(item)]
        if positions:
            entries[positions[0]] = entry
            for i in reversed(positions[1:]):
                del entries[i]
        else:
            entries.append(entry)


def _remove_flat(data: dict[str, Any]) -> None:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return
    for event in list(hooks):
        entries = hooks[event]
        if isinstance(entries, list) and any(_is_ours(i) for i in entries):
            entries[:] = [i for i in entries if not _is_ours(i)]
            if not entries:
                del hooks[event]
    if not hooks:
        del data["hooks"]


def _transform_json(
    text: str | None, label: str, change: Callable[[dict[str, Any]], None]
) -> str | None:
    """Apply ``change`` to a copy; the new text, or ``None`` when nothing changes."""
    before = _load_json(text, label)
    after = copy.deepcopy(before)
    change(after)
    if text is not None and after == before:
        return None
    return _dump_json(after, text)


def _claude_entries(
    target: HookTarget, events: Sequence[str], http: bool
) -> dict[str, dict[str, Any]]:
    wanted: dict[str, dict[str, Any]] = {}
    for event in events:
        if http and event not in HTTP_COMMAND_EVENTS:
            if target.http_url is None or target.token is None:
                raise InstallError("--http needs a URL and a token")
            wanted[event] = {
                "type": "http",
                "url": target.http_url,
                "headers": {TOKEN_HEADER: target.token},
                "timeout": COMMAND_TIMEOUT_S,
            }
        else:
            wanted[event] = {
                "type": "command",
                "command": target.command("claude-code"),
                "timeout": COMMAND_TIMEOUT_S,
            }
    return wanted


def install_claude_settings(
    text: str | None,
    target: HookTarget,
    *,
    http: bool = False,
    events: Sequence[str] = CLAUDE_EVENTS,
    label: str = "settings.json",
) -> str | None:
    """The new settings.json text with paneward's hooks merged in, or ``None`` if unchanged."""
    wanted = _claude_entries(target, events, http)
    return _transform_json(text, label, lambda d: _merge_grouped(d, wanted, label))


def uninstall_claude_settings(text: str | None, label: str = "settings.json") -> str | None:
    if text is None:
        return None
    return _transform_json(text, label, _remove_grouped)


def install_codex_hooks(
    text: str | None,
    target: HookTarget,
    *,
    events: Sequence[str] = CODEX_EVENTS,
    label: str = "hooks.json",
) -> str | None:
    entry = {"type": "command", "command": target.command("codex"), "timeout": COMMAND_TIMEOUT_S}
    wanted = {event: dict(entry) for event in events}
    return _transform_json(text, label, lambda d: _merge_grouped(d, wanted, label))


def uninstall_codex_hooks(text: str | None, label: str = "hooks.json") -> str | None:
    if text is None:
        return None
    return _transform_json(text, label, _remove_grouped)


def install_cursor_hooks(
    text: str | None,
    target: HookTarget,
    *,
    events: Sequence[str] = CURSOR_EVENTS,
    label: str = "hooks.json",
) -> str | None:
    wanted = {event: {"command": target.command("cursor")} for event in events}
    return _transform_json(text, label, lambda d: _merge_flat(d, wanted, label))


def uninstall_cursor_hooks(text: str | None, label: str = "hooks.json") -> str | None:
    if text is None:
        return None
    return _transform_json(text, label, _remove_flat)


# ---------------------------------------------------------------------------------------------
# Codex config.toml (text surgery: there is no TOML writer in the standard library, and a
# round trip would lose the user's comments and layout)


def _toml_string(value: str) -> str:
    # JSON string escapes are TOML basic-string escapes, except DEL which TOML wants escaped.
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_array(values: Iterable[str]) -> str:
    return "[" + ", ".join(_toml_string(v) for v in values) + "]"


def _parse_toml(text: str, label: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(
            f"{label} is not valid TOML ({exc}); fix it by hand first, nothing was changed"
        ) from None


def _top_level_notify(lines: list[str], label: str) -> tuple[int, int] | None:
    """The line span ``[start, end)`` of the top-level ``notify = …`` statement, if any."""
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        if stripped.startswith("["):
            return None  # first table header: the top level is over
        # A key/value statement may span lines (multi-line arrays/strings): grow it until it
        # parses on its own.
        for end in range(i + 1, len(lines) + 1):
            try:
                parsed = tomllib.loads("".join(lines[i:end]))
            except tomllib.TOMLDecodeError:
                continue
            if "notify" in parsed:
                return (i, end)
            i = end
            break
        else:
            raise InstallError(f"{label}: cannot delimit the statement at line {i + 1}")
    return None


def _insert_at(lines: list[str]) -> int:
    for i, line in enumerate(lines):
        if line.lstrip().startswith("["):
            # Before the first table header, after the top-level statements.
            return i
    return 0


def install_codex_config(
    text: str | None, target: HookTarget, label: str = "config.toml"
) -> tuple[str | None, str]:
    """The new config.toml text (``None`` if unchanged) and what was found and done."""
    source = text or ""
    data = _parse_toml(source, label)
    lines = source.splitlines(keepends=True)
    ours_argv = target.argv("codex")
    current = data.get("notify")
    span = _top_level_notify(lines, label)
    if current is not None and span is None:
        raise InstallError(
            f"{label}: `notify` is set in a form paneward cannot edit safely; "
            f"set it by hand to {_toml_array(ours_argv)}"
        )
    if current is not None and (
        not isinstance(current, list) or not all(isinstance(p, str) for p in current) or not current
    ):
        raise InstallError(
            f"{label}: `notify` is {current!r}, not a list of strings; nothing was changed"
        )
    if current is not None and span is not None and is_paneward_command(" ".join(current)):
        # Already ours: rewrite only if the executable moved (forward part kept as is).
        wanted = [*ours_argv, *current[len(ours_argv) :]] if len(current) > 4 else ours_argv
        if current == wanted and lines[span[0]].rstrip("\n").endswith(NOTIFY_MARKER):
            return None, f"{label}: notify already runs paneward; nothing to do"
        new_line = f"notify = {_toml_array(wanted)}  {NOTIFY_MARKER}\n"
        new_lines = [*lines[: span[0]], new_line, *lines[span[1] :]]
        result = "".join(new_lines)
        _verify_notify(result, data, wanted, label)
        return result, f"{label}: updated paneward's notify to {wanted[0]}"
    if current is None:
        new_line = f"notify = {_toml_array(ours_argv)}  {NOTIFY_MARKER}\n"
        at = _insert_at(lines)
        result = "".join([*lines[:at], new_line, *lines[at:]])
        _verify_notify(result, data, ours_argv, label)
        return result, f"{label}: no notify was set; added paneward's"
    assert span is not None
    chained = [*ours_argv, "--forward-json", json.dumps(current, ensure_ascii=False)]
    kept = [ORIGINAL_PREFIX + line for line in lines[span[0] : span[1]]]
    if not kept[-1].endswith("\n"):
        kept[-1] += "\n"
    new_line = f"notify = {_toml_array(chained)}  {NOTIFY_MARKER}\n"
    result = "".join([*lines[: span[0]], *kept, new_line, *lines[span[1] :]])
    _verify_notify(result, data, chained, label)
    return result, (
        f"{label}: found your notify = {json.dumps(current)}; kept it (commented with "
        f"'{ORIGINAL_PREFIX.strip()}') and chained it: paneward sends its frame, then runs your "
        "command with the same payload. `--uninstall` restores your line exactly"
    )


def _verify_notify(result: str, before: dict[str, Any], notify: list[str], label: str) -> None:
    after = _parse_toml(result, label)
    expected = dict(before)
    expected["notify"] = notify
    if after != expected:  # pragma: no cover - a bug guard: never write a changed meaning
        raise InstallError(f"{label}: internal error: the edit would change other settings")


def uninstall_codex_config(text: str | None, label: str = "config.toml") -> tuple[str | None, str]:
    if text is None:
        return None, f"{label}: does not exist; nothing to do"
    lines = text.splitlines(keepends=True)
    ours = [
        i
        for i, line in enumerate(lines)
        if line.lstrip().startswith("notify") and line.rstrip("\n").endswith(NOTIFY_MARKER)
    ]
    originals = [i for i, line in enumerate(lines) if line.startswith(ORIGINAL_PREFIX)]
    if not ours and not originals:
        data = _parse_toml(text, label)
        if is_paneward_command(" ".join(map(str, data.get("notify") or []))):
            raise InstallError(
                f"{label}: notify runs paneward but was edited by hand; remove it by hand"
            )
        return None, f"{label}: no paneward notify; nothing to do"
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
        new_lines.insert(ours[0], f"notify = {_toml_array(restored_forward)}\n")
    result = "".join(new_lines)
    _parse_toml(result, label)
    what = "restored your original notify" if originals or restored_forward else "removed it"
    return result, f"{label}: removed paneward's notify and {what}"


def _forwarded(line: str) -> list[str] | None:
    try:
        argv = tomllib.loads(line).get("notify")
    except tomllib.TOMLDecodeError:
        return None
    if isinstance(argv, list) and "--forward-json" in argv:
        index = argv.index("--forward-json")
        if index + 1 < len(argv):
            forwarded = json.loads(argv[index + 1])
            if isinstance(forwarded, list):
                return [str(part) for part in forwarded]
    return None


# ---------------------------------------------------------------------------------------------
# Plans and the I/O shell


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file to rewrite: ``after`` ``None`` deletes it (a file paneward had created)."""

    path: Path
    before: str | None
    after: str | None
    note: str
    private: bool = False  # holds the http token: create it 0600


@dataclass(frozen=True, slots=True)
class Plan:
    changes: tuple[FileChange, ...]
    notes: tuple[str, ...]


def _read(path: Path) -> str | None:
    try:
        return path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(f"cannot read {path}: {exc}") from None


def _backups(path: Path) -> list[Path]:
    pattern = path.name + BACKUP_INFIX + "*"
    return sorted(path.parent.glob(pattern), reverse=True)


def _restore_original(
    path: Path,
    after: str | None,
    same: Callable[[str, str | None], bool],
    has_ours: Callable[[str], bool],
) -> tuple[str | None, bool]:
    """After an uninstall, prefer the newest paneward-free backup meaning the same thing.

    Returns ``(text, delete)``: the text to write (the backup's exact bytes when one matches),
    or ``delete`` True when the newest matching backup records that there was no file.
    """
    if after is None:
        return None, False
    for backup in _backups(path):
        if backup.name.endswith(".absent"):
            if same(after, None):
                return None, True
            continue
        content = _read(backup)
        if content is None or has_ours(content):
            continue
        if same(after, content):
            return content, False
    return after, False


def _json_same(label: str) -> Callable[[str, str | None], bool]:
    def same(after: str, original: str | None) -> bool:
        try:
            parsed = _load_json(after, label)
            return parsed == _load_json(original, label)
        except InstallError:
            return False

    return same


def _json_has_ours(text: str) -> bool:
    return bool(_OURS.search(text)) or TOKEN_HEADER in text


def plan(
    harness: HarnessName,
    *,
    target: HookTarget,
    config_dir: Path,
    uninstall: bool = False,
    http: bool = False,
    events: Sequence[str] | None = None,
) -> Plan:
    """Work out every file change for one harness (reads files, writes nothing)."""
    changes: list[FileChange] = []
    notes: list[str] = []

    def json_file(
        path: Path,
        do_install: Callable[[str | None], str | None],
        do_uninstall: Callable[[str | None], str | None],
        private: bool = False,
    ) -> None:
        path = _target(path)
        before = _read(path)
        if not uninstall:
            after = do_install(before)
            if after is None:
                notes.append(f"{path}: paneward's hooks are already installed; nothing to do")
            else:
                verb = "created" if before is None else "merged paneward's hooks into"
                changes.append(FileChange(path, before, after, f"{path}: {verb} it", private))
            return
        after = do_uninstall(before)
        if after is None:
            notes.append(f"{path}: no paneward hooks; nothing to do")
            return
        same = _json_same(path.name)
        text, delete = _restore_original(path, after, same, _json_has_ours)
        if delete:
            changes.append(FileChange(path, before, None, f"{path}: paneward created it; removed"))
        else:
            exact = " (original bytes restored from backup)" if text != after else ""
            changes.append(
                FileChange(path, before, text, f"{path}: removed paneward's hooks{exact}")
            )

    if harness == "claude-code":
        claude_events = tuple(events or CLAUDE_EVENTS)
        json_file(
            config_dir / "settings.json",
            lambda t: install_claude_settings(t, target, http=http, events=claude_events),
            uninstall_claude_settings,
            private=http,
        )
        if http and not uninstall:
            notes.append(
                "SessionStart stays a command hook: Claude Code does not send it over http, "
                "and the command hook is what reports the owner pid (CLAUDE_PID)"
            )
    elif harness == "codex":
        codex_events = tuple(events or CODEX_EVENTS)
        config = _target(config_dir / "config.toml")
        before = _read(config)
        if uninstall:
            after, note = uninstall_codex_config(before, str(config))
            if after is not None:
                text, delete = _restore_original(
                    config,
                    after,
                    lambda a, o: (o or "") == a or (a.strip() == "" and o is None),
                    lambda content: NOTIFY_MARKER in content,
                )
                changes.append(FileChange(config, before, None if delete else text, note))
            else:
                notes.append(note)
        else:
            after, note = install_codex_config(before, target, str(config))
            if after is not None:
                changes.append(FileChange(config, before, after, note))
            else:
                notes.append(note)
        json_file(
            config_dir / "hooks.json",
            lambda t: install_codex_hooks(t, target, events=codex_events),
            uninstall_codex_hooks,
        )
        if not uninstall:
            notes.append(
                "Codex runs hooks.json commands only once they are trusted (Codex asks; "
                "`--dangerously-bypass-hook-trust` skips it); notify needs no trust"
            )
    else:
        cursor_events = tuple(events or CURSOR_EVENTS)
        json_file(
            config_dir / "hooks.json",
            lambda t: install_cursor_hooks(t, target, events=cursor_events),
            uninstall_cursor_hooks,
        )
    return Plan(tuple(changes), tuple(notes))


def _target(path: Path) -> Path:
    """Follow a symlinked config (dotfile managers): edit and back up its target, keep the link."""
    return path.resolve() if path.is_symlink() else path


def _backup_path(path: Path, absent: bool) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    base = f"{path.name}{BACKUP_INFIX}{stamp}"
    for n in range(1000):
        name = base + (f"-{n}" if n else "") + ("Z.absent" if absent else "Z")
        candidate = path.with_name(name)
        if not candidate.exists():
            return candidate
    raise InstallError(f"too many backups of {path} this second")  # pragma: no cover


def _write_atomic(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.paneward-tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def apply_plan(changes: Iterable[FileChange]) -> list[Path]:
    """Write the changes (backup first, then an atomic replace); returns the backups made."""
    backups: list[Path] = []
    for change in changes:
        path = _target(change.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        current = _read(path)
        if current != change.before:
            raise InstallError(f"{path} changed while paneward was editing it; run again")
        backup = _backup_path(path, absent=current is None)
        if current is None:
            backup.touch(mode=0o600)
            mode = 0o600 if change.private else 0o644
        else:
            mode = stat.S_IMODE(path.stat().st_mode)
            shutil.copy2(path, backup)
            os.chmod(backup, mode & 0o600 | 0o400)
        backups.append(backup)
        if change.after is None:
            path.unlink()
        else:
            if change.private:
                mode &= 0o700  # it now holds the http token
            _write_atomic(path, change.after, mode)
    return backups


def ensure_http_token(path: Path) -> str:
    """Return the http hook token, creating it (0600, in a 0700 directory) on first use."""
    try:
        existing = path.read_text("utf-8").strip()
    except FileNotFoundError:
        existing = ""
    if existing:
        os.chmod(path, 0o600)
        return existing
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    os.chmod(path, 0o600)
    return token


def default_executable() -> str:
    """The ``paneward`` console script of this installation (absolute path)."""
    beside = Path(sys.executable).with_name("paneward")
    if beside.exists():
        return os.fspath(beside)
    found = shutil.which("paneward")
    if found:
        return os.path.abspath(found)
    raise InstallError(
        "cannot find the `paneward` executable next to this Python or on PATH; "
        "pass --executable /path/to/paneward"
    )


def default_config_dir(harness: HarnessName) -> Path:
    if harness == "claude-code":
        return claude_paths.config_dir()
    if harness == "codex":
        return codex_paths.home()
    return Path.home() / ".cursor"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("harness", choices=("claude-code", "codex", "cursor"))
    parser.add_argument(
        "--http",
        action="store_true",
        help="Claude Code: use loopback http hooks (SessionStart stays a command hook)",
    )
    parser.add_argument("--http-port", type=int, default=DEFAULT_HTTP_PORT, metavar="PORT")
    parser.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
    parser.add_argument("--uninstall", action="store_true", help="remove paneward's entries")
    parser.add_argument(
        "--config-dir",
        type=Path,
        metavar="DIR",
        help="the harness's directory (default: $CLAUDE_CONFIG_DIR or ~/.claude, "
        "$CODEX_HOME or ~/.codex, ~/.cursor)",
    )
    parser.add_argument("--executable", metavar="PATH", help="the paneward command to install")
    parser.add_argument(
        "--events",
        metavar="A,B,...",
        help="only these events (e.g. for Claude Code releases that reject newer event names)",
    )


def _diff(change: FileChange) -> str:
    before = (change.before or "").splitlines(keepends=True)
    after = (change.after or "").splitlines(keepends=True)
    name = os.fspath(change.path)
    return "".join(difflib.unified_diff(before, after, name, name + " (new)"))


def run(args: argparse.Namespace) -> int:
    """The ``install-hooks`` subcommand: prints what it found and did; 0 ok, 1 refused."""
    harness: HarnessName = args.harness
    try:
        if args.http and harness != "claude-code":
            raise InstallError("--http is only for Claude Code (the only harness with http hooks)")
        executable = args.executable or default_executable()
        token: str | None = None
        url: str | None = None
        if args.http and not args.uninstall:
            token_path = Path(paths.http_token_path())
            if args.dry_run and not token_path.exists():
                token = "<new token>"
            else:
                token = ensure_http_token(token_path)
            url = f"http://127.0.0.1:{args.http_port}/hook/{harness}"
        events = [e for e in (args.events or "").split(",") if e] or None
        config_dir = args.config_dir or default_config_dir(harness)
        result = plan(
            harness,
            target=HookTarget(executable, url, token),
            config_dir=config_dir,
            uninstall=args.uninstall,
            http=args.http,
            events=events,
        )
        for note in result.notes:
            print(note)
        if args.dry_run:
            for change in result.changes:
                print(f"would change {change.path}: {change.note}")
                print(_diff(change), end="")
            return 0
        backups = apply_plan(result.changes)
        for change, backup in zip(result.changes, backups, strict=True):
            print(f"{change.note} (backup: {backup})")
    except InstallError as exc:
        print(f"paneward install-hooks: {exc}", file=sys.stderr)
        return 1
    return 0
