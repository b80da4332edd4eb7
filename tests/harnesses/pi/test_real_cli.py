"""The real Pi 0.73.1 in a pane of a private tmux server, with paneward's extension installed by
``paneward install-hooks pi``, against the loopback Chat Completions mock
(tests/support/mock_apis.py), driven by keys as a user would drive it: a tool turn, an interrupt
and the exit; Pi killed with SIGKILL after a finished turn says ``■ exited · done`` until seen.

Nothing is injected: the CLI fires its hooks, the hook client (or the in-process forwarder)
sends them to the real daemon, which binds the session to its pane by process identity
(tests/support/lab.py). The CLI comes from its cache (tests/support/agents.py).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
from pathlib import Path

import anyio
import psutil
import pytest

from actors.sources import procfs
from tests.support.agents import cli
from tests.support.lab import Lab, lab
from tests.support.mock_apis import MockServer
from tests.support.polling import poll_until
from tests.support.tmux import TmuxServer

pytestmark = [
    pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="pane binding needs Linux /proc"),
    pytest.mark.timeout(300),
]


async def test_pi_extension_through_the_daemon_to_its_pane(
    tmp_path: Path, server: TmuxServer, chat: MockServer
) -> None:
    pi = cli("pi")
    async with lab(tmp_path, server) as world:
        _pi_models(world, chat)
        said = world.install("pi", {})
        assert "no permission prompt" in said
        with anyio.fail_after(240):
            await world.start([os.fspath(pi), "--provider", "mock", "--model", "mock-model"], {})
            await world.wait_text("paneward.ts")  # Pi lists the extensions it loaded
            await world.shows("unknown")  # session_start: bound, no turn yet
            assert await world.option("@paneward_harness") == "pi"

            await world.submit("please TOOL now", "idle", "turn_done")

            chat.stalled.clear()
            await world.submit("be SLOW now", "working")
            assert await anyio.to_thread.run_sync(chat.stalled.wait, 30)
            await world.press_until("Escape", "idle", "")  # stopReason "aborted": no turn_done
            await world.wait_text("Operation aborted")

            gone = await world.quit("/quit", "pi")
            assert gone["evidence"]["source"] == "pi_extension"  # session_shutdown
            assert gone["attention"] is None


async def test_pi_killed_after_a_finished_turn_says_exited_until_seen(
    tmp_path: Path, server: TmuxServer, chat: MockServer
) -> None:
    """Pi killed with SIGKILL after a turn it finished: the pane it ran in (its shell stays)
    says the agent is gone with the done nobody saw (``■ exited · done``), and is a plain shell
    with no option of paneward's once the user has looked at it."""
    pi = cli("pi")
    async with lab(tmp_path, server) as world:
        _pi_models(world, chat)
        world.install("pi", {})
        with anyio.fail_after(240):
            command = shlex.join([os.fspath(pi), "--provider", "mock", "--model", "mock-model"])
            pane = await world.start(["sh", "-c", f"{command}; exec sleep 600"], {})
            await world.wait_text("paneward.ts")
            await world.shows("unknown")
            await world.submit("please TOOL now", "idle", "turn_done")
            root = psutil.Process(int(await server.arun(
                "display-message", "-p", "-t", pane, "#{pane_pid}")))
            [agent] = root.children()  # the shell's one child: Pi's node process
            os.kill(agent.pid, signal.SIGKILL)

            async def badge(want: str | None) -> bool:
                return await world.option("@paneward_badge") == want

            await poll_until(lambda: badge("■ exited · done"), "exited · done", within=60,
                             interval=0.05)
            assert await world.option("@paneward_presence") == "persisted"
            assert (await world.activity("pi"))["attention"]["kind"] == "turn_done"
            await server.arun("select-pane", "-t", pane)  # the user looks at it

            async def bare() -> bool:
                return await server.pane_option_names(pane) == []

            await poll_until(bare, "a plain shell again", within=60, interval=0.05)
            seen = await world.activity("pi")
            assert (seen["presence"], seen["attention"], seen["pane"]) == ("persisted", None, None)


def _pi_models(world: Lab, chat: MockServer) -> None:
    """Pi's model list: one model, served by the loopback Chat Completions mock."""
    agent = world.home / ".pi" / "agent"
    agent.mkdir(parents=True)
    (agent / "models.json").write_text(json.dumps({"providers": {"mock": {
        "baseUrl": f"{chat.url}/v1", "api": "openai-completions", "apiKey": "mock-key",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": "mock-model"}],
    }}}))
