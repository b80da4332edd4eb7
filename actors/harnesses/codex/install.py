"""``paneward install-hooks codex``: the ``config.toml`` ``notify`` and ``hooks.json`` edits (pure).

- ``$CODEX_HOME/config.toml`` top-level ``notify`` runs ``paneward hook --harness codex --owner
  parent`` (Codex runs it itself, so the hook's parent is the owner). ``notify`` holds ONE
  command: when the user already has one, paneward CHAINS it -- the user's lines are kept
  verbatim as ``# paneward-original: `` comments and paneward's ``notify`` gets ``--forward-json
  '<your argv>'``, so the hook client sends its frame and then ``exec``s the user's command with
  the same payload. :func:`uninstall_config` puts the original lines back byte for byte.
- ``$CODEX_HOME/hooks.json``: one command hook per event in :data:`.hooks.INSTALLED_EVENTS`.
  Codex runs a hooks.json entry only once it is trusted: the TUI stops at "Hooks need review"
  on the first prompt until the user reviews them (``/hooks``). Its persisted trust record is a
  ``[hooks.state."<hooks.json path>:<event>:<group>:<handler>"]`` table with ``trusted_hash``
  in ``config.toml``; the hash is :func:`trusted_hash` (Codex's ``command_hook_hash``:
  codex-rs/hooks/src/engine/discovery.rs, checked against Codex 0.171.0's ``hooks/list``
  ``currentHash`` in tests/harnesses/codex/test_install.py). ``--trust`` records the user's
  consent for paneward's own entries only, as tables appended to ``config.toml``, each header marked
  :data:`TRUST_MARKER` (never a table Codex or the user already wrote). Codex rewrites
  ``config.toml`` itself (``codex mcp add``, the TUI's own state) and puts its new tables at the
  end, among paneward's: ``--uninstall`` removes exactly the ``trusted_hash`` keys paneward
  wrote, by key through tomlkit, never a span of lines.

:mod:`actors.cli.install` reads and writes the files; everything here is text in, text out
(:func:`edits` alone reads where ``$CODEX_HOME`` links to: Codex names its trust keys by the
resolved path).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any, Final

import tomlkit
from tomlkit.items import Table

from actors.core.install.config_edit import (
    COMMAND_TIMEOUT_S,
    Edit,
    HookTarget,
    Installer,
    InstallError,
    has_ours,
    is_paneward_command,
    is_paneward_entry,
    json_same,
    lines_same,
    load_json,
    merge_grouped,
    parse_toml,
    remove_grouped,
    toml_array,
    toml_string,
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
    "TIMEOUTS",
    "TRUST_BEGIN",
    "TRUST_END",
    "TRUST_MARKER",
    "edits",
    "install_config",
    "install_hooks_json",
    "trust_block",
    "trust_keys",
    "trusted_hash",
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
#: Per-event ``timeout`` (seconds) where it differs from ``COMMAND_TIMEOUT_S``: Codex clamps a
#: SessionEnd hook to 3 s (it warns "clamping SessionEnd hook timeout to 3s") and hashes the
#: clamped value, so paneward writes what Codex will use.
TIMEOUTS: Final[dict[str, int]] = {"SessionEnd": 3}
TRUST_BEGIN: Final = (
    "# paneward-trust: begin -- your consent (`paneward install-hooks codex --trust`) for "
    "paneward's own hooks.json entries; `--uninstall` removes it"
)
TRUST_END: Final = "# paneward-trust: end"
#: The comment on the header of each ``[hooks.state."…"]`` table ``--trust`` writes: what marks
#: the table as paneward's wherever it ends up in the file. (:data:`TRUST_BEGIN` /
#: :data:`TRUST_END` lines around the tables are the form other paneward releases write; they
#: are recognised and replaced.)
TRUST_MARKER: Final = "# paneward-trust: `paneward install-hooks codex --uninstall` removes it"
_TRUST_TAG: Final = "# paneward-trust"  # what every paneward trust comment starts with


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
    wanted = {
        event: {
            "type": "command",
            "command": target.command("codex", OWNER),
            "timeout": TIMEOUTS.get(event, COMMAND_TIMEOUT_S),
        }
        for event in events
    }
    return transform_json(text, label, lambda d: merge_grouped(d, wanted, label))


def uninstall_hooks_json(text: str | None, label: str = "hooks.json") -> str | None:
    """The hooks.json text without paneward's hooks, or ``None`` if there were none."""
    if text is None:
        return None
    return transform_json(text, label, remove_grouped)


# ---------------------------------------------------------------------------------------------
# Hook trust (config.toml [hooks.state."<key>"] trusted_hash)


def _event_label(event: str) -> str:
    """Codex's key label of an event: ``PreToolUse`` -> ``pre_tool_use``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def trusted_hash(event: str, command: str, timeout_s: int, matcher: str | None = None) -> str:
    """The ``trusted_hash`` Codex computes for one command hook (its ``command_hook_hash``).

    The hashed identity is ``{event_name, matcher?, hooks: [{type: "command", command, timeout,
    async: false}]}`` -- absent optional fields are left out, as Codex's TOML serialisation
    drops ``None`` -- serialised as compact JSON with every object's keys sorted (Codex's
    ``version_for_toml``), then SHA-256: ``"sha256:<hex>"``.
    """
    group: dict[str, Any] = {
        "event_name": _event_label(event),
        "hooks": [{"type": "command", "command": command, "timeout": timeout_s, "async": False}],
    }
    if matcher is not None:
        group["matcher"] = matcher
    text = json.dumps(group, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def trust_keys(hooks_text: str | None, key_paths: Sequence[str]) -> dict[str, str]:
    """``{trust key: trusted_hash}`` for every paneward entry of a hooks.json text, named by
    each of ``key_paths`` (how Codex may spell the hooks.json path)."""
    data = load_json(hooks_text, "hooks.json")
    hooks = data.get("hooks")
    out: dict[str, str] = {}
    if not isinstance(hooks, dict):
        return out
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            continue
        for g, group in enumerate(groups):
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                continue
            for h, entry in enumerate(inner):
                if not is_paneward_entry(entry) or entry.get("type") != "command":
                    continue
                timeout = entry.get("timeout")
                if not isinstance(timeout, int):
                    continue
                digest = trusted_hash(event, str(entry["command"]), timeout, group.get("matcher"))
                for path in key_paths:
                    out[f"{path}:{_event_label(event)}:{g}:{h}"] = digest
    return out


def _old_block_keys(lines: list[str]) -> tuple[list[str], list[str]]:
    """``lines`` without the :data:`TRUST_BEGIN` / :data:`TRUST_END` comment lines (and the
    blank line written before the first), and the trust keys of the tables paneward wrote
    between them: the run of ``[hooks.state."…"]`` / ``trusted_hash = "…"`` lines right after
    :data:`TRUST_BEGIN`. Codex appends its own tables at the end of the file, which can be
    inside that block: those come after the run and are not paneward's.
    """
    keys: list[str] = []
    kept: list[str] = []
    in_run = False
    for line in lines:
        bare = line.rstrip("\r\n")
        if bare == TRUST_BEGIN:
            if kept and not kept[-1].strip():
                kept.pop()
            in_run = True
            continue
        if bare == TRUST_END:
            in_run = False
            continue
        if in_run:
            header = _STATE_HEADER.match(bare)
            if header is not None:
                keys.append(_toml_key(header["key"]))
            elif not _HASH_LINE.match(bare):
                in_run = False
        kept.append(line)
    return kept, keys


_STATE_HEADER: Final = re.compile(r'^\[hooks\.state\.(?P<key>"(?:[^"\\]|\\.)*")\][ \t]*(?:#.*)?$')
_HASH_LINE: Final = re.compile(r'^trusted_hash = "sha256:[0-9a-f]*"[ \t]*$')


def _toml_key(quoted: str) -> str:
    parsed = tomllib.loads(f"k = {quoted}\n")["k"]
    assert isinstance(parsed, str)
    return parsed


def _state_table(doc: MutableMapping[str, Any]) -> MutableMapping[str, Any] | None:
    hooks = doc.get("hooks")
    state = hooks.get("state") if isinstance(hooks, MutableMapping) else None
    return state if isinstance(state, MutableMapping) else None


def _without_trust(text: str, label: str) -> tuple[str, list[str]]:
    """``text`` without paneward's trust records, and the keys they were under.

    paneward's records are the ``[hooks.state."<key>"]`` tables whose header carries
    :data:`TRUST_MARKER` (and the tables of a :data:`TRUST_BEGIN` block, :func:`_old_block_keys`).
    Exactly the ``trusted_hash`` paneward wrote is removed from each, and a table, ``state`` or
    ``hooks`` table left empty by that; every other key, table and comment -- Codex's own
    ``[tui]``, ``[mcp_servers.*]`` or hook states, wherever Codex wrote them -- stays as it is
    (tomlkit edits the parsed document and writes it back in its own layout). Raises
    :class:`InstallError` when the text is not TOML.
    """
    parse_toml(text, label)
    lines, old_keys = _old_block_keys(text.splitlines(keepends=True))
    base = "".join(lines)
    doc = tomlkit.parse(base)
    state = _state_table(doc)
    if state is None:
        return base, []
    ours = [
        key
        for key, table in state.items()
        if key in old_keys
        or (isinstance(table, Table) and table.trivia.comment.startswith(_TRUST_TAG))
    ]
    for key in ours:
        table = state[key]
        if isinstance(table, MutableMapping):
            table.pop("trusted_hash", None)
            if not table:
                del state[key]
    if ours and not state:
        hooks = doc["hooks"]
        del hooks["state"]
        if not hooks:
            del doc["hooks"]
    result = tomlkit.dumps(doc) if ours else base
    if ours and result.endswith("\n\n"):
        result = result.rstrip("\n") + "\n"  # the blank line written before paneward's tables
    expected = parse_toml(base, label)
    held = expected.get("hooks", {}).get("state", {})
    for key in ours:
        held[key].pop("trusted_hash", None)
        if not held[key]:
            del held[key]
    if ours and not held:
        del expected["hooks"]["state"]
        if not expected["hooks"]:
            del expected["hooks"]
    if parse_toml(result, label) != expected:  # pragma: no cover - a bug guard
        raise InstallError(f"{label}: internal error: removing the trust record would change "
                           "other settings; remove paneward's [hooks.state] tables by hand")
    return result, ours


def trust_block(
    text: str | None, states: dict[str, str], label: str = "config.toml"
) -> tuple[str | None, str]:
    """``text`` with paneward's trust records set to ``states`` (keys Codex or the user already
    hold a state for are left out: never overridden), and what was done.

    paneward's old records are removed first (:func:`_without_trust`: exactly its own keys),
    then one ``[hooks.state."<key>"]  # paneward-trust …`` table per fresh key is appended at
    the end. Raises :class:`InstallError` if the result would not be valid TOML.
    """
    source = text or ""
    base, had = _without_trust(source, label)
    existing = parse_toml(base, label).get("hooks", {})
    held = existing.get("state", {}) if isinstance(existing, dict) else {}
    held = held if isinstance(held, dict) else {}
    fresh = {k: v for k, v in states.items() if k not in held}
    skipped = [k for k in states if k in held]
    if not fresh:
        result = base
    else:
        # One blank line before paneward's tables, unless the file ends with one already
        # (:func:`_without_trust` removes it with them).
        block: list[str] = ["\n"] if base.strip() and not base.endswith("\n\n") else []
        for key, digest in fresh.items():
            block += [
                f"[hooks.state.{toml_string(key)}]  {TRUST_MARKER}\n",
                f"trusted_hash = {toml_string(digest)}\n",
            ]
        if base and not base.endswith("\n"):
            base += "\n"
        result = base + "".join(block)
    after = parse_toml(result, label).get("hooks", {}).get("state", {})
    if any(after.get(k, {}).get("trusted_hash") != v for k, v in fresh.items()):
        raise InstallError(f"{label}: internal error: the trust record did not parse back")
    what = f"recorded Codex's trust for paneward's {len(fresh)} hook entries"
    if skipped:
        what += f" ({len(skipped)} already had a state in Codex's record: left as they are)"
    if not had and not fresh:
        what = "paneward's hook entries already have a state in Codex's record; nothing to do"
    return (None if result == source else result), what


def edits(
    config_dir: Path, target: HookTarget, *, http: bool, events: Sequence[str] | None
) -> list[Edit]:
    """``hooks.json``, then ``config.toml`` (notify, and with ``--trust`` the trust record of
    the hooks.json just planned); ``http`` is not supported (ignored)."""
    config = config_dir / "config.toml"
    config_label = str(config)
    hooks_json = config_dir / "hooks.json"
    hooks_label = hooks_json.name
    chosen = tuple(events or INSTALLED_EVENTS)
    # Codex names trust keys by the hooks.json path it loaded: $CODEX_HOME resolved, ~/.codex
    # as it is; both spellings are recorded when they differ.
    spelled = os.path.abspath(hooks_json)
    key_paths = list(dict.fromkeys([spelled, os.path.realpath(spelled)]))
    planned: dict[str, str | None] = {"hooks.json": None}

    def install_hooks(text: str | None) -> tuple[str | None, str | None]:
        new = install_hooks_json(text, target, events=chosen, label=hooks_label)
        planned["hooks.json"] = new if new is not None else text
        return new, None

    def install_toml(text: str | None) -> tuple[str | None, str | None]:
        new, note = install_config(text, target, config_label)
        current = new if new is not None else text
        if target.trust or (current is not None and _TRUST_TAG in current):
            states = trust_keys(planned["hooks.json"], key_paths)
            trusted, what = trust_block(current, states, config_label)
            if trusted is not None:
                return trusted, f"{note}; {what}"
        return new, note

    def uninstall_toml(text: str | None) -> tuple[str | None, str | None]:
        if text is None:
            return None, "does not exist; nothing to do"
        rest, had = _without_trust(text, config_label)
        new, note = uninstall_config(rest, config_label)
        if not had:
            return new, note
        if new is None:
            return rest, "removed paneward's trust record"
        return new, f"{note}; removed paneward's trust record"

    return [
        Edit(
            path=hooks_json,
            install=install_hooks,
            uninstall=lambda t: (uninstall_hooks_json(t, hooks_label), None),
            same=json_same(hooks_label),
            has_ours=has_ours,
        ),
        Edit(
            path=config,
            install=install_toml,
            uninstall=uninstall_toml,
            same=lines_same,
            has_ours=lambda content: NOTIFY_MARKER in content or _TRUST_TAG in content,
        ),
    ]


INSTALLER: Final = Installer(
    harness="codex",
    title="Codex",
    default_dir=paths.home,
    default_dir_help="$CODEX_HOME or ~/.codex",
    edits=edits,
    untrusted_notes=(
        "Codex runs hooks.json commands only once you trust them: the Codex TUI stops at "
        "\"Hooks need review\" on your first prompt until you review them (/hooks). "
        "`paneward install-hooks codex --trust` records that consent for paneward's own "
        "entries instead; notify needs no trust",
    ),
    trust=True,
    trust_notes=(
        "recorded as Codex records it ([hooks.state.\"<hooks.json>:<event>:<i>:<j>\"] "
        "trusted_hash in config.toml), for paneward's entries only; any other hook still "
        "asks",
    ),
)
