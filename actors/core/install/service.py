"""Running the daemon as a service, pure: the systemd user unit and the tmux autostart line.

``paneward install-service`` (:mod:`actors.cli.service`) writes :func:`unit_text` to
:func:`unit_path` and prints :func:`systemctl_commands`; :func:`tmux_autostart_line` is the
alternative for a machine without a systemd user manager. Text in, text out: no I/O.

Why ``Restart=on-failure``: the daemon exits non-zero exactly when it must be restarted (exit 3:
an essential actor stopped after repeated crashes, docs/reliability.md) or when it could not
start; it exits 0 on SIGTERM, which is how systemd stops it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

__all__ = [
    "MARKER",
    "PASSED_ENV",
    "UNIT_NAME",
    "exec_quote",
    "is_paneward_unit",
    "systemctl_commands",
    "tmux_autostart_line",
    "unit_path",
    "unit_text",
]

UNIT_NAME: Final = "paneward.service"
#: The unit's first line: ``--uninstall`` removes a unit only when it starts with it.
MARKER: Final = "# Written by paneward install-service (its --uninstall removes it)"
#: paneward's own variables that move what the daemon reads or where it listens: a service does
#: not get the shell's environment, so the ones set when the unit is written are written into
#: it (with each harness's ``home_env``, passed by :mod:`actors.cli.service` from the catalog).
PASSED_ENV: Final = ("PANEWARD_STATE_DIR", "PANEWARD_SOCKET", "XDG_STATE_HOME")


def unit_path(environ: Mapping[str, str], home: str) -> str:
    """Where the user unit goes: ``$XDG_CONFIG_HOME/systemd/user/`` (default
    ``~/.config``), where ``systemctl --user`` looks."""
    config = environ.get("XDG_CONFIG_HOME") or f"{home}/.config"
    return f"{config}/systemd/user/{UNIT_NAME}"


def exec_quote(word: str) -> str:
    """One ``ExecStart=`` word, quoted for systemd: ``%`` and ``$`` doubled (no specifier or
    variable is ever expanded), ``"`` and ``\\`` escaped inside double quotes when needed."""
    text = word.replace("%", "%%").replace("$", "$$")
    if text and not any(c in text for c in ' \t"\\\''):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _env_quote(name: str, value: str) -> str:
    text = f"{name}={value}".replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def unit_text(
    argv: Sequence[str], environ: Mapping[str, str], passed: Sequence[str] = PASSED_ENV
) -> str:
    """The unit that runs ``argv`` (this paneward's full path and ``run ...``), with the
    ``passed`` variables (:data:`PASSED_ENV` and the harnesses' homes) ``environ`` sets.

    :raises ValueError: a word or a value holds a newline or a NUL (a unit is line based).
    """
    for text in (*argv, *(environ.get(name, "") for name in passed)):
        if "\n" in text or "\r" in text or "\0" in text:
            raise ValueError(f"cannot write {text!r} into a systemd unit (a line break or NUL)")
    lines = [
        MARKER,
        "[Unit]",
        "Description=paneward: per-pane presence, turn and attention for coding agents",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(exec_quote(word) for word in argv),
        *(
            f"Environment={_env_quote(name, environ[name])}"
            for name in passed
            if environ.get(name)
        ),
        # exit 3 (an essential actor stopped) and any other failure: started again; SIGTERM
        # (systemctl stop) ends it with 0.
        "Restart=on-failure",
        "RestartSec=2",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ]
    return "\n".join(lines)


def is_paneward_unit(text: str) -> bool:
    """Whether a unit file's text is one :func:`unit_text` wrote (its first line)."""
    return text.split("\n", 1)[0] == MARKER


def systemctl_commands(*, uninstall: bool = False) -> list[list[str]]:
    """What to run after writing the unit (or before removing it)."""
    if uninstall:
        return [["systemctl", "--user", "disable", "--now", UNIT_NAME]]
    return [
        ["systemctl", "--user", "daemon-reload"],
        ["systemctl", "--user", "enable", "--now", UNIT_NAME],
    ]


def tmux_autostart_line(program: str) -> str:
    """The ``~/.tmux.conf`` line that starts the daemon with the tmux server (the alternative
    without systemd): tmux runs it in the background when it reads its configuration, with
    ``$TMUX`` naming that server; a second daemon refuses to start (one per state directory),
    so sourcing the file again is harmless. ``program`` is this paneward's full path,
    shell-quoted (run-shell has tmux's ``$PATH``, which may not hold the venv)."""
    command = f"{program} run --tmux >/dev/null 2>&1 || true"
    # tmux's double quotes: \ " and $ are special to its parser.
    quoted = command.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'run-shell -b "{quoted}"'

