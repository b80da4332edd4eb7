"""Cursor: how its hook payloads map to normalized hints.

The event name may be in ``hook_event_name``, ``hookEventName``, ``event_name``,
``eventName`` or ``event``; the session in ``conversation_id`` (or
``session_id``/``sessionId``). ``stop`` carries ``status``/``final_status``.
Cursor's hooks have no permission event: a wait for the user is not visible in them.
"""

from __future__ import annotations

from typing import Final

from actors.core.session.hints import first_str, fold_name, unmapped
from messages.activity import Unmapped
from messages.common import SessionKey
from messages.evidence import HintKind, HookHint, NotifyHook

__all__ = ["EVENT_HINTS", "INSTALLED_EVENTS", "normalize"]

#: Every event paneward maps, by Cursor's own names, in the order install-hooks writes them into
#: ``~/.cursor/hooks.json`` (:mod:`.install`); any other event is counted as unmapped. ``stop``
#: is ``completed`` unless its status says the turn was aborted (:func:`normalize`).
EVENT_HINTS: Final[dict[str, HintKind]] = {
    "sessionStart": "start",
    "sessionEnd": "idle",
    "beforeSubmitPrompt": "working",
    "beforeShellExecution": "working",
    "beforeMCPExecution": "working",
    "afterShellExecution": "working",
    "afterMCPExecution": "working",
    "afterFileEdit": "working",
    "afterAgentResponse": "working",
    "stop": "completed",
}
_HINTS_BY_NAME: Final = {fold_name(name): hint for name, hint in EVENT_HINTS.items()}
#: What ``paneward install-hooks cursor`` installs: exactly the events mapped above.
INSTALLED_EVENTS: Final[tuple[str, ...]] = tuple(EVENT_HINTS)

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
    hint = _HINTS_BY_NAME.get(fold_name(event))
    if hint is None:
        return unmapped("cursor", payload, event, hook.at_ms)
    if hint == "completed":
        status = fold_name(first_str(payload, "final_status", "status", "reason") or "")
        if status in _ABORTED:
            hint = "interrupted"
    return HookHint(
        key=SessionKey("cursor", session_id),
        source="cursor_hook",
        event=event,
        hint=hint,
        at_ms=hook.at_ms,
        observed_at_ms=hook.observed_at_ms,
        tool=first_str(payload, "tool_name", "command", limit=200),
        pid=hook.pid,
        start_token=hook.start_token,
    )
