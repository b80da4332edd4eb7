"""The real OpenCode 1.18.33 in a pane of a private tmux server, with paneward's plugin installed
by ``paneward install-hooks opencode``, against the loopback Chat Completions mock
(tests/support/mock_apis.py), driven by keys as a user would drive it: a tool turn, the
permission wait, an interrupt and the exit.

Nothing is injected: the CLI fires its hooks, the hook client (or the in-process forwarder)
sends them to the real daemon, which binds the session to its pane by process identity
(tests/support/lab.py). The CLI comes from its cache (tests/support/agents.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from actors.sources import procfs
from tests.support.agents import cli
from tests.support.lab import lab
from tests.support.mock_apis import MockServer
from tests.support.tmux import TmuxServer

pytestmark = [
    pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="pane binding needs Linux /proc"),
    pytest.mark.timeout(300),
]


async def test_opencode_plugin_through_the_daemon_to_its_pane(
    tmp_path: Path, server: TmuxServer, chat: MockServer
) -> None:
    opencode = cli("opencode")
    async with lab(tmp_path, server) as world:
        config = world.home / ".config" / "opencode"
        config.mkdir(parents=True)
        (config / "opencode.json").write_text(json.dumps({
            "model": "mock/mock-model", "small_model": "mock/mock-model", "autoupdate": False,
            "share": "disabled",
            "provider": {"mock": {
                "npm": "@ai-sdk/openai-compatible", "name": "Mock",
                "options": {"baseURL": f"{chat.url}/v1", "apiKey": "mock-key"},
                "models": {"mock-model": {"name": "Mock Model", "tool_call": True}},
            }},
            "permission": {"bash": "ask", "edit": "ask"},
        }))
        said = world.install("opencode", {})
        assert "without waiting for it" in said
        env = {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"}
        with anyio.fail_after(240):
            await world.start([os.fspath(opencode)], env)
            await world.wait_text("Ask anything")

            # bash is "ask": the permission wait (session.status stays busy meanwhile).
            await world.submit("please TOOL now", "needs_input", "needs_input")
            await world.wait_text("Permission required")
            reason = (await world.activity("opencode"))["attention"]["reason"]
            assert reason == "permission: bash: echo hi"
            assert await world.option("@paneward_harness") == "opencode"
            await world.press_until("Enter", "idle", "turn_done")  # "Allow once"

            chat.stalled.clear()
            await world.submit("be SLOW now", "working")
            assert await anyio.to_thread.run_sync(chat.stalled.wait, 30)
            # Esc twice interrupts: MessageAbortedError, then idle -- not a completion.
            await world.keys("Escape")
            await world.press_until("Escape", "idle", "")
            await world.wait_text("interrupted")
            assert (await world.activity("opencode"))["evidence"]["native_state"] == (
                "session.idle"
            )

            # server.instance.disposed does not reach the plugin before opencode ends: the
            # process's death is the proof (pid watcher), and it was idle -- nothing failed.
            gone = await world.quit("/exit", "opencode")
            assert gone["attention"] is None
            assert gone["evidence"]["source"] == "pid_probe"
