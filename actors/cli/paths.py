"""Where paneward and the harnesses it watches keep their files.

Standard library only: ``paneward hook`` imports this module on its fast path, and every
function reads the environment at call time (never at import) so tests can point the whole
system at a temporary directory with ``monkeypatch.setenv``.

Environment variables (first match wins):

- state:   ``$PANEWARD_STATE_DIR`` → ``$XDG_STATE_HOME/paneward`` → ``~/.local/state/paneward``
- runtime: ``$XDG_RUNTIME_DIR/paneward`` → the state directory
- socket:  ``$PANEWARD_SOCKET`` → ``<runtime>/hook.sock``
- Claude:  ``$CLAUDE_CONFIG_DIR`` → ``~/.claude``
- Codex:   ``$CODEX_HOME`` → ``~/.codex``
- Hermes:  ``$HERMES_HOME`` → ``~/.hermes``

An empty variable counts as unset (``FOO= paneward …`` is a common way to "unset" in shells).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "claude_config_dir",
    "codex_home",
    "hermes_home",
    "http_token_path",
    "runtime_dir",
    "socket_path",
    "state_dir",
]


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    if not value:
        return None
    return Path(value).expanduser()


def state_dir() -> Path:
    """Durable per-user state (database, http token)."""
    explicit = _env_path("PANEWARD_STATE_DIR")
    if explicit is not None:
        return explicit
    xdg = _env_path("XDG_STATE_HOME")
    if xdg is not None:
        return xdg / "paneward"
    return Path.home() / ".local" / "state" / "paneward"


def runtime_dir() -> Path:
    """Per-user runtime files (the hook socket); falls back to the state directory."""
    xdg = _env_path("XDG_RUNTIME_DIR")
    if xdg is not None:
        return xdg / "paneward"
    return state_dir()


def socket_path() -> Path:
    """The hook socket the daemon listens on and ``paneward hook`` connects to."""
    explicit = _env_path("PANEWARD_SOCKET")
    if explicit is not None:
        return explicit
    return runtime_dir() / "hook.sock"


def http_token_path() -> Path:
    """The 0600 file holding the loopback http-hook token (written by ``install-hooks --http``)."""
    return state_dir() / "http-token"


def claude_config_dir() -> Path:
    """Claude Code's configuration directory (``settings.json``, ``sessions/``)."""
    explicit = _env_path("CLAUDE_CONFIG_DIR")
    if explicit is not None:
        return explicit
    return Path.home() / ".claude"


def codex_home() -> Path:
    """Codex's home (``config.toml``, ``hooks.json``, ``sessions/``)."""
    explicit = _env_path("CODEX_HOME")
    if explicit is not None:
        return explicit
    return Path.home() / ".codex"


def hermes_home() -> Path:
    """Hermes's home (``cron/executions.db``, ``state.db``, ``profiles/``)."""
    explicit = _env_path("HERMES_HOME")
    if explicit is not None:
        return explicit
    return Path.home() / ".hermes"
