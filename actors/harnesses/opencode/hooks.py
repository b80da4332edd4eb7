"""OpenCode: how the events paneward's plugin forwards map to normalized hints.

Facts (captures in tests/fixtures/opencode/): a plugin in ``~/.config/opencode/plugin/``
runs inside the opencode process and receives every bus event ``{type, properties}``. paneward's
plugin (:mod:`.install`) forwards only the events in :data:`INSTALLED_EVENTS`, as a ``NotifyHook``
whose payload it builds itself: ``{hook_event_name, session_id, status?, permission?, patterns?,
reply?, error?}`` (``session_id`` = ``properties.sessionID``), stamped with its own pid
(``process.pid``, the ``OPENCODE_PID`` of its hooks) and that pid's start token.

``session.status`` busy is a running turn (it stays busy during a permission wait);
``permission.asked`` / ``permission.replied`` are the wait and its answer; ``session.idle`` ends
the turn -- the plugin adds ``error`` when a ``session.error`` came first in that turn
(``MessageAbortedError`` is an Esc interrupt), which is then not a completion, and sends one
``session.idle`` per run (OpenCode repeats it after an Esc); ``server.instance.disposed`` names
no session: the plugin sends one per session it has seen. (On the TUI's ``/exit`` it did not
reach the plugin before the process ended: the exit is then proven by the process's death.)
"""

from __future__ import annotations

from typing import Any, Final

from actors.core.install.forwarder_js import serial
from actors.core.session import hints
from actors.core.session.hints import first_str, unmapped
from messages.activity import Unmapped
from messages.common import SessionKey
from messages.evidence import HintKind, HookHint, NotifyHook

__all__ = ["EVENT_HINTS", "INSTALLED_EVENTS", "normalize", "permission_reason"]

#: Every event paneward maps (OpenCode's bus event types), in the order the plugin lists them;
#: refined by the payload in :func:`normalize`.
EVENT_HINTS: Final[dict[str, HintKind]] = {
    "session.status": "working",
    "permission.asked": "needs_input",
    "permission.replied": "working",
    "session.error": "info",
    "session.idle": "completed",
    "server.instance.disposed": "ended",
}
#: The events paneward's plugin forwards (:mod:`.install` writes this list into it).
INSTALLED_EVENTS: Final[tuple[str, ...]] = tuple(EVENT_HINTS)
_BUSY: Final = frozenset({"busy", "retry"})


def normalize(hook: NotifyHook) -> HookHint | Unmapped:
    """Map one event forwarded by paneward's OpenCode plugin to a :class:`HookHint` (pure)."""
    payload = hook.payload
    event = first_str(payload, "hook_event_name")
    session_id = first_str(payload, "session_id")
    hint = EVENT_HINTS.get(event) if event is not None else None
    if event is None or session_id is None or hint is None:
        return unmapped("opencode", payload, event, hook.at_ms)
    native = event
    summary: str | None = None
    if event == "session.status":
        status = first_str(payload, "status") or ""
        native = f"session.status:{status}"
        if status not in _BUSY:
            hint = "info"  # idle is told by session.idle, which knows whether it completed
    elif event == "permission.asked":
        summary = permission_reason(payload)
    elif event == "session.idle" and first_str(payload, "error") is not None:
        hint = "interrupted"
        summary = first_str(payload, "error")
    return HookHint(
        key=SessionKey("opencode", session_id),
        source="opencode_plugin",
        event=native,
        hint=hint,
        at_ms=hook.at_ms,
        observed_at_ms=hook.observed_at_ms,
        tool=first_str(payload, "permission", limit=200),
        summary=summary,
        pid=hook.pid,
        start_token=hook.start_token,
        serial=serial(payload),
    )


def permission_reason(payload: dict[str, Any]) -> str:
    """The reason of a ``permission.asked``, in the one spelling of every harness
    (:func:`actors.core.session.hints.permission_reason`): ``permission: bash: echo hi`` -- the
    permission OpenCode asks for (its tool: ``bash``, ``edit``, ``webfetch`` ...) and the
    patterns it asks about."""
    patterns = payload.get("patterns")
    what = (
        " ".join(p for p in patterns if isinstance(p, str)) if isinstance(patterns, list) else None
    )
    return hints.permission_reason(first_str(payload, "permission", limit=200), what)
