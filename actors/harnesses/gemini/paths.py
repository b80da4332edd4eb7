"""Where Gemini CLI keeps its files: ``$GEMINI_CLI_HOME/.gemini``, default ``~/.gemini``
(``settings.json``; the bundle's ``homedir()`` reads ``GEMINI_CLI_HOME`` first).

Read from the environment at call time (an empty variable counts as unset).
"""

from __future__ import annotations

from pathlib import Path

from actors.core.paths import env_dir

__all__ = ["gemini_dir"]


def gemini_dir() -> Path:
    """Gemini CLI's user directory (``settings.json``, ``tmp/``)."""
    home = env_dir("GEMINI_CLI_HOME")
    return (Path(home) if home is not None else Path.home()) / ".gemini"
