"""Where OpenCode keeps its configuration: ``$XDG_CONFIG_HOME/opencode``, default
``~/.config/opencode`` (plugins in ``plugin/``; OpenCode loads ``{plugin,plugins}/*.{ts,js}``).

Read from the environment at call time (an empty variable counts as unset).
"""

from __future__ import annotations

from pathlib import Path

from actors.core.paths import env_dir

__all__ = ["config_dir"]


def config_dir() -> Path:
    """OpenCode's configuration directory (``opencode.json``, ``plugin/``)."""
    xdg = env_dir("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg is not None else Path.home() / ".config") / "opencode"
