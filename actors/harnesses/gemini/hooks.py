"""Gemini CLI: how its hook payloads map to normalized hints.

Facts (captures in tests/fixtures/gemini/): command hooks in
``~/.gemini/settings.json``, the payload on stdin with ``session_id``, ``hook_event_name``, ``cwd``,
``timestamp``; the hook's parent is the CLI's inner node process (``--owner parent``; there is no
pid in the environment). Hooks run **serially and block the agent**, so paneward installs only the
events it maps, and never ``AfterModel`` (once per streamed chunk), ``BeforeModel``,
``BeforeToolSelection``, ``PreCompress`` or ``BeforeTool`` (the turn is already working; the
permission prompt comes after it and has its own ``Notification``).

``BeforeAgent`` starts a turn and ``AfterAgent`` ends it -- an Esc interrupt is an
``AfterAgent`` too, with no flag, so it cannot be told from a completion. ``Notification`` with
``notification_type: "ToolPermission"`` is a permission wait; its answer has no event: the next
``AfterTool`` (or ``AfterAgent``) closes it.
"""

from __future__ import annotations

from typing import Any, Final

from actors.core.session import hints
from actors.core.session.hints import first_str, fold_name, text, unmapped
from messages.activity import Unmapped
from messages.common import SessionKey
from messages.evidence import HintKind, HookHint, NotifyHook

__all__ = ["EVENT_HINTS", "INSTALLED_EVENTS", "normalize", "permission_reason"]

#: Every event paneward maps, by Gemini's names, in the order install-hooks writes them
#: (:mod:`.install`); any other event is counted as unmapped. ``Notification`` is
#: ``needs_input`` only for a ``ToolPermission`` (:func:`normalize`).
EVENT_HINTS: Final[dict[str, HintKind]] = {
    "SessionStart": "start",
    "BeforeAgent": "working",
    "Notification": "needs_input",
    "AfterTool": "working",
    "AfterAgent": "completed",
    "SessionEnd": "ended",
}
#: What ``paneward install-hooks gemini`` installs: exactly the events mapped above (each one
#: runs before Gemini goes on, so the list is as short as the proof allows).
INSTALLED_EVENTS: Final[tuple[str, ...]] = tuple(EVENT_HINTS)
_PERMISSION: Final = fold_name("ToolPermission")
# The confirmation types Gemini's details name (``details.type``) whose tool is fixed.
_CONFIRMED_TOOLS: Final = {"exec": "run_shell_command"}


def normalize(hook: NotifyHook) -> HookHint | Unmapped:
    """Map one Gemini CLI hook payload to a :class:`HookHint` (pure)."""
    payload = hook.payload
    event = first_str(payload, "hook_event_name")
    session_id = first_str(payload, "session_id")
    hint = EVENT_HINTS.get(event) if event is not None else None
    if event is None or session_id is None or hint is None:
        return unmapped("gemini", payload, event, hook.at_ms)
    tool = first_str(payload, "tool_name", limit=200)
    summary: str | None = None
    if event == "Notification":
        if fold_name(first_str(payload, "notification_type") or "") == _PERMISSION:
            summary = permission_reason(payload)
        else:
            hint = "info"
    elif event == "SessionEnd":
        summary = text(payload.get("reason"))
    return HookHint(
        key=SessionKey("gemini", session_id),
        source="gemini_hook",
        event=event,
        hint=hint,
        at_ms=hook.at_ms,
        observed_at_ms=hook.observed_at_ms,
        tool=tool,
        summary=summary,
        pid=hook.pid,
        start_token=hook.start_token,
    )


def permission_reason(payload: dict[str, Any]) -> str:
    """The reason of a ``ToolPermission`` notification, in the one spelling of every harness
    (:func:`actors.core.session.hints.permission_reason`): ``permission: run_shell_command: rm -rf
    ./junkdir`` for a shell command (``details.type: "exec"``); an MCP tool by its name
    (``details.toolName``); another confirmation by its type, with the file or prompt it
    names; ``permission`` without details."""
    details = payload.get("details")
    if not isinstance(details, dict):
        return hints.permission_reason(None)
    kind = first_str(details, "type", limit=64)
    tool = _CONFIRMED_TOOLS.get(kind or "") or first_str(details, "toolName", limit=200) or kind
    what = next(
        (details[k] for k in ("command", "fileName", "prompt") if isinstance(details.get(k), str)),
        None,
    )
    return hints.permission_reason(tool, what)
