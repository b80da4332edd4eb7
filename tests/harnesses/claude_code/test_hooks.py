"""Claude Code's hooks (actors/harnesses/claude_code/hooks.py): the background work its ``Stop``
lists, from the real capture (tests/fixtures/hooks/claude-hooks.jsonl) and from crafted lists.
"""

from __future__ import annotations

from typing import Any

import pytest

from actors.harnesses.claude_code.hooks import background_work
from tests.support.captures import hook_hint, hook_payloads


def test_stop_lists_the_background_work_still_in_flight() -> None:
    events = [hook_hint("claude-code", p) for p in hook_payloads("claude-hooks.jsonl")]
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
