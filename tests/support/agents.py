"""Where the real agent CLIs are installed, and how the tests configure them.

Claude Code and Codex come from ``$PANEWARD_AGENT_PREFIX/node_modules/.bin`` (docs/testing.md);
Gemini CLI, OpenCode, Pi and Hermes Agent from their own caches under ``~/.cache`` (``.ci/run``
installs them, pinned). A missing CLI skips the test, except under ``CI=true``, where it is a
failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

import pytest

#: The key the Claude Code tests give the CLI (the Anthropic mock takes any).
API_KEY = "sk-ant-dummy-key-for-mock-0123456789"


def agent(name: str) -> Path:
    """Claude Code's or Codex's binary (``claude``, ``codex``), or a skip (a failure under CI)."""
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


CACHE: Final = Path.home() / ".cache"
#: The versions ``.ci/run`` installs.
VERSIONS: Final = {
    "gemini": "0.61.0",
    "opencode": "1.18.33",
    "pi": "0.73.1",
    "hermes": "0.19.0",
}


def cli(name: str) -> Path:
    """The Gemini CLI, OpenCode, Pi or Hermes binary, or a skip (a failure under CI)."""
    binary = {
        "gemini": CACHE / "paneward-gemini" / "node_modules" / ".bin" / "gemini",
        "opencode": CACHE / "paneward-opencode" / "node_modules" / ".bin" / "opencode",
        "pi": CACHE / "paneward-pi" / "node_modules" / ".bin" / "pi",
        "hermes": CACHE / "paneward-hermes" / "bin" / "hermes",
    }[name]
    if not binary.exists():
        message = f"{name} {VERSIONS[name]} not installed at {binary} (bash .ci/run installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return binary


#: Codex's ``config.toml`` against the OpenAI mock (``{url}``), ``{cwd}`` trusted.
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


def codex_home(tmp: Path, url: str) -> tuple[Path, Path]:
    """A fresh HOME with ``.codex/config.toml`` for the mock Responses API at ``url`` (the work
    directory trusted), the work directory and ``tmp/tmp``: ``(home, work)``."""
    home, work = tmp / "home", tmp / "work"
    for d in (home / ".codex", work, tmp / "tmp"):
        d.mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text(CODEX_CONFIG.format(url=url, cwd=work))
    return home, work

def stop_codex_leftovers(home: Path) -> None:
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
