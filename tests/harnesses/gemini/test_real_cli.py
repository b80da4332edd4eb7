"""The real Gemini CLI 0.61.0 in a pane of a private tmux server, with paneward's hooks installed by
``paneward install-hooks gemini``, against the loopback Gemini API mock
(tests/support/mock_apis.py ``streamGenerateContent``), driven by keys as a user would drive it:
a tool turn, the permission wait, an interrupt (Gemini's Esc is an ``AfterAgent`` like a
completion: the declared limit is what shows) and the exit.

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


async def test_gemini_cli_hooks_through_the_daemon_to_its_pane(
    tmp_path: Path, server: TmuxServer, gemini_api: MockServer
) -> None:
    gemini = cli("gemini")
    async with lab(tmp_path, server) as world:
        settings = world.home / ".gemini" / "settings.json"
        settings.parent.mkdir()
        settings.write_text(json.dumps({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        }, indent=2))
        said = world.install("gemini", {})
        assert "only the events paneward needs are installed" in said
        env = {
            "GEMINI_API_KEY": "mock-key",
            "GOOGLE_GEMINI_BASE_URL": gemini_api.url,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        }
        with anyio.fail_after(240):
            await world.start([os.fspath(gemini), "-m", "gemini-2.5-flash"], env)
            await world.wait_text("Type your message")
            # SessionStart: the hook's parent (Gemini's node process) is a live owner below
            # the pane's root -- bound to the pane, turn not yet known.
            await world.shows("unknown")
            assert await world.option("@paneward_harness") == "gemini"
            assert await world.option("@paneward_presence") == "running"

            await world.submit("please TOOL now", "idle", "turn_done")
            assert "Shell echo hi" in await world.screen()

            (world.work / "junkdir").mkdir()
            await world.submit("please DANGER now", "needs_input", "needs_input")
            await world.wait_text("Allow execution of")
            needs = await world.activity("gemini")
            assert needs["attention"]["reason"] == "permission: run_shell_command: rm -rf ./junkdir"
            # The answer has no event: the AfterTool that follows closes the wait.
            await world.press_until("Enter", "idle", "turn_done")
            assert not (world.work / "junkdir").exists()

            gemini_api.stalled.clear()
            await world.submit("be SLOW now", "working")
            assert await anyio.to_thread.run_sync(gemini_api.stalled.wait, 30)
            await world.keys("Escape")
            # What Gemini can prove: an Esc ends the turn with an AfterAgent like any other,
            # with no flag -- so the interrupted turn shows as done (declared in its PROOFS).
            await world.shows("idle", "turn_done")
            await world.wait_text("Request cancelled")

            done = await world.quit("/quit", "gemini")
            assert done["attention"]["kind"] == "turn_done"
            assert done["evidence"]["source"] == "gemini_hook"
            assert done["evidence"]["native_state"] == "exit"  # SessionEnd reason
