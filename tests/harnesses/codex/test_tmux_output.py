"""The real Codex 0.171.0 in tmux panes, seen from its own OSC 7501 records in tmux's output stream.

``paneward run --tmux`` without paneward's hooks and with the Codex daemon source off
(``--no-codex-daemon``): every turn edge a pane shows comes from the records Codex writes into
it, read from control-mode ``%output`` (actors/sinks/tmux_output.py), against the loopback
Responses mock (tests/support/mock_apis.py). Codex in its default daemon mode (the shared
app-server daemon copied into the test's ``HOME``), with ``--no-daemon`` in two panes at once
(discovery off: nothing but the pane mapper and the output), and behind ``ssh`` to a loopback
sshd the test starts (tests/support/ssh.py): the local pane shows the remote agent.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from tests.support.agents import agent, codex_home, stop_codex_leftovers
from tests.support.daemon import DaemonProcess, daemon_env, watching
from tests.support.mock_apis import MockServer
from tests.support.polling import poll_until
from tests.support.real_panes import (
    STEP_S,
    Panes,
    agent_env,
    explain,
    keepalive_tmux,
    press_until,
    submit,
    type_keys,
)
from tests.support.ssh import SshWorld, sshd_binary
from tests.support.wrap import AgentTmuxServer


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[AgentTmuxServer]:
    yield from keepalive_tmux(tmp_path)


@asynccontextmanager
async def paneward(
    tmux: AgentTmuxServer, tmp: Path, home: Path, *extra: str, discovery: bool = True
) -> AsyncIterator[Panes]:
    """``paneward run --tmux --no-codex-daemon`` for the agents under ``home``,
    hooks never installed."""
    state = tmp / "state"
    env = daemon_env(state, HOME=str(home), CODEX_HOME=str(home / ".codex"),
                     CLAUDE_CONFIG_DIR=str(home / ".claude"))
    args = ["--tmux", "-L", tmux.name, "--no-codex-daemon", "--notify", "none",
            *extra]
    async with (
        DaemonProcess(state, discovery=discovery, env=env, extra_args=args) as daemon,
        watching(daemon) as watcher,
    ):
        panes = Panes(tmux, daemon, watcher)
        try:
            yield panes
        except BaseException:
            await explain(tmux, daemon, watcher)
            with anyio.CancelScope(shield=True):
                print("output:", (await daemon.counters())["tmux"].get("output"))
            raise


async def bound(panes: Panes, pane: str) -> None:
    """Until ``pane`` shows a live Codex session whose output is read."""

    async def check() -> bool:
        if panes.option(pane, "@paneward_harness") != "codex":
            return False
        return panes.option(pane, "@paneward_presence") == "running"

    await poll_until(check, f"{pane}: a live Codex session", within=STEP_S, interval=0.02)


async def source(panes: Panes, pane: str) -> str:
    return (await panes.shown(pane)).evidence.source


async def approval_turn(panes: Panes, pane: str, work: Path) -> None:
    """WRITE: working, the approval wait, ``y``, working, done -- each from the pane's records."""
    mark = await submit(panes, pane, "please WRITE a file", started={"working", "needs_input"})
    await panes.wait(pane, turn="needs_input", attention="needs_input")
    assert await source(panes, pane) == "tmux_output"
    await panes.tmux.wait_text(pane, "Would you like to run")
    approved = panes.seq
    await press_until(panes, pane, "y", "idle", "turn_done")
    assert await source(panes, pane) == "tmux_output"
    assert (work / "hi.txt").read_text() == "hi\n"
    turns = [row[2] for row in await panes.history(pane, mark)]
    # From the turn's start on (the first row may still show the state before it).
    turns = turns[next(i for i, t in enumerate(turns) if t in ("working", "needs_input")) :]
    assert turns[:2] in (["working", "needs_input"], ["needs_input", "working"]), turns
    assert turns[-1] == "idle", turns
    after = [row[2] for row in await panes.history(pane, approved)]
    assert after[-1] == "idle", after


async def interrupted_turn(panes: Panes, pane: str, openai: MockServer) -> None:
    """A stalled turn is working; Esc makes it idle without turn_done."""
    openai.stalled.clear()
    mark = await submit(panes, pane, "be SLOW", started={"working"})
    assert await anyio.to_thread.run_sync(openai.stalled.wait, 30)
    await panes.wait(pane, turn="working")
    panes.tmux.run("send-keys", "-t", pane, "Escape")
    await panes.wait(pane, turn="idle", attention="")
    assert await source(panes, pane) == "tmux_output"
    rows = await panes.history(pane, mark)
    # From the turn's start on (the first rows may still show the last turn's done).
    started = next(i for i, row in enumerate(rows) if row[2] == "working")
    assert "turn_done" not in [row[3] for row in rows[started:]], rows


async def test_codex_in_daemon_mode_without_hooks_or_daemon_source_shows_every_edge(
    tmp_path: Path, tmux: AgentTmuxServer, openai: MockServer
) -> None:
    codex = agent("codex")
    home, work = codex_home(tmp_path, openai.url)
    try:
        async with paneward(tmux, tmp_path, home) as panes:
            env = agent_env(panes, home, tmp_path, MOCK_OPENAI_API_KEY="dummy")
            with anyio.fail_after(400):
                a = panes.tmux.start([str(codex)], env, width=160, height=50, cwd=work)
                await tmux.wait_text(a, "Ask Codex to do anything")
                await bound(panes, a)
                await approval_turn(panes, a, work)
                await interrupted_turn(panes, a, openai)
                counters = (await panes.daemon.counters())["tmux"]["output"]
                assert counters["emitted"] >= 6 and counters["unattributed"] == 0, counters
    finally:
        stop_codex_leftovers(home)


async def test_two_codex_panes_without_the_daemon_each_show_their_own(
    tmp_path: Path, tmux: AgentTmuxServer, openai: MockServer
) -> None:
    codex = agent("codex")
    home, work = codex_home(tmp_path, openai.url)
    try:
        # Discovery off: no rollouts, no daemon; the pane mapper and the panes' output only.
        async with paneward(tmux, tmp_path, home, discovery=False) as panes:
            env = agent_env(panes, home, tmp_path, MOCK_OPENAI_API_KEY="dummy")
            with anyio.fail_after(400):
                a = panes.tmux.start([str(codex), "--no-daemon"], env, width=160, height=50,
                                     cwd=work)
                b = panes.tmux.start([str(codex), "--no-daemon"], env, width=160, height=50,
                                     cwd=work)
                for pane in (a, b):
                    await tmux.wait_text(pane, "Ask Codex to do anything")
                    await bound(panes, pane)
                key_a, key_b = (await panes.shown(a)).key, (await panes.shown(b)).key
                assert key_a != key_b
                await approval_turn(panes, a, work)
                assert panes.option(b, "@paneward_attention") == ""  # B did not take it on
                mark = await submit(panes, b, "hello from pane two",
                                     started={"working", "idle"})
                await panes.wait(b, turn="idle", attention="turn_done")
                assert await source(panes, b) == "tmux_output"
                assert {row[1] for row in await panes.history(b, mark)} == {str(key_b)}
                assert panes.option(a, "@paneward_attention") == "turn_done"  # A's own
                await interrupted_turn(panes, a, openai)
    finally:
        stop_codex_leftovers(home)


@pytest.mark.skipif(sshd_binary() is None, reason="sshd is not installed")
async def test_codex_behind_ssh_shows_on_the_local_pane(
    tmp_path: Path, tmux: AgentTmuxServer, openai: MockServer
) -> None:
    codex = agent("codex")
    home, work = codex_home(tmp_path, openai.url)
    world = SshWorld(tmp_path / "ssh")
    try:
        with anyio.fail_after(400):
            await world.add_server("localhost-sshd")
            async with paneward(tmux, tmp_path, home, discovery=False) as panes:
                remote_env = {
                    "HOME": str(home), "TMPDIR": str(tmp_path / "tmp"),
                    "MOCK_OPENAI_API_KEY": "dummy", "PATH": os.environ.get("PATH", "/usr/bin"),
                    "TERM": "xterm-256color",
                }
                remote = (f"cd {shlex.quote(str(work))} && exec env "
                          + " ".join(f"{k}={shlex.quote(v)}" for k, v in remote_env.items())
                          + f" {shlex.quote(str(codex))} --no-daemon")
                env = agent_env(panes, home, tmp_path)
                pane = panes.tmux.start([str(world.ssh), "-tt", "localhost-sshd", remote], env,
                                        width=160, height=50, cwd=work)
                await tmux.wait_text(pane, "Ask Codex to do anything")
                # Nothing local runs Codex: the pane runs ssh, and Codex's first record binds
                # the pane to the ssh client's own session.
                mark = await submit(panes, pane, "please WRITE a file",
                                     started={"working", "needs_input"})
                await panes.wait(pane, turn="needs_input", attention="needs_input")
                shown = await panes.shown(pane)
                assert shown.key.harness == "codex" and shown.key.session_id.startswith("ssh-")
                assert shown.presence == "running" and shown.evidence.source == "tmux_output"
                await tmux.wait_text(pane, "Would you like to run")
                await press_until(panes, pane, "y", "idle", "turn_done")
                assert {row[1] for row in await panes.history(pane, mark)} == {str(shown.key)}
                # Codex quits, ssh with it: the session ends with its ssh client.
                await type_keys(tmux, pane, "/quit")
                for _ in range(10):  # Codex drops an Enter that comes right after typed text
                    panes.tmux.run("send-keys", "-t", pane, "Enter")
                    with anyio.move_on_after(2):
                        await tmux.wait_dead(pane)
                        break

                async def ended() -> bool:
                    return panes.option(pane, "@paneward_presence") == "persisted"

                await poll_until(ended, "the ssh session ended", within=STEP_S)
    finally:
        await world.aclose()
        stop_codex_leftovers(home)
