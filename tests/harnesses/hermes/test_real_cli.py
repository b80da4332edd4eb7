"""The real Hermes Agent 0.19.0 (interactive) in a pane of a private tmux server, with paneward's
hooks installed by ``paneward install-hooks hermes``, against the loopback Chat Completions mock
(tests/support/mock_apis.py), driven by keys as a user would drive it: the consent Hermes asks
for each hook, a tool turn, the permission wait, an interrupt and the exit.

Nothing is injected: the CLI fires its hooks, the hook client (or the in-process forwarder)
sends them to the real daemon, which binds the session to its pane by process identity
(tests/support/lab.py). The CLI comes from its cache (tests/support/agents.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from actors.sources import procfs
from tests.support.agents import cli
from tests.support.lab import lab
from tests.support.mock_apis import MockServer
from tests.support.polling import poll_until
from tests.support.tmux import TmuxServer

pytestmark = [
    pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="pane binding needs Linux /proc"),
    pytest.mark.timeout(300),
]


async def test_hermes_interactive_hooks_through_the_daemon_to_its_pane(
    tmp_path: Path, server: TmuxServer, chat: MockServer
) -> None:
    hermes = cli("hermes")
    async with lab(tmp_path, server) as world:
        hermes_home = world.tmp / "hermes-home"
        hermes_home.mkdir()
        (hermes_home / "config.yaml").write_text(
            "# my Hermes settings\n"
            "model:\n"
            "  provider: custom\n"
            f"  base_url: {chat.url}/v1\n"
            "  default: mock-model\n"
            "  api_key: mock-key\n"
        )
        env = {"HERMES_HOME": os.fspath(hermes_home)}
        said = world.install("hermes", env)
        assert "Allow this hook to run?" in said and "--accept-hooks" in said
        with anyio.fail_after(280):
            await world.start([os.fspath(hermes)], env)
            # The consent Hermes asks once per hook, on its terminal: answered as a user would.
            for n in range(8):
                await world.wait_text("Allow this hook to run?")
                await world.keys("y", "Enter")
                await poll_until(
                    _consents(hermes_home, n + 1), "the answer recorded", within=30, interval=0.1
                )
            await world.wait_text("Welcome to Hermes Agent")
            allow = json.loads((hermes_home / "shell-hooks-allowlist.json").read_text())
            assert len(allow["approvals"]) == 8

            # on_session_start comes with the first prompt, then the turn.
            await world.submit("please TOOL now", "idle", "turn_done")
            assert await world.option("@paneward_harness") == "hermes"

            (world.work / "junkdir").mkdir()
            await world.submit("please DANGER now", "needs_input", "needs_input")
            await world.wait_text("Allow once")
            reason = (await world.activity("hermes"))["attention"]["reason"]
            assert reason == "permission: terminal: rm -rf ./junkdir"
            await world.press_until("Enter", "idle", "turn_done")  # "Allow once" is preselected
            assert not (world.work / "junkdir").exists()

            chat.stalled.clear()
            await world.submit("be SLOW now", "working")
            assert await anyio.to_thread.run_sync(chat.stalled.wait, 30)
            await world.press_until("C-c", "idle", "")  # on_session_end interrupted: no done
            await world.wait_text("Interrupted")

            gone = await world.quit("/exit", "hermes")
            assert gone["evidence"]["native_state"] == "shutdown"  # on_session_finalize


def _consents(home: Path, count: int) -> Callable[[], Awaitable[bool]]:
    """Until Hermes has recorded ``count`` answers in its allowlist."""

    async def recorded() -> bool:
        try:
            approvals = json.loads((home / "shell-hooks-allowlist.json").read_text())["approvals"]
        except (OSError, ValueError, KeyError):
            return False
        return len(approvals) >= count

    return recorded
