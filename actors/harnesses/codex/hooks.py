"""Codex CLI: how its ``notify`` payload and its hooks map to normalized hints.

Facts (captures in tests/fixtures/hooks/): ``notify`` passes
``{"type":"agent-turn-complete","thread-id","turn-id",...}`` as the last argv
element, once per completed turn, also for the TUI's hidden title thread (which
has no rollout: the reducer ignores completions for threads without rollout
evidence). Codex hooks (``hooks.json``) send Claude-shaped payloads with
``session_id`` = thread id. The rollout discovery actor lives in
:mod:`actors.harnesses.codex.rollouts`.
"""

from __future__ import annotations

from typing import Final

from actors.core.session.hints import first_str, fold_name, permission_reason, text, unmapped
from messages.activity import Unmapped
from messages.common import SessionKey
from messages.evidence import HintKind, HookHint, NotifyHook

__all__ = ["HOOK_HINTS", "INSTALLED_EVENTS", "normalize"]

#: Every ``hooks.json`` event paneward maps, by Codex's own names, in the order install-hooks
#: writes them; any other event is counted as unmapped.
HOOK_HINTS: Final[dict[str, HintKind]] = {
    "SessionStart": "start",
    "SessionEnd": "ended",
    "UserPromptSubmit": "working",
    "PreToolUse": "working",
    "PostToolUse": "working",
    "PermissionRequest": "needs_input",
    "Stop": "completed",
}
_HINTS_BY_NAME: Final = {fold_name(name): hint for name, hint in HOOK_HINTS.items()}
#: What ``paneward install-hooks codex`` writes into ``hooks.json`` (:mod:`.install`): exactly
#: the events mapped above (``notify`` is configured apart, in ``config.toml``).
INSTALLED_EVENTS: Final[tuple[str, ...]] = tuple(HOOK_HINTS)
# Notify types that end a turn without completing it.
_INTERRUPT_WORDS: Final = ("interrupt", "abort", "cancel", "incomplete")


def normalize(hook: NotifyHook) -> HookHint | Unmapped:
    """Map one Codex notify or hook payload to a :class:`HookHint` (pure)."""
    payload = hook.payload
    event = first_str(payload, "hook_event_name")
    if event is not None:
        return _normalize_hook(hook, event)
    kind = first_str(payload, "type")
    thread = first_str(payload, "thread-id", "thread_id")
    if kind is None or thread is None:
        return unmapped("codex", payload, kind, hook.at_ms)
    folded = fold_name(kind)
    hint: HintKind
    if folded == "agentturncomplete":
        hint = "completed"
    elif any(word in folded for word in _INTERRUPT_WORDS):
        hint = "interrupted"
    else:
        return unmapped("codex", payload, kind, hook.at_ms)
    return HookHint(
        key=SessionKey("codex", thread),
        source="codex_notify",
        event=kind,
        hint=hint,
        at_ms=hook.at_ms,
        observed_at_ms=hook.observed_at_ms,
        turn_id=first_str(payload, "turn-id", "turn_id"),
        pid=hook.pid,
        start_token=hook.start_token,
    )


def _normalize_hook(hook: NotifyHook, event: str) -> HookHint | Unmapped:
    payload = hook.payload
    thread = first_str(payload, "session_id", "thread_id")
    folded = fold_name(event)
    hint = _HINTS_BY_NAME.get(folded)
    if thread is None or hint is None:
        return unmapped("codex", payload, event, hook.at_ms)
    tool = first_str(payload, "tool_name", limit=200)
    summary = None
    if hint == "needs_input":
        tool_input = payload.get("tool_input")
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        summary = permission_reason(tool, command)
    elif hint == "ended":
        summary = text(payload.get("reason"))
    return HookHint(
        key=SessionKey("codex", thread),
        source="codex_hook",
        event=event,
        hint=hint,
        at_ms=hook.at_ms,
        observed_at_ms=hook.observed_at_ms,
        turn_id=first_str(payload, "turn_id"),
        tool=tool,
        summary=summary,
        pid=hook.pid,
        start_token=hook.start_token,
    )
