"""Gemini CLI's hooks from the real capture (tests/fixtures/gemini/) through normalize and the
reducer: the turns the screen showed, the permission reason, the notifications it does not map.
"""

from __future__ import annotations

import messages
from actors.harnesses.gemini import hooks as gemini_hooks
from messages import HookHint, NotifyHook
from tests.support import FIXTURES
from tests.support.captures import captured_hooks, replay_hooks


def test_gemini_capture_replays_to_the_turns_the_screen_showed() -> None:
    hooks = captured_hooks(
        "gemini", FIXTURES / "gemini" / "interactive_hooks.jsonl", gemini_hooks.INSTALLED_EVENTS
    )
    # 6 of the 11 events Gemini sent are installed: no AfterModel (41 calls, one per chunk).
    assert [h.payload["hook_event_name"] for h in hooks].count("AfterModel") == 0
    assert replay_hooks(hooks) == [
        ("running", "unknown", None),  # SessionStart
        ("running", "working", None),  # TOOL
        ("running", "idle", "turn_done"),
        ("running", "working", None),  # DANGER
        ("running", "needs_input", "needs_input"),  # Notification ToolPermission
        ("running", "working", None),  # AfterTool: the answer has no event of its own
        ("running", "idle", "turn_done"),
        ("running", "working", None),  # SLOW, then Esc:
        # an AfterAgent like any other (no flag): shown as done, as Gemini's PROOFS declares.
        ("running", "idle", "turn_done"),
        ("persisted", "unknown", "turn_done"),  # SessionEnd (twice: the second changes nothing)
    ]


def test_gemini_permission_reason_and_other_notifications() -> None:
    permission = NotifyHook(harness="gemini", at_ms=10**12 * 2, observed_at_ms=10**12 * 2, payload={
        "hook_event_name": "Notification", "session_id": "s", "notification_type": "ToolPermission",
        "message": "Tool Confirm Shell Command requires execution",
        "details": {"type": "exec", "command": "rm -rf ./junkdir"},
    })
    hint = gemini_hooks.normalize(permission)
    assert isinstance(hint, HookHint)
    assert (hint.hint, hint.summary, hint.source) == (
        "needs_input", "permission: run_shell_command: rm -rf ./junkdir", "gemini_hook"
    )
    other = NotifyHook(harness="gemini", at_ms=10**12 * 2, observed_at_ms=10**12 * 2, payload={
        "hook_event_name": "Notification", "session_id": "s", "notification_type": "Other"})
    assert isinstance(hint := gemini_hooks.normalize(other), HookHint) and hint.hint == "info"
    chunk = NotifyHook(harness="gemini", at_ms=10**12 * 2, observed_at_ms=10**12 * 2,
                       payload={"hook_event_name": "AfterModel", "session_id": "s"})
    assert isinstance(gemini_hooks.normalize(chunk), messages.Unmapped)
