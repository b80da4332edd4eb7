"""``paneward install-hooks`` in process, as the harness tests run it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from actors.cli import main as cli

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
