"""Claude Code: how its native hook payloads map to normalized hints.

Facts (captures in tests/fixtures/hooks/): 34 hook events, stdin JSON with
``session_id``, ``hook_event_name``, ``prompt_id`` (2.1.332), ``tool_name``,
``notification_type``, ``agent_id``, ``reason``. The owner pid is ``CLAUDE_PID``
from the hook's environment (the hook client stamps it). The registry discovery
actor lives in :mod:`actors.harnesses.claude_code.registry`.
"""

from __future__ import annotations

from typing import Any, Final

from actors.core.session.hints import (
    NEEDS_INPUT_NOTIFICATIONS,
    first_str,
    fold_name,
    permission_reason,
    text,
    unmapped,
)
from messages.activity import Unmapped
from messages.common import SessionKey
from messages.evidence import HintKind, HookHint, NotifyHook

__all__ = [
    "EVENT_HINTS",
    "HTTP_REFUSED_EVENTS",
    "INSTALLED_EVENTS",
    "KNOWN_EVENTS",
    "LATE_NOTIFICATIONS",
    "background_work",
    "normalize",
]

# Every event name Claude Code 2.1.332 accepts (its own table). A known event that
# makes no claim maps to "info"; anything else is counted as unmapped.
KNOWN_EVENTS: Final = frozenset(
    fold_name(name)
    for name in [
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PostToolBatch",
        "Notification",
        "UserPromptSubmit",
        "UserPromptExpansion",
        "SessionStart",
        "SessionEnd",
        "Stop",
        "StopFailure",
        "SubagentStart",
        "SubagentStop",
        "PreCompact",
        "PostCompact",
        "PreModelSwitch",
        "PostModelSwitch",
        "PermissionRequest",
        "PermissionDenied",
        "Setup",
        "TeammateIdle",
        "TaskCreated",
        "TaskCompleted",
        "Elicitation",
        "ElicitationResult",
        "ConfigChange",
        "WorktreeCreate",
        "WorktreeRemove",
        "InstructionsLoaded",
        "CwdChanged",
        "FileChanged",
        "DirectoryAdded",
        "MessageDisplay",
        "PreSkillShellCommand",
    ]
)

#: Events Claude Code never sends as ``http`` hooks (they need a command hook, which also
#: carries ``CLAUDE_PID``): one arriving over http is a misconfiguration or a forgery.
HTTP_REFUSED_EVENTS: Final = frozenset({"SessionStart", "Setup"})

#: The events that make a claim, by Claude Code's own names, in the order install-hooks writes
#: them; any other known event maps to "info". ``Notification`` is not here: its hint depends on
#: its ``notification_type`` (see :func:`normalize`).
EVENT_HINTS: Final[dict[str, HintKind]] = {
    "SessionStart": "start",
    "SessionEnd": "ended",
    "UserPromptSubmit": "working",
    "PreToolUse": "working",
    # A tool finished inside a running turn: the permission it waited on was answered.
    "PostToolUse": "working",
    "PostToolUseFailure": "working",
    "PostToolBatch": "working",
    "PermissionRequest": "needs_input",
    "PermissionDenied": "working",
    "Elicitation": "needs_input",
    "ElicitationResult": "working",
    "Stop": "completed",
    "StopFailure": "completed",
    "SubagentStart": "subagent_start",
    "SubagentStop": "subagent_stop",
}
_HINTS_BY_NAME: Final = {fold_name(name): hint for name, hint in EVENT_HINTS.items()}

#: What ``paneward install-hooks claude-code`` installs (:mod:`.install`): every event that
#: makes a claim, plus ``Notification``. All exist in Claude Code 2.1.332; older releases reject
#: unknown names with a "settings errors" dialog (``--events`` picks a subset there).
INSTALLED_EVENTS: Final[tuple[str, ...]] = (*EVENT_HINTS, "Notification")

# Claude's own permission and elicitation notifications arrive ~6 s after the dialog opened,
# so they only open needs_input without better proof ("late"); the generic ones
# (actors.core.session.hints.NEEDS_INPUT_NOTIFICATIONS) are immediate.
LATE_NOTIFICATIONS: Final = frozenset({"permissionprompt", "elicitationdialog"})


def normalize(hook: NotifyHook) -> HookHint | Unmapped:
    """Map one Claude Code hook payload to a :class:`HookHint` (pure).

    Unknown events, or payloads without a usable ``session_id``, become an
    :class:`Unmapped` record and change no state.
    """
    payload = hook.payload
    event = first_str(payload, "hook_event_name")
    session_id = first_str(payload, "session_id")
    if event is None or session_id is None:
        return unmapped("claude-code", payload, event, hook.at_ms)
    folded = fold_name(event)
    if folded not in KNOWN_EVENTS:
        return unmapped("claude-code", payload, event, hook.at_ms)
    hint: HintKind = _HINTS_BY_NAME.get(folded, "info")
    tool = first_str(payload, "tool_name", limit=200)
    summary: str | None = None
    if folded == "notification":
        kind = fold_name(first_str(payload, "notification_type") or "")
        if kind in LATE_NOTIFICATIONS:
            hint = "late_needs_input"
        elif kind in NEEDS_INPUT_NOTIFICATIONS:
            hint = "needs_input"
        summary = text(payload.get("message"))
    elif folded == "permissionrequest":
        summary = permission_reason(tool, _tool_command(payload))
    elif folded == "elicitation":
        summary = text(payload.get("message")) or "input requested"
    elif folded == "sessionend":
        summary = text(payload.get("reason"))
    elif folded == "stopfailure":
        summary = text(payload.get("error")) or "stop failure"
    elif folded == "userpromptsubmit":
        prompt = payload.get("prompt")
        if isinstance(prompt, str) and prompt.startswith("<task-notification>"):
            summary = "task-notification"
    return HookHint(
        key=SessionKey("claude-code", session_id),
        source="claude_hook",
        event=event,
        hint=hint,
        at_ms=hook.at_ms,
        observed_at_ms=hook.observed_at_ms,
        prompt_id=first_str(payload, "prompt_id"),
        tool=tool,
        summary=summary,
        agent_id=first_str(payload, "agent_id"),
        pid=hook.pid,
        start_token=hook.start_token,
        background=background_work(payload),
    )


#: Background task types that are not "work the turn is still doing": a background shell is
#: an idle turn (registry ``shell``).
_IDLE_BACKGROUND: Final = frozenset({"shell"})
_MAX_BACKGROUND: Final = 64


def background_work(payload: dict[str, Any]) -> tuple[str, ...] | None:
    """The ids of the in-flight background work a ``Stop`` / ``SubagentStop`` payload lists.

    Claude Code 2.1.332 sends ``background_tasks: [{id, type, status, ...}]`` ("in-flight
    background work (running/pending + backgrounded) ... empty when nothing is in flight"):
    every item but a background shell counts. ``None`` when the payload has no such list
    (other events, older releases); malformed items are skipped.
    """
    tasks = payload.get("background_tasks")
    if not isinstance(tasks, list):
        return None
    ids: list[str] = []
    for task in tasks[:_MAX_BACKGROUND]:
        if not isinstance(task, dict):
            continue
        task_id = first_str(task, "id")
        kind = task.get("type")
        if task_id is None or (isinstance(kind, str) and fold_name(kind) in _IDLE_BACKGROUND):
            continue
        if task_id not in ids:
            ids.append(task_id)
    return tuple(ids)


def _tool_command(payload: dict[str, Any]) -> object:
    """The command a tool call runs (``tool_input.command``, as Bash has), else ``None``."""
    tool_input = payload.get("tool_input")
    return tool_input.get("command") if isinstance(tool_input, dict) else None
