"""The pure half of ``paneward install-hooks``: text in, text out, no file I/O.

Who uses what:

- each harness package's ``install`` module (:mod:`actors.harnesses.claude_code.install`,
  :mod:`actors.harnesses.codex.install`, :mod:`actors.harnesses.cursor.install`) builds its
  edits from the helpers here -- the hook command (:class:`HookTarget`), the recognition of
  paneward's entries (:func:`is_paneward_command`, :func:`is_paneward_entry`, :func:`has_ours`), the
  two JSON hook shapes (grouped: Claude Code / Codex; flat: Cursor), the TOML string helpers -- and
  declares one :class:`Installer` listing its :class:`Edit` s;
- :mod:`actors.cli.install` (the I/O shell) collects the installers, reads each edit's file,
  calls its ``install`` / ``uninstall``, and does the backups, diffs and atomic writes.

Every function raises :class:`InstallError` (and nothing else) when a file cannot be changed
safely: it does not parse, or has a shape paneward does not know; the text says what was found.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from actors.core.ingress.http import TOKEN_HEADER
from messages import PanewardError
from messages.common import Harness

__all__ = [
    "COMMAND_TIMEOUT_S",
    "TOKEN_HEADER_NAME",
    "Edit",
    "EditsFor",
    "HookTarget",
    "InstallError",
    "Installer",
    "dump_json",
    "has_ours",
    "is_paneward_entry",
    "is_paneward_command",
    "json_same",
    "lines_same",
    "load_json",
    "merge_flat",
    "merge_grouped",
    "own_file_edit",
    "parse_toml",
    "remove_flat",
    "remove_grouped",
    "shared_dir_problem",
    "toml_array",
    "toml_string",
    "top_level_insert_at",
    "top_level_span",
    "transform_json",
]

#: The ``timeout`` (seconds) written on every command/http hook entry.
COMMAND_TIMEOUT_S: Final = 10
#: The token header as install-hooks writes it (``X-Paneward-Token``). Header names are
#: case-insensitive, so this is :data:`actors.core.ingress.http.TOKEN_HEADER` title-cased, not a
#: second spelling; entries are recognised whatever their case.
TOKEN_HEADER_NAME: Final = "-".join(part.capitalize() for part in TOKEN_HEADER.split("-"))

# ``paneward hook --harness`` whatever the executable's path or quoting, with or without the
# ``--owner`` that later releases write after it: an entry written by an older release is still
# ours, so a re-run rewrites it in place and ``--uninstall`` removes it.
_OURS: Final = re.compile(r"paneward['\"]?\s+hook\s+--harness[ =]")


class InstallError(PanewardError):
    """The configuration cannot be changed safely; the text says what was found and why."""


@dataclass(frozen=True, slots=True)
class HookTarget:
    """How the harness should reach paneward: a shell command, and optionally http; and whether
    the user consents, for this run, to the harness trusting paneward's entries (``trust``:
    ``install-hooks codex --trust`` records Codex's hook trust for them).

    Built once per run by :func:`actors.cli.install.run`; the harness install modules call
    :meth:`command` (hook entries run by a shell) or :meth:`argv` (Codex ``notify``).
    """

    executable: str
    http_url: str | None = None
    token: str | None = None
    trust: bool = False

    def command(self, harness: Harness, owner: str) -> str:
        """``paneward hook --harness H --owner OWNER`` as one shell-quoted string."""
        return shlex.join(self.argv(harness, owner))

    def argv(self, harness: Harness, owner: str) -> list[str]:
        """The same command as an argv list. ``owner`` is the hook client's ``--owner`` rule:
        ``parent``, ``env:NAME`` or ``none`` (:func:`actors.cli.hook_client.owner_pid`)."""
        return [self.executable, "hook", "--harness", harness, "--owner", owner]


def is_paneward_command(command: object) -> bool:
    """Whether a hook command string is one paneward installed (any release, any owner)."""
    return isinstance(command, str) and _OURS.search(command) is not None


def is_paneward_entry(entry: object) -> bool:
    """Whether one hook entry (a JSON object) is paneward's: by its command, or for an http
    hook by the token header (compared case-insensitively)."""
    if not isinstance(entry, dict):
        return False
    if is_paneward_command(entry.get("command")):
        return True
    headers = entry.get("headers")
    return (
        entry.get("type") == "http"
        and isinstance(headers, dict)
        and any(str(k).lower() == TOKEN_HEADER for k in headers)
    )


def has_ours(text: str) -> bool:
    """Whether a JSON hooks file's text mentions any paneward entry (restoring after
    ``--uninstall`` skips the backups that are not paneward-free)."""
    return _OURS.search(text) is not None or TOKEN_HEADER in text.lower()


# ---------------------------------------------------------------------------------------------
# The declarative shape of one harness's install-hooks


@dataclass(frozen=True, slots=True)
class Edit:
    """One file a harness's install-hooks edits, as pure functions of its text.

    The shell (:func:`actors.cli.install.install_plan`) reads ``path`` (``None`` when absent) and
    calls ``install`` or ``uninstall``; each returns the new text, or ``None`` when nothing changes,
    plus a note saying what was found and done (printed after ``<path>: ``), or ``None`` for
    the shell's generic note (created / merged / already installed / removed). Both raise
    :class:`InstallError` for a file they cannot change safely.

    After an uninstall the shell restores the newest backup for which ``has_ours(backup)`` is
    false and ``same(result, backup)`` holds (``backup`` ``None``: there was no file), so the
    user's exact bytes come back. ``private``: the file will hold the http token (create it 0600).
    """

    path: Path
    install: Callable[[str | None], tuple[str | None, str | None]]
    uninstall: Callable[[str | None], tuple[str | None, str | None]]
    same: Callable[[str, str | None], bool]
    has_ours: Callable[[str], bool]
    private: bool = False


class EditsFor(Protocol):
    """An installer's ``edits``: the files to edit under ``config_dir`` for one run.

    ``http``: install http hooks where the harness supports them; ``events``: only these
    (``None``: the harness's ``INSTALLED_EVENTS``). Pure; raises :class:`InstallError`.
    """

    def __call__(
        self,
        config_dir: Path,
        target: HookTarget,
        *,
        http: bool,
        events: Sequence[str] | None,
    ) -> list[Edit]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Installer:
    """What ``paneward install-hooks <harness>`` does for one harness (its package's
    ``install.INSTALLER``; :mod:`actors.cli.install` maps ``harness`` to it).

    ``default_dir`` is called only when ``--config-dir`` is not given (it reads the
    environment); ``notes`` are printed after planning an install, ``http_notes`` as well with
    ``--http``, ``trust_notes`` with ``--trust`` and ``untrusted_notes`` without it; ``http`` /
    ``trust`` say whether ``--http`` / ``--trust`` are supported at all.
    """

    harness: Harness
    title: str  # how messages name it ("Claude Code")
    default_dir: Callable[[], Path]
    default_dir_help: str  # for --help: "$CODEX_HOME or ~/.codex"
    edits: EditsFor
    notes: tuple[str, ...] = ()
    http: bool = False
    http_notes: tuple[str, ...] = ()
    trust: bool = False  # ``--trust`` is supported (:attr:`HookTarget.trust`)
    trust_notes: tuple[str, ...] = ()
    untrusted_notes: tuple[str, ...] = ()  # printed when ``--trust`` is supported, not given


def shared_dir_problem(
    path: str, st_uid: int, st_gid: int, st_mode: int, uid: int, private_gid: int | None
) -> str | None:
    """Why install-hooks may not write in the directory ``path`` (``fstat`` of its opened fd)
    for ``uid``, or ``None`` when no other user can create, replace or remove files there.

    Refused: a directory of another user (root's aside: root can write anywhere anyway); one
    every user can write in (sticky or not: a sticky directory still lets others create the
    names paneward would use); one its group can write in, unless that group is the user's
    own private group ``private_gid`` (the user-private-group scheme: a group of the user's
    name with no other member). Called by :func:`actors.cli.install._open_config_dir`.
    """
    if st_uid not in (uid, 0):
        return (
            f"{path} belongs to uid {st_uid}, not to you (uid {uid}): that user could replace "
            "the files paneward writes there; refusing to write in it"
        )
    mode = st_mode & 0o7777
    if st_mode & 0o002:
        return (
            f"{path} is writable by every user (mode {mode:04o}): another user could plant "
            f"the files paneward writes there; refusing to write in it (`chmod o-w {path}`)"
        )
    if st_mode & 0o020 and st_gid != private_gid:
        return (
            f"{path} is writable by its group (gid {st_gid}, mode {mode:04o}), which is not "
            "your own private group: another member could plant the files paneward writes "
            f"there; refusing to write in it (`chmod g-w {path}`)"
        )
    return None


def own_file_edit(path: Path, text: str, marker: str) -> Edit:
    """An :class:`Edit` for a file that is paneward's alone (the OpenCode plugin, the Pi
    extension): written whole, recognised by ``marker`` in it, deleted again by ``--uninstall``.

    A file already at ``path`` that lacks ``marker`` is the user's: install refuses to replace it
    (:class:`InstallError`) and uninstall leaves it alone.
    """
    label = str(path)

    def install(before: str | None) -> tuple[str | None, str | None]:
        if before == text:
            return None, "paneward's copy is already installed; nothing to do"
        if before is not None and marker not in before:
            raise InstallError(
                f"{label} exists and is not paneward's; move it away first, nothing was changed"
            )
        return text, "updated paneward's copy" if before is not None else "created it"

    def uninstall(before: str | None) -> tuple[str | None, str | None]:
        if before is None:
            return None, "does not exist; nothing to do"
        if marker not in before:
            return None, "is not paneward's; left alone"
        return "", None

    def same(after: str, original: str | None) -> bool:
        return after == (original or "")

    return Edit(
        path=path,
        install=install,
        uninstall=uninstall,
        same=same,
        has_ours=lambda content: marker in content,
    )


# ---------------------------------------------------------------------------------------------
# JSON documents (Claude settings.json, Codex hooks.json, Cursor hooks.json)


def load_json(text: str | None, label: str) -> dict[str, Any]:
    """Parse a JSON config file's text (``None`` or blank: an empty object)."""
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InstallError(
            f"{label} is not valid JSON ({exc}); fix it by hand first, nothing was changed"
        ) from None
    if not isinstance(data, dict):
        raise InstallError(f"{label} holds a JSON {type(data).__name__}, not an object")
    return data


_INDENT: Final = re.compile(r"\A\s*\{\s*?\n([ \t]+)\S")


def dump_json(data: dict[str, Any], like: str | None) -> str:
    """Serialise ``data`` with the indentation and final newline of ``like`` (the old text)."""
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


def merge_grouped(data: dict[str, Any], wanted: dict[str, dict[str, Any]], label: str) -> None:
    """Claude/Codex/Gemini shape: ``hooks.<Event> = [{"matcher"?, "hooks": [entry, ...]}, ...]``.

    Ours (``wanted[event]``) replaces the first paneward entry in place -- Codex trusts hooks by
    position and content -- and drops any duplicate; with none, it is appended as its own group.
    """
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
                if is_paneward_entry(item):
                    if placed:
                        continue  # a duplicate of ours: drop it
                    item, placed = entry, True  # rewrite a stale entry in place
                kept.append(item)
            inner[:] = kept
        if not placed:
            groups.append({"hooks": [entry]})


def remove_grouped(data: dict[str, Any]) -> None:
    """Remove every paneward entry of the grouped shape, and the groups/events it emptied."""
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
            if not isinstance(inner, list) or not any(is_paneward_entry(i) for i in inner):
                continue
            inner[:] = [i for i in inner if not is_paneward_entry(i)]
            changed = True
            if not inner:  # we emptied it: it was ours alone
                groups.remove(group)
        if changed and not groups:
            del hooks[event]
    if not hooks:
        del data["hooks"]


def merge_flat(data: dict[str, Any], wanted: dict[str, dict[str, Any]], label: str) -> None:
    """Cursor shape: ``{"version": 1, "hooks": {"event": [{"command": ...}, ...]}}``.

    Ours replaces the first paneward entry in place (duplicates dropped), else is appended.
    """
    data.setdefault("version", 1)
    hooks = _hooks_table(data, label)
    for event, entry in wanted.items():
        entries = _event_list(hooks, event, label)
        positions = [i for i, item in enumerate(entries) if is_paneward_entry(item)]
        if positions:
            entries[positions[0]] = entry
            for i in reversed(positions[1:]):
                del entries[i]
        else:
            entries.append(entry)


def remove_flat(data: dict[str, Any]) -> None:
    """Remove every paneward entry of the flat shape, and the events it emptied."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return
    for event in list(hooks):
        entries = hooks[event]
        if isinstance(entries, list) and any(is_paneward_entry(i) for i in entries):
            entries[:] = [i for i in entries if not is_paneward_entry(i)]
            if not entries:
                del hooks[event]
    if not hooks:
        del data["hooks"]


def transform_json(
    text: str | None, label: str, change: Callable[[dict[str, Any]], None]
) -> str | None:
    """Apply ``change`` to a parsed copy; the new text, or ``None`` when nothing changes."""
    before = load_json(text, label)
    after = copy.deepcopy(before)
    change(after)
    if text is not None and after == before:
        return None
    return dump_json(after, text)


def lines_same(after: str, original: str | None) -> bool:
    """An :attr:`Edit.same` for formats with comments (TOML, YAML): the same non-blank lines,
    trailing spaces aside. Undoing paneward's edit can leave a blank line where its entries
    were, and nothing else; a comment written since the install counts, so it is never lost to
    the backup's bytes."""

    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.splitlines() if line.strip()]

    return lines(after) == lines(original or "")


def json_same(label: str) -> Callable[[str, str | None], bool]:
    """An :attr:`Edit.same` for JSON files: equal once parsed (an unparsable one never is)."""

    def same(after: str, original: str | None) -> bool:
        try:
            return load_json(after, label) == load_json(original, label)
        except InstallError:
            return False

    return same


# ---------------------------------------------------------------------------------------------
# TOML (text surgery: there is no TOML writer in the standard library, and a round trip would
# lose the user's comments and layout)


def toml_string(value: str) -> str:
    """A TOML basic string literal."""
    # JSON string escapes are TOML basic-string escapes, except DEL which TOML wants escaped.
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_array(values: Iterable[str]) -> str:
    """A one-line TOML array of strings."""
    return "[" + ", ".join(toml_string(v) for v in values) + "]"


def parse_toml(text: str, label: str) -> dict[str, Any]:
    """Parse TOML, or raise :class:`InstallError` naming ``label``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(
            f"{label} is not valid TOML ({exc}); fix it by hand first, nothing was changed"
        ) from None


def top_level_span(lines: Sequence[str], key: str, label: str) -> tuple[int, int] | None:
    """The line span ``[start, end)`` of the top-level ``key = …`` statement, if any.

    ``lines`` keep their line ends. ``None`` when the top level (everything before the first
    table header) does not set ``key`` on a line of its own.
    """
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
            if key in parsed:
                return (i, end)
            i = end
            break
        else:
            raise InstallError(f"{label}: cannot delimit the statement at line {i + 1}")
    return None


def top_level_insert_at(lines: Sequence[str]) -> int:
    """Where a new top-level statement goes: before the first table header (else the top)."""
    for i, line in enumerate(lines):
        if line.lstrip().startswith("["):
            return i
    return 0
