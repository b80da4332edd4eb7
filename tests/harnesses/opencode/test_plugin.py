"""paneward's OpenCode plugin under the real ``node`` with the captured events
(tests/fixtures/opencode/), sending real frames to a real socket: each event once per run
(loaded twice), the turns they publish, the exit ending every session it saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from actors.harnesses.opencode import hooks as opencode_hooks
from actors.harnesses.opencode import install as opencode_install
from messages import HookHint, NotifyHook
from tests.support import FIXTURES
from tests.support.captures import lines, replay_hooks
from tests.support.forwarders import run_forwarder


def _opencode_events() -> list[dict[str, Any]]:
    return [r["event"] for r in lines(FIXTURES / "opencode" / "tui_plugin.jsonl")
            if r.get("kind") == "event"]


async def test_opencode_plugin_forwards_the_captured_events_once_per_run(tmp_path: Path) -> None:
    frames = await run_forwarder(
        tmp_path, "opencode", opencode_install.plugin_text(), _opencode_events()
    )
    hooks = [f for f in frames if isinstance(f, NotifyHook)]
    assert len(hooks) == len(frames)
    # Its own pid and start token (the plugin is the owner), the frame the hook client builds.
    assert {(h.harness, h.pid is not None, h.start_token is not None) for h in hooks} == {
        ("opencode", True, True)
    }
    events = [(h.payload["hook_event_name"], h.payload.get("status"), h.payload.get("error"))
              for h in hooks]
    # Loaded twice, each event is still sent once; the repeated idle after the Esc is not sent.
    assert events == [
        ("session.status", "busy", None),
        ("session.status", "busy", None),
        ("permission.asked", None, None),
        ("permission.replied", None, None),
        ("session.status", "busy", None),
        ("session.status", "busy", None),
        ("session.status", "busy", None),
        ("session.status", "idle", None),
        ("session.idle", None, None),
        ("session.status", "busy", None),
        ("session.status", "busy", None),
        ("session.error", None, "MessageAbortedError"),
        ("session.status", "idle", None),
        ("session.idle", None, "MessageAbortedError"),
        ("session.status", "idle", None),
    ]
    assert {h.payload["hook_event_name"] for h in hooks} <= set(opencode_hooks.INSTALLED_EVENTS)
    # One count per process across both loads: every frame its own serial.
    assert [h.payload["pw_serial"] for h in hooks] == list(range(1, len(hooks) + 1))
    turns = [
        ("running", "working", None),
        ("running", "needs_input", "needs_input"),  # status stays busy: the wait is its own
        ("running", "working", None),
        ("running", "idle", "turn_done"),
        ("running", "working", None),
        ("running", "idle", None),  # the Esc: MessageAbortedError then idle, no turn_done
    ]
    assert replay_hooks(hooks) == turns
    # The same events all in one millisecond (node sends them that fast): the second turn's
    # busy is not taken for the first turn's, and a frame read twice still counts once.
    at = hooks[0].at_ms
    same_ms = [msgspec.structs.replace(h, at_ms=at, observed_at_ms=at) for h in hooks]
    assert replay_hooks(same_ms) == turns
    assert replay_hooks([h for h in same_ms for _ in (0, 1)]) == turns
    asked = next(h for h in hooks if h.payload["hook_event_name"] == "permission.asked")
    hint = opencode_hooks.normalize(asked)
    assert isinstance(hint, HookHint) and hint.summary == "permission: bash: echo hi"


async def test_opencode_exit_ends_every_session_it_saw(tmp_path: Path) -> None:
    events = [
        {"id": "e1", "type": "session.status",
         "properties": {"sessionID": "ses_a", "status": {"type": "busy"}}},
        {"id": "e2", "type": "session.idle", "properties": {"sessionID": "ses_a"}},
        {"id": "e3", "type": "message.updated", "properties": {"sessionID": "ses_a"}},
        {"id": "e4", "type": "server.instance.disposed", "properties": {"directory": "/w"}},
    ]
    frames = await run_forwarder(tmp_path, "opencode", opencode_install.plugin_text(), events)
    assert [f.payload for f in frames if isinstance(f, NotifyHook)] == [
        {"hook_event_name": "session.status", "session_id": "ses_a", "status": "busy",
         "pw_serial": 1},
        {"hook_event_name": "session.idle", "session_id": "ses_a", "pw_serial": 2},
        {"hook_event_name": "server.instance.disposed", "session_id": "ses_a", "pw_serial": 3},
    ]
