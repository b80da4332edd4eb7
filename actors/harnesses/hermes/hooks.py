"""Hermes Agent, interactive: how its shell-hook payloads map to normalized hints.

Facts (captures in tests/fixtures/hermes/): hooks are commands in
``$HERMES_HOME/config.yaml`` (``hooks: {event: [{command, timeout}]}``), run with the payload on
stdin -- ``{hook_event_name, tool_name, tool_input, session_id, cwd, extra}`` -- by the ``hermes``
process itself (the hook's parent is the owner: ``--owner parent``), synchronously. A turn
starts with ``pre_llm_call`` and ends with ``on_session_end`` (per turn: ``extra.completed``,
``extra.interrupted``); ``pre_approval_request`` on the ``cli`` (or ``gateway``) surface is a
wait for the user, ``post_approval_response`` its answer (the ``smart`` surface is Hermes's own
auxiliary model deciding, not the user; both approval hooks name their session in
``extra.session_key``, with an empty ``session_id``); ``on_session_finalize`` is the exit. The cron
ledger (:mod:`.ledger`) is another source of the same harness.
"""

from __future__ import annotations

from typing import Any, Final

from actors.core.session import hints
from actors.core.session.hints import first_str, text, unmapped
from messages.activity import Unmapped
from messages.common import SessionKey
from messages.evidence import HintKind, HookHint, NotifyHook

__all__ = ["EVENT_HINTS", "INSTALLED_EVENTS", "normalize", "permission_reason"]

#: Every event paneward maps, in the order install-hooks writes them (:mod:`.install`); any
#: other event is counted as unmapped. ``pre_approval_request`` and ``on_session_end`` are
#: refined by their payload (:func:`normalize`).
EVENT_HINTS: Final[dict[str, HintKind]] = {
    "on_session_start": "start",
    "pre_llm_call": "working",
    "pre_tool_call": "working",
    "post_tool_call": "working",
    "pre_approval_request": "needs_input",
    "post_approval_response": "working",
    "on_session_end": "completed",
    "on_session_finalize": "ended",
}
#: What ``paneward install-hooks hermes`` installs: exactly the events mapped above (each one is
#: a consent prompt on Hermes's TTY the first time).
INSTALLED_EVENTS: Final[tuple[str, ...]] = tuple(EVENT_HINTS)
# Approval surfaces where a person answers (``smart`` is Hermes's auxiliary model).
_USER_SURFACES: Final = frozenset({"cli", "gateway"})
#: The tool Hermes asks approval for: its dangerous-command check guards the ``terminal`` tool,
#: and the approval hooks name no tool (``tool_name: null``).
APPROVED_TOOL: Final = "terminal"


def normalize(hook: NotifyHook) -> HookHint | Unmapped:
    """Map one Hermes shell-hook payload to a :class:`HookHint` (pure)."""
    payload = hook.payload
    raw_extra = payload.get("extra")
    extra: dict[str, Any] = raw_extra if isinstance(raw_extra, dict) else {}
    event = first_str(payload, "hook_event_name")
    # The approval hooks carry an empty session_id; their session is extra.session_key.
    session_id = first_str(payload, "session_id") or first_str(extra, "session_key")
    hint = EVENT_HINTS.get(event) if event is not None else None
    if event is None or session_id is None or hint is None:
        return unmapped("hermes", payload, event, hook.at_ms)
    tool = first_str(payload, "tool_name", limit=200)
    summary: str | None = None
    if event == "pre_approval_request":
        if extra.get("surface") in _USER_SURFACES:
            summary = permission_reason(payload, extra)
        else:
            hint = "info"
    elif event == "on_session_end":
        # Per turn; an interrupt says completed too, so `interrupted` decides.
        if extra.get("interrupted") is True or extra.get("completed") is not True:
            hint = "interrupted"
    elif event == "on_session_finalize":
        summary = text(extra.get("reason"))
    return HookHint(
        key=SessionKey("hermes", session_id),
        source="hermes_hook",
        event=event,
        hint=hint,
        at_ms=hook.at_ms,
        observed_at_ms=hook.observed_at_ms,
        turn_id=first_str(extra, "turn_id"),
        tool=tool,
        summary=summary,
        pid=hook.pid,
        start_token=hook.start_token,
    )


def permission_reason(payload: dict[str, Any], extra: dict[str, Any]) -> str:
    """The reason of a ``pre_approval_request``, in the one spelling of every harness
    (:func:`actors.core.session.hints.permission_reason`): ``permission: terminal: rm -rf
    ./junkdir`` -- the command (``extra.command``; else the pattern Hermes matched,
    ``extra.description``, e.g. ``recursive delete``)."""
    tool = first_str(payload, "tool_name", limit=200) or APPROVED_TOOL
    what = text(extra.get("command")) or text(extra.get("description"))
    return hints.permission_reason(tool, what)
