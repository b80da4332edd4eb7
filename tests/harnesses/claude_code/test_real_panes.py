"""The real Claude Code 2.1.332 in a tmux pane, with ``paneward run --tmux`` (discovery on,
nothing injected), against the loopback Anthropic mock (tests/support/mock_apis.py): a background
subagent the mock stalls keeps the pane working after ``Stop``; ``turn_done`` once it reports
(tests/support/real_panes.py reads the pane back).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.support.agents import API_KEY, agent
from tests.support.mock_apis import MockServer
from tests.support.polling import poll_until
from tests.support.real_panes import (
    STEP_S,
    agent_env,
    install_hooks,
    keepalive_tmux,
    paneward,
    submit,
)
from tests.support.wrap import AgentTmuxServer


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[AgentTmuxServer]:
    """The private tmux server, up before paneward connects to it."""
    yield from keepalive_tmux(tmp_path)


async def test_claude_background_subagent_keeps_the_pane_working_after_stop(
    tmp_path: Path, tmux: AgentTmuxServer, anthropic: MockServer
) -> None:
    claude = agent("claude")
    home, work = tmp_path / "home", tmp_path / "work"
    for d in (home, work, tmp_path / "tmp"):
        d.mkdir()
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True,
        "lastOnboardingVersion": "2.1.332",
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
        "projects": {str(work): {"hasTrustDialogAccepted": True, "allowedTools": []}},
    }))
    async with paneward(tmux, tmp_path, home) as panes:
        install_hooks("claude-code", home, panes.daemon.state_dir)
        env = agent_env(
            panes, home, tmp_path, CLAUDE_CODE_TMPDIR=str(tmp_path / "tmp"),
            ANTHROPIC_BASE_URL=anthropic.url, ANTHROPIC_API_KEY=API_KEY, DISABLE_AUTOUPDATER="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
        )
        with anyio.fail_after(300):
            pane = tmux.start([str(claude), "--permission-mode", "manual"], env, width=160,
                              height=50, cwd=work)
            await tmux.wait_text(pane, "manual")
            await panes.wait(pane, turn="idle", what="the Claude pane idle")
            mark = await submit(panes, pane, "start a background AGENT please",
                                 started={"working"})
            assert await anyio.to_thread.run_sync(anthropic.subagent_stalled.wait, 30)
            # The turn ends (its Stop lists the agent as running in the background) while the
            # agent works: the pane shows working, with one background item.
            await tmux.wait_text(pane, "Waiting for 1 background agent to finish")

            async def stopped() -> bool:
                shown = await panes.shown(pane)
                return shown.evidence.native_state == "Stop"

            await poll_until(stopped, "the turn's Stop", within=STEP_S)
            shown = await panes.shown(pane)
            assert (shown.turn, shown.attention, shown.subagents) == ("working", None, 1)
            assert panes.option(pane, "@paneward_turn") == "working"
            during = await panes.history(pane, mark)
            anthropic.subagent_release.set()
            # The agent reports, Claude runs its <task-notification> turn: turn_done after.
            await panes.wait(pane, turn="idle", attention="turn_done")
            assert all(row[2] == "working" for row in during), during
            first_done = next(
                row[0] for row in await panes.history(pane, mark) if row[3] == "turn_done")
            assert first_done > during[-1][0]
