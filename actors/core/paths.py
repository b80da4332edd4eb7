"""Where paneward keeps its own files, and the one rule for reading a directory from the
environment (each harness's files: ``actors.harnesses.<name>.paths``, which use :func:`env_dir`).

Standard library only and no :mod:`pathlib` (it costs milliseconds to import): ``paneward hook``
imports this module on its fast path. Every function returns a ``str`` read from the
environment at call time, so tests point the whole system at a temporary directory with
``monkeypatch.setenv``. An empty variable counts as unset (``FOO= paneward ...`` is a common way
to "unset" in shells).

Environment variables (first match wins):

- state:   ``$PANEWARD_STATE_DIR`` → ``$XDG_STATE_HOME/paneward`` → ``~/.local/state/paneward``
- runtime: ``$XDG_RUNTIME_DIR/paneward`` → the state directory
- socket:  ``$PANEWARD_SOCKET`` → ``<runtime>/hook.sock``

The rule for paneward's own directories (the state directory and the socket directory), as
tmux applies it to its socket directory: each must be a real directory (not a symbolic link),
owned by the user, with no access for group or others (:func:`private_dir_problem`); the daemon
refuses to start otherwise and says why. It never loosens, tightens or follows one: see
:mod:`actors.sources.files` for how they are opened.
"""

from __future__ import annotations

import os

__all__ = [
    "control_path",
    "env_dir",
    "http_token_path",
    "private_dir_problem",
    "runtime_dir",
    "socket_path",
    "state_dir",
]


def env_dir(name: str) -> str | None:
    """The directory in ``$name`` (``~`` expanded), or ``None`` when unset or empty."""
    value = os.environ.get(name)
    return os.path.expanduser(value) if value else None


def state_dir() -> str:
    """Durable per-user state (database, http token)."""
    explicit = env_dir("PANEWARD_STATE_DIR")
    if explicit is not None:
        return explicit
    xdg = env_dir("XDG_STATE_HOME")
    if xdg is not None:
        return os.path.join(xdg, "paneward")
    return os.path.join(os.path.expanduser("~"), ".local", "state", "paneward")


def runtime_dir() -> str:
    """Per-user runtime files (the sockets); falls back to the state directory."""
    xdg = env_dir("XDG_RUNTIME_DIR")
    if xdg is not None:
        return os.path.join(xdg, "paneward")
    return state_dir()


def socket_path() -> str:
    """The hook socket the daemon listens on and ``paneward hook`` connects to."""
    explicit = env_dir("PANEWARD_SOCKET")
    if explicit is not None:
        return explicit
    return os.path.join(runtime_dir(), "hook.sock")


def control_path(socket: str | None = None) -> str:
    """The control socket (``status``/``watch``): beside the hook socket ``socket``."""
    return os.path.join(os.path.dirname(socket or socket_path()), "control.sock")


def http_token_path() -> str:
    """The 0600 file holding the loopback http-hook token (written by ``install-hooks --http``)."""
    return os.path.join(state_dir(), "http-token")


def private_dir_problem(path: str, st_uid: int, st_mode: int, uid: int) -> str | None:
    """Why the directory ``path`` (``fstat`` of its opened fd: ``st_uid``, ``st_mode``) may not
    hold paneward's files for ``uid``, or ``None`` when it may."""
    if st_mode & 0o170000 != 0o040000:
        return f"{path} is not a directory"
    if st_uid != uid:
        return f"{path} belongs to uid {st_uid}, not to uid {uid}: refusing to use it"
    if st_mode & 0o077:
        return (
            f"{path} is accessible by other users (mode {st_mode & 0o7777:04o}); "
            f"make it private with `chmod 700 {path}` (or remove it) and start again"
        )
    return None
