"""The reasons paneward gives for a wait (actors/core/session/hints.py), from the real hook
payloads: one permission reason for a hook and the OSC 7501 record of the same wait, whoever saw it.

The payloads are the real captures of Claude Code 2.1.332 and Codex 0.171.0
(tests/fixtures/hooks/claude-hooks.jsonl, codex-hooks.jsonl: ``stdin`` is the hook's payload).
"""

from __future__ import annotations

import pytest

from actors.core.session.hints import blocked_reason, permission_reason
from tests.support.captures import hook_hint, hook_payloads


def test_one_reason_for_one_permission_wait_whoever_saw_it() -> None:
    # Claude's hook, Codex's hook and Claude's own OSC 7501 record of the same dialog
    claude = next(p for p in hook_payloads("claude-hooks.jsonl")
                  if p["hook_event_name"] == "PermissionRequest")
    codex = next(p for p in hook_payloads("codex-hooks.jsonl")
                 if p["hook_event_name"] == "PermissionRequest")
    expected = "permission: Bash: echo hi > hi.txt"
    assert hook_hint("claude-code", claude).summary == expected
    assert hook_hint("codex", codex).summary == expected
    assert blocked_reason("permission", "approve Bash: echo hi > hi.txt") == expected


@pytest.mark.parametrize(
    ("kind", "message", "reason"),
    [
        ("permission", None, "permission"),  # Codex: no tool, no command in its record
        ("permission", "approve Bash", "permission: Bash"),
        ("permission", "approve  Bash:   echo\nhi", "permission: Bash: echo hi"),
        ("permission", "Pick an option", "Pick an option"),
        (None, None, "blocked"),
        ("question", None, "question"),
    ],
)
def test_blocked_reasons(kind: str | None, message: str | None, reason: str) -> None:
    assert blocked_reason(kind, message) == reason


def test_permission_reasons_stay_one_short_line() -> None:
    assert permission_reason(None, "rm -rf /") == "permission"
    assert permission_reason("Write") == "permission: Write"
    long = permission_reason("Bash", "x" * 10_000)
    assert len(long) < 600 and long.endswith("…")
    assert permission_reason("Bash", {"not": "text"}) == "permission: Bash"
