"""The real Claude Code 2.1.332 and Codex 0.171.0 CLIs under ``paneward wrap`` in real tmux panes.

They talk to loopback mocks (tests/support/mock_apis.py); what the wrapper reports is read
from a listener socket. Binaries come from ``$PANEWARD_AGENT_PREFIX/node_modules/.bin``
(install: README.md, Reference > Running the tests on a fresh machine). Without them the
tests skip, except under ``CI=true``, where a missing CLI is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final

import anyio
import pytest

import messages
from tests.support.mock_apis import MockServer
from tests.support.wrap import WRAP, Frames, Tmux, base_env, frame_listener

API_KEY = "sk-ant-dummy-key-for-mock-0123456789"


@contextmanager
def _explain_failure(
    tmux: Tmux, pane: Callable[[], str], seen: list[Frames] | None = None
) -> Iterator[None]:
    """On failure, print the pane and the frames (pytest shows them with the failure)."""
    try:
        yield
    except BaseException:
        for frames in seen or []:
            for item in frames.items:
                print(messages.encode(item).decode())
        print(subprocess.run(["ps", "-eo", "pid,ppid,stat,wchan:24,args"], capture_output=True,
                             text=True, check=False).stdout)
        if pane():
            with suppress(Exception):
                print(f"--- pane {pane()} ---\n{tmux.capture(pane())}")
        raise


def _agent(name: str) -> Path:
    prefix = os.environ.get("PANEWARD_AGENT_PREFIX") or str(
        Path(os.environ.get("PANEWARD_NPM_CACHE") or Path.home() / ".cache" / "paneward-npm")
    )
    binary = Path(prefix) / "node_modules" / ".bin" / name
    if not binary.exists():
        message = (
            f"{name} not installed under {prefix}"
            " (see README.md, Reference > Running the tests on a fresh machine)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return binary





def _statuses(frames: Frames, since: int) -> list[messages.ProgramStatus]:
    return [m for m in frames.items[since:] if isinstance(m, messages.ProgramStatus)]


async def _wait_status(
    frames: Frames, since: int, predicate: Callable[[messages.ProgramStatus], bool]
) -> messages.ProgramStatus:
    await frames.wait_for(lambda _: any(predicate(m) for m in _statuses(frames, since)))
    return next(m for m in _statuses(frames, since) if predicate(m))


async def _type(tmux: Tmux, pane: str, text: str) -> int:
    """Type ``text`` and wait until it shows, so Enter is not taken as part of a paste."""
    tmux.run("send-keys", "-t", pane, "-l", text)
    await tmux.wait_text(pane, text)
    return 0


# A turn has started once the program reports any of these. Not only ``working``: a turn the
# mock API answers at once can be reported straight as ``done`` (or ``blocked``, for a tool that
# needs approval) — the programs report their newest state, and two clean-clone runs saw idle ->
# done with no working between.
STARTED: Final = frozenset({"working", "blocked", "done"})


async def _submit(
    tmux: Tmux, pane: str, frames: Frames, text: str, started: frozenset[str] = STARTED
) -> int:
    """Type ``text``, press Enter until a turn has started (a record in ``started``); return
    the frame mark.

    Both CLIs can take an Enter that comes right after typed text as part of a paste (and
    Codex drops its first Enter after start), so Enter is repeated until a turn starts.
    """
    await _type(tmux, pane, text)
    return await _press_until(tmux, pane, frames, "Enter", started)


async def _press_until_approved(tmux: Tmux, pane: str, frames: Frames, key: str) -> int:
    """Press ``key`` every 2 s until the dialog is answered; return the frame mark.

    Answered means a ``working`` record follows, or straight away ``done``: the rest of the
    turn is one instant reply from the mock API, and the program may report only its newest
    state (a flaky run saw blocked -> done with no working between).
    """
    return await _press_until(tmux, pane, frames, key, frozenset({"working", "done"}))


async def _press_until(
    tmux: Tmux, pane: str, frames: Frames, key: str, states: frozenset[str]
) -> int:
    """Press ``key`` every 2 s until a main record in ``states`` follows; return the mark.

    Claude ignores keys for a moment after it opens a permission dialog (a guard against
    approving by accident), so one press at a fixed time would be a race.
    """
    mark = len(frames.items)
    for _ in range(10):
        tmux.run("send-keys", "-t", pane, key)
        with anyio.move_on_after(2):
            await _wait_status(frames, mark, lambda m: _main(m) and m.state in states)
            return mark
    raise AssertionError(f"{key!r} never led to {sorted(states)}")


def _main(m: messages.ProgramStatus) -> bool:
    return m.child_id is None


async def test_claude_code_status_under_the_wrapper(
    tmp_path: Path, tmux: Tmux, anthropic: MockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude = _agent("claude")
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
    with _explain_failure(tmux, lambda: pane, seen), anyio.fail_after(100):
        async with frame_listener(sock) as frames:
            seen.append(frames)
            pane = tmux.start([*WRAP, "--", str(claude), "--permission-mode", "manual"], env,
                              width=160, height=50, cwd=work)
            # The probe is answered (inside tmux, by the wrapper): Claude turns records on.
            await _wait_status(frames, 0, lambda m: m.state == "idle")
            spawned = frames.of(messages.PtySpawned)[0]
            assert isinstance(spawned, messages.PtySpawned)
            assert spawned.pane == pane
            assert spawned.key.harness == "claude-code"
            await tmux.wait_text(pane, "manual")

            mark = await _submit(tmux, pane, frames, "hello there")
            await _wait_status(frames, mark, lambda m: m.state == "done")

            mark = await _submit(tmux, pane, frames, "please WRITE a file")
            blocked = await _wait_status(frames, mark, lambda m: m.state == "blocked")
            assert (blocked.kind, blocked.message) == ("permission",
                                                       "approve Bash: echo hi > hi.txt")
            assert blocked.app == "claude-code" and blocked.key == spawned.key
            await tmux.wait_text(pane, "Do you want to proceed?")
            # "1. Yes" is preselected.
            mark = await _press_until_approved(tmux, pane, frames, "Enter")
            await _wait_status(frames, mark, lambda m: m.state == "done")
            assert (work / "hi.txt").read_text() == "hi\n"

            anthropic.stalled.clear()
            # The mock stalls this answer mid-stream: the turn is reported as working for as
            # long as it stalls, so here working itself must be seen.
            mark = await _submit(tmux, pane, frames, "be SLOW", frozenset({"working"}))
            # Esc only once the answer is streaming (and stalled): an interrupt mid-turn.
            assert await anyio.to_thread.run_sync(anthropic.stalled.wait, 30)
            tmux.run("send-keys", "-t", pane, "Escape")
            await _wait_status(frames, mark, lambda m: m.state == "idle")
            assert "done" not in [m.state for m in _statuses(frames, mark) if _main(m)]

            # The interrupted prompt comes back into the input line: erase it first.
            tmux.run("send-keys", "-t", pane, "-N", "20", "BSpace")
            await _type(tmux, pane, "/exit")
            tmux.run("send-keys", "-t", pane, "Enter")
            await frames.wait_for(lambda items: any(
                isinstance(m, messages.PtyExit) for m in items))
            assert await tmux.wait_dead(pane) == 0
    exited = frames.of(messages.PtyExit)[0]
    assert isinstance(exited, messages.PtyExit)
    assert (exited.key, exited.pane, exited.code, exited.signal) == (spawned.key, pane, 0, None)
    assert _statuses(frames, 0)[-1].state == "clear"


CODEX_CONFIG = """\
model = "gpt-mock"
model_provider = "mock"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false
[analytics]
enabled = false
[model_providers.mock]
name = "Mock Responses API"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "MOCK_OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0
[projects."{cwd}"]
trust_level = "trusted"
[tui]
screen_reader_detection_done = true
"""


async def test_codex_approval_dialog_is_blocked_under_the_wrapper(
    tmp_path: Path, tmux: Tmux, openai: MockServer
) -> None:
    codex = _agent("codex")
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
        with _explain_failure(tmux, lambda: pane, seen), anyio.fail_after(100):
            async with frame_listener(sock) as frames:
                seen.append(frames)
                pane = tmux.start(command, env, width=160, height=50, cwd=work)
                await tmux.wait_text(pane, "Ask Codex to do anything")
                spawned = frames.of(messages.PtySpawned)[0]
                assert isinstance(spawned, messages.PtySpawned)
                assert (spawned.pane, spawned.key.harness) == (pane, "codex")
                mark = await _submit(tmux, pane, frames, "please WRITE a file")
                blocked = await _wait_status(frames, mark, lambda m: m.state == "blocked")
                assert (blocked.kind, blocked.app) == ("permission", "codex")
                await tmux.wait_text(pane, "Would you like to run")
                mark = await _press_until_approved(tmux, pane, frames, "y")
                await _wait_status(frames, mark, lambda m: m.state == "done")
                await _type(tmux, pane, "/quit")
                tmux.run("send-keys", "-t", pane, "Enter")
                await frames.wait_for(lambda items: any(
                    isinstance(m, messages.PtyExit) for m in items))
                assert await tmux.wait_dead(pane) == 0
    finally:
        _stop_codex_leftovers(home)
    exited = frames.of(messages.PtyExit)[0]
    assert isinstance(exited, messages.PtyExit)
    assert (exited.key, exited.pane, exited.code) == (spawned.key, pane, 0)


def _stop_codex_leftovers(home: Path) -> None:
    """Kill any process (by pid) whose command line names this test's HOME."""
    marker = str(home).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in cmdline or marker in environ:
            subprocess.run(["kill", "-9", entry.name], check=False, capture_output=True)
    shutil.rmtree(home, ignore_errors=True)
