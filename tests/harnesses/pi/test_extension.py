"""paneward's Pi extension under the real ``node`` with the captured events (tests/fixtures/pi/),
sending real frames to a real socket: the agent events and the turns they publish, an
interrupted turn not taken for a completion.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.harnesses import catalog
from actors.harnesses.pi import install as pi_install
from messages import NotifyHook
from tests.support import FIXTURES
from tests.support.captures import lines
from tests.support.forwarders import run_forwarder
from tests.support.reference_model import SessionTable


def _pi_events() -> list[list[Any]]:
    """The captured headless TOOL run (event names in order), then an interactive run that
    the user interrupts (its last message stops as ``aborted``)."""
    out: list[list[Any]] = []
    for record in lines(FIXTURES / "pi" / "extension.jsonl"):
        event: dict[str, Any] = {"type": record["ev"]}
        if "toolName" in record:
            event["toolName"] = record["toolName"]
        if record["ev"] == "agent_end":
            event["messages"] = [{"role": "assistant", "stopReason": "stop"}]
        out.append([record["ev"], event, record["session_id"]])
    sid = "s-esc"
    out += [
        ["session_start", {"type": "session_start", "reason": "startup"}, sid],
        ["agent_start", {"type": "agent_start"}, sid],
        ["agent_end", {"type": "agent_end", "messages": [{"stopReason": "aborted"}]}, sid],
    ]
    return out


async def test_pi_extension_forwards_agent_events(tmp_path: Path) -> None:
    frames = await run_forwarder(tmp_path, "pi", pi_install.extension_text(), _pi_events())
    hooks = [f for f in frames if isinstance(f, NotifyHook)]
    assert [h.payload["hook_event_name"] for h in hooks] == [
        "session_start", "agent_start", "tool_execution_start", "tool_execution_end",
        "agent_end", "session_shutdown", "session_start", "agent_start", "agent_end",
    ]
    assert hooks[2].payload["tool_name"] == "bash"
    assert hooks[-1].payload["stop_reason"] == "aborted"
    table = SessionTable(catalog.normalize, catalog.PROOF_TABLE)
    shown = [
        (str(t.key), t.after.presence, t.after.turn, t.after.attention and t.after.attention.kind)
        for h in hooks for t in table.apply(h)
    ]
    tool_run = "pi:01a230d9-f3b4-7302-873b-6db83e2644a1"
    assert shown == [
        (tool_run, "running", "unknown", None),
        (tool_run, "running", "working", None),
        (tool_run, "running", "idle", "turn_done"),
        (tool_run, "persisted", "unknown", "turn_done"),  # session_shutdown
        ("pi:s-esc", "running", "unknown", None),
        ("pi:s-esc", "running", "working", None),
        ("pi:s-esc", "running", "idle", None),  # aborted: not a completion
    ]
