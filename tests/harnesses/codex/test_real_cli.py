"""The real Codex 0.171.0 under ``paneward wrap`` in a real tmux pane: its approval dialog.

It talks to the loopback OpenAI mock (tests/support/mock_apis.py); what the wrapper reports is
read from a listener socket. The binary comes from ``$PANEWARD_AGENT_PREFIX/node_modules/.bin``
(tests/support/agents.py).
"""

from __future__ import annotations

from pathlib import Path

import anyio

import messages
from tests.support.agents import CODEX_CONFIG, agent, stop_codex_leftovers
from tests.support.mock_apis import MockServer
from tests.support.wrap import WRAP, AgentTmuxServer, Frames, base_env, frame_listener
from tests.support.wrapped import (
    explain_failure,
    press_until_approved,
    submit,
    type_keys,
    wait_status,
)


async def test_codex_approval_dialog_is_blocked_under_the_wrapper(
    tmp_path: Path, tmux: AgentTmuxServer, openai: MockServer
) -> None:
    codex = agent("codex")
    home, work, sock = tmp_path / "home", tmp_path / "work", tmp_path / "d.sock"
    for d in (home / ".codex", work, tmp_path / "tmp"):
        d.mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text(CODEX_CONFIG.format(url=openai.url, cwd=work))
    env = base_env(sock) | {
        "HOME": str(home), "TMPDIR": str(tmp_path / "tmp"), "MOCK_OPENAI_API_KEY": "dummy",
    }
    # A -c override keeps the TUI in-process: no shared
    # daemon copied into HOME and left running after the test.
    command = [*WRAP, "--", str(codex), "-c", "analytics.enabled=false"]
    try:
        pane = ""
        seen: list[Frames] = []
        with explain_failure(tmux, lambda: pane, seen), anyio.fail_after(100):
            async with frame_listener(sock) as frames:
                seen.append(frames)
                pane = tmux.start(command, env, width=160, height=50, cwd=work)
                await tmux.wait_text(pane, "Ask Codex to do anything")
                spawned = frames.of(messages.PtySpawned)[0]
                assert isinstance(spawned, messages.PtySpawned)
                assert (spawned.pane, spawned.key.harness) == (pane, "codex")
                mark = await submit(tmux, pane, frames, "please WRITE a file")
                blocked = await wait_status(frames, mark, lambda m: m.state == "blocked")
                assert (blocked.kind, blocked.app) == ("permission", "codex")
                await tmux.wait_text(pane, "Would you like to run")
                mark = await press_until_approved(tmux, pane, frames, "y")
                await wait_status(frames, mark, lambda m: m.state == "done")
                await type_keys(tmux, pane, "/quit")
                tmux.run("send-keys", "-t", pane, "Enter")
                await frames.wait_for(lambda items: any(
                    isinstance(m, messages.PtyExit) for m in items))
                assert await tmux.wait_dead(pane) == 0
    finally:
        stop_codex_leftovers(home)
    exited = frames.of(messages.PtyExit)[0]
    assert isinstance(exited, messages.PtyExit)
    assert (exited.key, exited.pane, exited.code) == (spawned.key, pane, 0)
