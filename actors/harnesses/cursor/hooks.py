"""Cursor: how its hook payloads map to normalized hints.

The event name may be in ``hook_event_name``, ``hookEventName``, ``event_name``,
``eventName`` or ``event``; the session in ``conversation_id`` (or
``session_id``/``sessionId``). ``stop`` carries ``status``/``final_status``.
"""

from __future__ import annotations

from typing import Final

from actors.core.hints import NEEDS_INPUT_NOTIFICATIONS, first_str, text, token, unmapped
from messages.activity import Unmapped
from messages.common import SessionKey
from messages.evidence import HintKind, HookHint, NotifyHook

__all__ = ["INSTALLED_EVENTS", "normalize"]

#: What ``paneward install-hooks cursor`` writes into ``~/.cursor/hooks.json`` (:mod:`.install`).
#: :func:`normalize` maps by rules (``before*``/``after*`` prefixes, ``stop``, ``session*``),
#: not by a table, so this list is the fact; every name in it normalizes to a hint
#: (tests/test_install_hooks.py checks).
INSTALLED_EVENTS: Final[tuple[str, ...]] = (
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

_ABORTED: Final = frozenset({"aborted", "cancelled", "canceled", "interrupted", "error"})


def normalize(hook: NotifyHook) -> HookHint | Unmapped:
    """Map one Cursor hook payload to a :class:`HookHint` (pure)."""
    payload = hook.payload
    event = first_str(
        payload, "hook_event_name", "hookEventName", "event_name", "eventName", "event"
    )
    session_id = first_str(payload, "conversation_id", "conversationId", "session_id", "sessionId")
    if event is None or session_id is None:
        return unmapped("cursor", payload, event, hook.at_ms)
    tok = token(event)
    summary: str | None = None
    hint: HintKind
    if tok == "beforesubmitprompt" or tok.startswith(("before", "after")):
        hint = "working"
    elif tok == "stop":
        status = token(first_str(payload, "final_status", "status", "reason") or "")
        hint = "interrupted" if status in _ABORTED else "completed"
    elif tok == "sessionend":
        hint = "idle"
    elif tok == "sessionstart":
        hint = "start"
    elif tok == "notification" or tok in NEEDS_INPUT_NOTIFICATIONS:
        kind = token(first_str(payload, "notification_type", "type") or tok)
        hint = "needs_input" if kind in NEEDS_INPUT_NOTIFICATIONS else "info"
        summary = text(payload.get("message")) or ("input required" if hint != "info" else None)
    else:
        return unmapped("cursor", payload, event, hook.at_ms)
    return HookHint(
        key=SessionKey("cursor", session_id),
        source="cursor_hook",
        event=event,
        hint=hint,
        at_ms=hook.at_ms,
        observed_at_ms=hook.observed_at_ms,
        tool=first_str(payload, "tool_name", "command", limit=200),
        summary=summary,
        pid=hook.pid,
        start_token=hook.start_token,
    )
