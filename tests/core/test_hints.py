"""What the harness packages make of real hook payloads: the reasons and the background work.

The payloads are the real captures of Claude Code 2.1.332 and Codex 0.171.0
(tests/fixtures/hooks/claude-hooks.jsonl, codex-hooks.jsonl: ``stdin`` is the hook's payload).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import messages
from actors.core.hints import blocked_reason, permission_reason
from actors.harnesses.catalog import normalize_hook
from actors.harnesses.claude_code.hooks import background_work
from tests import support

FIXTURES = support.FIXTURES / "hooks"
AT = 1_795_995_370_000


def payloads(name: str) -> list[dict[str, Any]]:
    lines = (FIXTURES / name).read_text().splitlines()
    return [json.loads(line)["stdin"] for line in lines if line.strip()]


def hint(harness: messages.Harness, payload: dict[str, Any]) -> messages.HookHint:
    out = normalize_hook(messages.NotifyHook(harness=harness, payload=payload, at_ms=AT,
                                             observed_at_ms=AT))
    assert isinstance(out, messages.HookHint), out
    return out


def test_one_reason_for_one_permission_wait_whoever_saw_it() -> None:
    # Claude's hook, Codex's hook and Claude's own OSC 7501 record of the same dialog
    claude = next(p for p in payloads("claude-hooks.jsonl")
                  if p["hook_event_name"] == "PermissionRequest")
    codex = next(p for p in payloads("codex-hooks.jsonl")
                 if p["hook_event_name"] == "PermissionRequest")
    expected = "permission: Bash: echo hi > hi.txt"
    assert hint("claude-code", claude).summary == expected
    assert hint("codex", codex).summary == expected
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


def test_stop_lists_the_background_work_still_in_flight() -> None:
    events = [hint("claude-code", p) for p in payloads("claude-hooks.jsonl")]
    stops = [h for h in events if h.event in ("Stop", "SubagentStop")]
    # the AGENT prompt: SubagentStop and Stop list the agent as running; the next Stop is empty
    agent = "a9b521f8f60e6c2e5"
    assert [h.background for h in stops if h.background] == [(agent,), (agent,)]
    assert all(h.background == () for h in stops if h.background != (agent,))
    assert all(h.background is None for h in events if h.event not in ("Stop", "SubagentStop"))


@pytest.mark.parametrize(
    ("tasks", "ids"),
    [
        ([{"id": "a1", "type": "subagent", "status": "running"}], ("a1",)),
        ([{"id": "s1", "type": "shell", "status": "running"}], ()),  # an idle turn, as ever
        ([{"id": "w", "type": "workflow", "status": "pending"},
          {"id": "m", "type": "monitor", "status": "running"}], ("w", "m")),
        ([{"id": "a1", "type": "subagent"}, {"id": "a1", "type": "subagent"}], ("a1",)),
        ([{"type": "subagent"}, "junk", {"id": "", "type": "x"}, {"id": 5}], ()),
        ([], ()),
    ],
)
def test_background_work(tasks: list[Any], ids: tuple[str, ...]) -> None:
    assert background_work({"background_tasks": tasks}) == ids


def test_no_list_is_not_an_empty_list() -> None:
    assert background_work({}) is None
    assert background_work({"background_tasks": "running"}) is None
