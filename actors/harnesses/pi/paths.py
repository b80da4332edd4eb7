"""Where Pi keeps its agent configuration: ``$PI_CODING_AGENT_DIR``, default ``~/.pi/agent``
(extensions in ``extensions/*.ts``, loaded at start).

Read from the environment at call time (an empty variable counts as unset).
"""

from __future__ import annotations

from pathlib import Path

from actors.core.paths import env_dir

__all__ = ["agent_dir"]


def agent_dir() -> Path:
    """Pi's agent directory (``models.json``, ``settings.json``, ``extensions/``)."""
    explicit = env_dir("PI_CODING_AGENT_DIR")
    return Path(explicit) if explicit is not None else Path.home() / ".pi" / "agent"
