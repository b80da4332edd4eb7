"""Pi: how the events paneward's extension forwards map to normalized hints.

Facts (captures in tests/fixtures/pi/): Pi emits no OSC 7501 and has no permission
prompt. An extension in ``~/.pi/agent/extensions/`` runs in-process (``pi.on(event, handler)``).
paneward's extension (:mod:`.install`) forwards the events in :data:`INSTALLED_EVENTS` as a
``NotifyHook`` whose payload it builds: ``{hook_event_name, session_id, tool_name?,
stop_reason?}`` (``session_id`` from ``ctx.sessionManager.getSessionId()``), stamped with
``process.pid`` and its start token. ``agent_start`` starts a run, ``agent_end`` ends it;
``stop_reason`` is the last message's ``stopReason`` -- ``aborted`` (Esc) or ``error`` is not a
completion.
"""

from __future__ import annotations

from typing import Final

from actors.core.install.forwarder_js import serial
from actors.core.session.hints import first_str, text, unmapped
from messages.activity import Unmapped
from messages.common import SessionKey
from messages.evidence import HintKind, HookHint, NotifyHook

__all__ = ["EVENT_HINTS", "INSTALLED_EVENTS", "normalize"]

#: Every event paneward maps, by Pi's names, in the order the extension lists them.
EVENT_HINTS: Final[dict[str, HintKind]] = {
    "session_start": "start",
    "agent_start": "working",
    "tool_execution_start": "working",
    "tool_execution_end": "working",
    "agent_end": "completed",
    "session_shutdown": "ended",
}
#: The events paneward's extension forwards (:mod:`.install` writes this list into it).
INSTALLED_EVENTS: Final[tuple[str, ...]] = tuple(EVENT_HINTS)
_NOT_DONE: Final = frozenset({"aborted", "error"})


def normalize(hook: NotifyHook) -> HookHint | Unmapped:
    """Map one event forwarded by paneward's Pi extension to a :class:`HookHint` (pure)."""
    payload = hook.payload
    event = first_str(payload, "hook_event_name")
    session_id = first_str(payload, "session_id")
    hint = EVENT_HINTS.get(event) if event is not None else None
    if event is None or session_id is None or hint is None:
        return unmapped("pi", payload, event, hook.at_ms)
    summary: str | None = None
    stop = first_str(payload, "stop_reason")
    if event == "agent_end" and stop in _NOT_DONE:
        hint = "interrupted"
        summary = stop
    elif event == "session_shutdown":
        summary = text(payload.get("reason"))
    return HookHint(
        key=SessionKey("pi", session_id),
        source="pi_extension",
        event=event,
        hint=hint,
        at_ms=hook.at_ms,
        observed_at_ms=hook.observed_at_ms,
        tool=first_str(payload, "tool_name", limit=200),
        summary=summary,
        pid=hook.pid,
        start_token=hook.start_token,
        serial=serial(payload),
    )
