"""Where Codex keeps its files: ``$CODEX_HOME``, default ``~/.codex``.

Read from the environment at call time (an empty variable counts as unset).
"""

from __future__ import annotations

from pathlib import Path

from actors.core.paths import env_dir

__all__ = ["home", "sessions_dir"]


def home() -> Path:
    """Codex's home (``config.toml``, ``hooks.json``, ``sessions/``)."""
    explicit = env_dir("CODEX_HOME")
    return Path(explicit) if explicit is not None else Path.home() / ".codex"


def sessions_dir() -> Path:
    """Where the rollouts are (``sessions/YYYY/MM/DD/rollout-*.jsonl``)."""
    return home() / "sessions"
