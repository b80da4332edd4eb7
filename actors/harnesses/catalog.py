"""Edge normalization: a raw :class:`NotifyHook` to a hint, by harness.

Called by the supervisor before routing (a hook's session key is inside its
payload). Pure.
"""

from __future__ import annotations

from actors.core.hints import unmapped
from actors.harnesses.claude_code import hooks as claude
from actors.harnesses.codex import hooks as codex
from actors.harnesses.cursor import hooks as cursor
from messages.activity import Unmapped
from messages.evidence import HookHint, NotifyHook

__all__ = ["normalize_hook"]


def normalize_hook(hook: NotifyHook) -> HookHint | Unmapped:
    """Normalize ``hook`` with its harness module; other harnesses send no hooks."""
    if hook.harness == "claude-code":
        return claude.normalize(hook)
    if hook.harness == "codex":
        return codex.normalize(hook)
    if hook.harness == "cursor":
        return cursor.normalize(hook)
    event = hook.payload.get("hook_event_name")
    name = event if isinstance(event, str) else None
    return unmapped(hook.harness, hook.payload, name, hook.at_ms)
