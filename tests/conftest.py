"""Shared test configuration: asyncio only (aiosqlite cannot run on trio)."""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pluggy
import pytest

from tests.support.mock_apis import (
    MockServer,
    anthropic_server,
    chat_server,
    gemini_server,
    openai_server,
)
from tests.support.tmux import TmuxServer
from tests.support.wrap import AgentTmuxServer


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, bool]]:
    return ("asyncio", {"debug": True})


@pytest.fixture
def server() -> Iterator[TmuxServer]:
    """A private tmux server (``tmux -L pw-<random>``) with one session; only it is killed."""
    srv = TmuxServer()
    srv.start()
    try:
        yield srv
    finally:
        srv.kill()


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[AgentTmuxServer]:
    """A private tmux server for the real-CLI tests, started by the test's first pane; only it
    is killed."""
    srv = AgentTmuxServer(tmp_path)
    try:
        yield srv
    finally:
        srv.kill()


def _serving(make: Callable[[], MockServer]) -> Iterator[MockServer]:
    mock = make()
    try:
        yield mock
    finally:
        mock.close()


@pytest.fixture
def anthropic() -> Iterator[MockServer]:
    """The loopback Anthropic Messages API mock (Claude Code)."""
    yield from _serving(anthropic_server)


@pytest.fixture
def openai() -> Iterator[MockServer]:
    """The loopback OpenAI Responses API mock (Codex)."""
    yield from _serving(openai_server)


@pytest.fixture
def chat() -> Iterator[MockServer]:
    """The loopback OpenAI-compatible chat completions mock (OpenCode, Pi, Hermes)."""
    yield from _serving(chat_server)


@pytest.fixture
def gemini_api() -> Iterator[MockServer]:
    """The loopback Gemini API mock (Gemini CLI)."""
    yield from _serving(gemini_server)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh ``$HOME`` for ``install-hooks``, no harness home or state dir set elsewhere."""
    monkeypatch.setenv("HOME", os.fspath(tmp_path / "home"))
    for name in ("GEMINI_CLI_HOME", "XDG_CONFIG_HOME", "PI_CODING_AGENT_DIR", "HERMES_HOME",
                 "PANEWARD_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    claude = tmp_path / "claude-config"
    codex = tmp_path / "codex-home"
    state = tmp_path / "state"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", os.fspath(claude))
    monkeypatch.setenv("CODEX_HOME", os.fspath(codex))
    monkeypatch.setenv("PANEWARD_STATE_DIR", os.fspath(state))
    monkeypatch.setenv("HOME", os.fspath(tmp_path / "home"))
    monkeypatch.setenv("HERMES_HOME", os.fspath(tmp_path / "hermes-home"))
    for name in ("GEMINI_CLI_HOME", "XDG_CONFIG_HOME", "PI_CODING_AGENT_DIR"):
        monkeypatch.delenv(name, raising=False)
    return {"claude": claude, "codex": codex, "state": state, "home": tmp_path / "home",
            "hermes": tmp_path / "hermes-home"}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    """Under CI a skipped test is a failure: nothing may pass by not running."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, which must run every test: {report.longrepr}"
