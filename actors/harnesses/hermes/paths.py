"""Where Hermes Agent keeps its files: ``$HERMES_HOME``, default ``~/.hermes``.

Read from the environment at call time (an empty variable counts as unset).
"""

from __future__ import annotations

from pathlib import Path

from actors.core.paths import env_dir

__all__ = ["home"]


def home() -> Path:
    """Hermes's home (``cron/executions.db``, ``state.db``, ``profiles/``)."""
    explicit = env_dir("HERMES_HOME")
    return Path(explicit) if explicit is not None else Path.home() / ".hermes"
