"""``paneward install-hooks`` in process, as the harness tests run it, the user content they
install over, and what they read back."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, Final

from actors.cli import main as cli
from actors.core.install.config_edit import is_paneward_command

EXE: Final = "/opt/pw bin/paneward"  # a space: every command must be quoted


def run_install(*args: str) -> int:
    """``paneward install-hooks ARGS --executable EXE``: its exit code."""
    return cli.main(["install-hooks", *args, "--executable", EXE])


def files(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` and its bytes, by relative path (its backups and an
    agent's ``node_modules`` left out)."""
    return {
        os.fspath(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and ".paneward-backup-" not in p.name
        and "node_modules" not in p.relative_to(directory).parts
    }


#: A user's Claude Code ``settings.json``: their own hooks, permissions and model.
USER_SETTINGS = """{
    "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
    "env": {"FOO": "bär"},
    "hooks": {
        "Stop": [
            {"matcher": "", "hooks": [{"type": "command", "command": "say done"}]}
        ],
        "PreCompact": [{"hooks": [{"type": "command", "command": "backup.sh"}]}]
    },
    "model": "opus"
}"""  # 4-space indent, inline objects, no trailing newline: not what json.dumps writes


def ours(entries: list[Any]) -> list[Any]:
    """paneward's hooks among a settings file's groups of hook entries for one event."""
    return [
        h
        for group in entries
        for h in group.get("hooks", [])
        if is_paneward_command(h.get("command")) or h.get("type") == "http"
    ]


def snapshot(directory: Path) -> dict[str, bytes]:
    """The files right in ``directory`` (its backups too) and their bytes, by name."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def run_agent(argv: list[str | Path], env: dict[str, str]) -> str:
    """A real agent CLI's command, run to completion with ``env`` and the current ``PATH``: its
    output (a failure is an assertion error with what it said)."""
    done = subprocess.run(  # a short local command of the real CLI (no model, no network)
        [os.fspath(a) for a in argv], env={"PATH": os.environ["PATH"], **env},
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


#: A user's Codex ``config.toml`` (a comment of theirs on a line paneward leaves alone).
CODEX_USER = """\
model = "gpt-mock"   # mine
[tui]
screen_reader_detection_done = true
"""


def no_paneward_left(directory: Path) -> dict[str, bytes]:
    """:func:`files`; none of them mentions paneward any more."""
    found = files(directory)
    assert not [name for name, data in found.items() if b"paneward" in data]
    return found
