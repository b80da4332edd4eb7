"""Where Claude Code keeps its files: ``$CLAUDE_CONFIG_DIR``, default ``~/.claude``.

Read from the environment at call time (an empty variable counts as unset).
"""

from __future__ import annotations

from pathlib import Path

from actors.core.paths import env_dir

__all__ = ["config_dir", "sessions_dir", "settings_path"]


def config_dir() -> Path:
    """Claude Code's configuration directory (``settings.json``, ``sessions/``)."""
    explicit = env_dir("CLAUDE_CONFIG_DIR")
    return Path(explicit) if explicit is not None else Path.home() / ".claude"


def sessions_dir() -> Path:
    """The registry: one ``<pid>.json`` per live interactive session."""
    return config_dir() / "sessions"


def settings_path() -> Path:
    """The user settings file install-hooks edits."""
    return config_dir() / "settings.json"
