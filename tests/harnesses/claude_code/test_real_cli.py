"""The real Claude Code 2.1.332 under ``paneward wrap`` in a real tmux pane.

It talks to the loopback Anthropic mock (tests/support/mock_apis.py); what the wrapper reports is
read from a listener socket. The binary comes from ``$PANEWARD_AGENT_PREFIX/node_modules/.bin``
(tests/support/agents.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

import messages
from tests.support.agents import API_KEY, agent
from tests.support.mock_apis import MockServer
from tests.support.wrap import WRAP, AgentTmuxServer, Frames, base_env, frame_listener
from tests.support.wrapped import (
    explain_failure,
    is_main,
    press_until_approved,
    statuses,
    submit,
    type_keys,
    wait_status,
)


async def test_claude_code_status_under_the_wrapper(
    tmp_path: Path, tmux: AgentTmuxServer, anthropic: MockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude = agent("claude")
    # A developer's own CLAUDE_CONFIG_DIR must not reach the agent in the pane (through the
    # tmux server's global environment it would, and Claude would show its first-run
    # screens): the pane's program gets exactly `env` below.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "the-callers-config-dir"))
    home, work, sock = tmp_path / "home", tmp_path / "work", tmp_path / "d.sock"
    for d in (home, work, tmp_path / "tmp"):
        d.mkdir()
    # Skip the first-run screens.
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True,
        "lastOnboardingVersion": "2.1.332",
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
        "projects": {str(work): {"hasTrustDialogAccepted": True, "allowedTools": []}},
    }))
    env = base_env(sock) | {
        "HOME": str(home), "TMPDIR": str(tmp_path / "tmp"),
        "CLAUDE_CODE_TMPDIR": str(tmp_path / "tmp"), "ANTHROPIC_BASE_URL": anthropic.url,
        "ANTHROPIC_API_KEY": API_KEY, "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
    pane = ""
    seen: list[Frames] = []
    with explain_failure(tmux, lambda: pane, seen), anyio.fail_after(100):
        async with frame_listener(sock) as frames:
            seen.append(frames)
            pane = tmux.start([*WRAP, "--", str(claude), "--permission-mode", "manual"], env,
                              width=160, height=50, cwd=work)
            # The probe is answered (inside tmux, by the wrapper): Claude turns records on.
            await wait_status(frames, 0, lambda m: m.state == "idle")
            spawned = frames.of(messages.PtySpawned)[0]
            assert isinstance(spawned, messages.PtySpawned)
            assert spawned.pane == pane
            assert spawned.key.harness == "claude-code"
            await tmux.wait_text(pane, "manual")

            mark = await submit(tmux, pane, frames, "hello there")
            await wait_status(frames, mark, lambda m: m.state == "done")

            mark = await submit(tmux, pane, frames, "please WRITE a file")
            blocked = await wait_status(frames, mark, lambda m: m.state == "blocked")
            assert (blocked.kind, blocked.message) == ("permission",
                                                       "approve Bash: echo hi > hi.txt")
            assert blocked.app == "claude-code" and blocked.key == spawned.key
            await tmux.wait_text(pane, "Do you want to proceed?")
            # "1. Yes" is preselected.
            mark = await press_until_approved(tmux, pane, frames, "Enter")
            await wait_status(frames, mark, lambda m: m.state == "done")
            assert (work / "hi.txt").read_text() == "hi\n"

            anthropic.stalled.clear()
            # The mock stalls this answer mid-stream: the turn is reported as working for as
            # long as it stalls, so here working itself must be seen.
            mark = await submit(tmux, pane, frames, "be SLOW", frozenset({"working"}))
            # Esc only once the answer is streaming (and stalled): an interrupt mid-turn.
            assert await anyio.to_thread.run_sync(anthropic.stalled.wait, 30)
            tmux.run("send-keys", "-t", pane, "Escape")
            await wait_status(frames, mark, lambda m: m.state == "idle")
            assert "done" not in [m.state for m in statuses(frames, mark) if is_main(m)]

            # The interrupted prompt comes back into the input line: erase it first.
            tmux.run("send-keys", "-t", pane, "-N", "20", "BSpace")
            await type_keys(tmux, pane, "/exit")
            tmux.run("send-keys", "-t", pane, "Enter")
            await frames.wait_for(lambda items: any(
                isinstance(m, messages.PtyExit) for m in items))
            assert await tmux.wait_dead(pane) == 0
    exited = frames.of(messages.PtyExit)[0]
    assert isinstance(exited, messages.PtyExit)
    assert (exited.key, exited.pane, exited.code, exited.signal) == (spawned.key, pane, 0, None)
    assert statuses(frames, 0)[-1].state == "clear"
