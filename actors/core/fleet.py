"""The fleet: which other machines' daemons this one follows, and how it reaches them (pure).

The hosts file is ``$XDG_CONFIG_HOME/paneward/fleet.toml`` (:func:`fleet_path`), read with the
standard library's :mod:`tomllib` and written by ``paneward fleet add|remove``
(:mod:`actors.cli.fleet`) through :func:`render_fleet`::

    keepalive_s = 10          # optional: ServerAliveInterval (seconds); stale within 2 of them

    [[host]]
    destination = "gpu1"      # exactly as the user types it after `ssh`
    command = "paneward"      # optional: the remote paneward command (a path, a venv's bin)

Each destination is also the host's name in every view. The transport is the user's own
OpenSSH client (:func:`ssh_argv`), so ``~/.ssh/config``, the agent, ``ProxyJump``,
certificates and ``known_hosts`` work as in their shell. What an ended ``ssh`` means, in words
the user can act on, is :func:`unreachable_reason`.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from typing import Final

from actors.core.paths import env_dir

__all__ = [
    "DEFAULT_COMMAND",
    "DEFAULT_KEEPALIVE_S",
    "EXIT_NO_DAEMON",
    "Fleet",
    "FleetFileError",
    "Host",
    "add_host",
    "attach_argv",
    "config_dir",
    "control_dir",
    "fleet_path",
    "parse_fleet",
    "remove_host",
    "render_fleet",
    "ssh_argv",
    "unreachable_reason",
    "watch_command",
]

DEFAULT_COMMAND: Final = "paneward"
#: ``ServerAliveInterval``: with ``ServerAliveCountMax=1`` a silent link ends within two.
DEFAULT_KEEPALIVE_S: Final = 10
#: The exit status of ``paneward watch`` when no daemon answers (:data:`actors.cli.EXIT_NO_DAEMON`;
#: restated here because core imports nothing of the CLI).
EXIT_NO_DAEMON: Final = 2
_MAX_DESTINATION: Final = 255
_MAX_COMMAND: Final = 1024
# A destination is one word without controls or whitespace, and never starts with "-" (ssh
# would read it as an option; the argv has "--" before it all the same).
_DESTINATION: Final = re.compile(r"^[^\s\x00-\x1f\x7f-\x9f-][^\s\x00-\x1f\x7f-\x9f]*$")
_CONTROLS: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class FleetFileError(ValueError):
    """The hosts file, or an entry for it, is not valid: the message says which and why."""


@dataclass(frozen=True, slots=True)
class Host:
    """One followed machine: ``destination`` as typed after ``ssh`` (also its name in every
    view) and ``command``, the paneward command run there."""

    destination: str
    command: str = DEFAULT_COMMAND
    #: The tmux command there (``tmux -L work`` for a server of its own); what a jump to one
    #: of its panes attaches with (:func:`attach_argv`).
    tmux: str = "tmux"

    @property
    def name(self) -> str:
        return self.destination


@dataclass(frozen=True, slots=True)
class Fleet:
    """The hosts file: every host, in the order added, and the keepalive interval."""

    hosts: tuple[Host, ...] = ()
    keepalive_s: int = DEFAULT_KEEPALIVE_S

    def host(self, name: str) -> Host | None:
        return next((h for h in self.hosts if h.name == name), None)


def config_dir() -> str:
    """``$XDG_CONFIG_HOME/paneward``, else ``~/.config/paneward``."""
    xdg = env_dir("XDG_CONFIG_HOME")
    base = xdg if xdg is not None else os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "paneward")


def fleet_path() -> str:
    """The hosts file."""
    return os.path.join(config_dir(), "fleet.toml")


def control_dir(runtime_dir: str) -> str:
    """Where the per-host ``ControlPath`` sockets live: ``<runtime>/fleet`` (made 0700)."""
    return os.path.join(runtime_dir, "fleet")


def check_destination(destination: str) -> str:
    """``destination`` if it is one plausible ``ssh`` destination.

    :raises FleetFileError: empty, too long, with whitespace or controls, or starting with ``-``.
    """
    if not destination or len(destination) > _MAX_DESTINATION:
        raise FleetFileError(f"a host must be 1 to {_MAX_DESTINATION} characters")
    if not _DESTINATION.match(destination):
        raise FleetFileError(
            f"not an ssh destination: {destination!r} (one word, no spaces or control "
            "characters, not starting with '-')"
        )
    return destination


def check_command(command: str) -> str:
    """``command`` if it can be the remote paneward command.

    :raises FleetFileError: empty, too long, or holding a control character (a newline would
        end the remote command line early).
    """
    if not command.strip() or len(command) > _MAX_COMMAND or _CONTROLS.search(command):
        raise FleetFileError(
            f"not a command: {command!r} (1 to {_MAX_COMMAND} characters, no control characters)"
        )
    return command


def parse_fleet(text: str) -> Fleet:
    """The hosts file's ``text``.

    :raises FleetFileError: not TOML, or an entry without a valid ``destination``, a bad
        ``command``, a destination listed twice, an unknown key, or a bad ``keepalive_s``.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FleetFileError(f"not valid TOML: {exc}") from exc
    unknown = sorted(set(data) - {"host", "keepalive_s"})
    if unknown:
        raise FleetFileError(f"unknown setting {unknown[0]!r} (expected host, keepalive_s)")
    keepalive = data.get("keepalive_s", DEFAULT_KEEPALIVE_S)
    if type(keepalive) is not int or not 1 <= keepalive <= 3600:
        raise FleetFileError("keepalive_s must be a whole number of seconds from 1 to 3600")
    entries = data.get("host", [])
    if not isinstance(entries, list):
        raise FleetFileError("host must be an array of tables ([[host]])")
    hosts: list[Host] = []
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise FleetFileError(f"host {number} is not a table")
        extra = sorted(set(entry) - {"destination", "command", "tmux"})
        if extra:
            raise FleetFileError(f"host {number}: unknown key {extra[0]!r}")
        destination = entry.get("destination")
        command = entry.get("command", DEFAULT_COMMAND)
        tmux = entry.get("tmux", "tmux")
        if not all(isinstance(v, str) for v in (destination, command, tmux)):
            raise FleetFileError(f"host {number}: destination, command and tmux must be strings")
        assert isinstance(destination, str) and isinstance(command, str)
        assert isinstance(tmux, str)
        try:
            host = Host(check_destination(destination), check_command(command),
                        check_command(tmux))
        except FleetFileError as exc:
            raise FleetFileError(f"host {number}: {exc}") from None
        if any(h.name == host.name for h in hosts):
            raise FleetFileError(f"host {number}: {destination!r} is listed twice")
        hosts.append(host)
    return Fleet(tuple(hosts), keepalive)


def _toml_string(text: str) -> str:
    # A basic string: backslash and quote escaped; controls never get here (checked).
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_fleet(fleet: Fleet) -> str:
    """The hosts file's text for ``fleet`` (what :func:`parse_fleet` reads back)."""
    lines = ["# paneward fleet: the hosts this machine's daemon follows (paneward fleet add)"]
    if fleet.keepalive_s != DEFAULT_KEEPALIVE_S:
        lines.append(f"keepalive_s = {fleet.keepalive_s}")
    for host in fleet.hosts:
        lines += ["", "[[host]]", f"destination = {_toml_string(host.destination)}"]
        if host.command != DEFAULT_COMMAND:
            lines.append(f"command = {_toml_string(host.command)}")
        if host.tmux != "tmux":
            lines.append(f"tmux = {_toml_string(host.tmux)}")
    return "\n".join(lines) + "\n"


def add_host(fleet: Fleet, host: Host) -> Fleet:
    """``fleet`` with ``host`` (a host of that name is replaced in place).

    :raises FleetFileError: the destination or command is not valid.
    """
    host = Host(check_destination(host.destination), check_command(host.command),
                check_command(host.tmux))
    if fleet.host(host.name) is not None:
        hosts = tuple(host if h.name == host.name else h for h in fleet.hosts)
    else:
        hosts = (*fleet.hosts, host)
    return Fleet(hosts, fleet.keepalive_s)


def remove_host(fleet: Fleet, name: str) -> Fleet:
    """``fleet`` without the host ``name``.

    :raises FleetFileError: no host has that name.
    """
    if fleet.host(name) is None:
        raise FleetFileError(f"no host {name!r} in the fleet")
    return Fleet(tuple(h for h in fleet.hosts if h.name != name), fleet.keepalive_s)


def ssh_argv(
    host: Host, control_dir: str, remote: list[str], *, keepalive_s: int, ssh: str = "ssh",
    tty: bool = False, extra_options: tuple[str, ...] = (),
) -> list[str]:
    """The ``ssh`` command line that runs ``remote`` (words joined by the remote shell) on
    ``host`` through the host's one multiplexed connection.

    ``BatchMode=yes``: never a password or host-key prompt (the daemon has no terminal); a
    failure is an exit status and a line on stderr (:func:`unreachable_reason`).
    ``ServerAliveInterval``/``ServerAliveCountMax=1``: a link that stops answering ends within
    two intervals. ``ControlMaster=auto`` with ``ControlPath`` under ``control_dir`` (``%C``:
    a hash of the local host, remote host, port and user, short enough for a socket path): the
    first ssh to a host becomes its master and every later one -- ``fleet check``, ``next``'s
    ``ssh -t`` -- rides on it, so a host has one TCP connection however many sessions and
    commands there are. ``extra_options`` are more ``-o`` settings (tests set ``Port``,
    ``UserKnownHostsFile``, ``IdentityFile`` there; a user sets them in ``~/.ssh/config``).
    """
    argv = [ssh, "-t" if tty else "-T"]
    options = (
        "BatchMode=yes",
        f"ServerAliveInterval={keepalive_s}",
        "ServerAliveCountMax=1",
        f"ConnectTimeout={max(keepalive_s, 5)}",
        "ControlMaster=auto",
        f"ControlPath={os.path.join(control_dir, '%C')}",
        "ControlPersist=no",
        *extra_options,
    )
    for option in options:
        argv += ["-o", option]
    return [*argv, "--", host.destination, *remote]


_PANE_ID: Final = re.compile(r"^%[0-9]{1,9}$")


def attach_argv(
    host: Host, control_dir: str, pane: str, *, keepalive_s: int, ssh: str = "ssh"
) -> list[str] | None:
    """The local command that shows the remote ``pane`` of ``host``: ``ssh -t HOST tmux
    attach-session -t PANE ; select-window -t PANE ; select-pane -t PANE`` through the host's
    multiplexed connection; ``None`` when ``pane`` is not a tmux pane id (``%N``): it comes
    from the remote daemon, and only a plain id goes into a command line."""
    if not _PANE_ID.match(pane):
        return None
    remote = [host.tmux, "attach-session", "-t", pane, "\\;", "select-window", "-t", pane,
              "\\;", "select-pane", "-t", pane]
    return ssh_argv(host, control_dir, remote, keepalive_s=keepalive_s, ssh=ssh, tty=True)


def watch_command(host: Host, since: int | None) -> list[str]:
    """The remote words of the stream: ``COMMAND watch --json --fleet [--since SEQ]``
    (``COMMAND`` is split by the remote shell, so it may be ``~/venv/bin/paneward``)."""
    words = [host.command, "watch", "--json", "--fleet"]
    if since is not None:
        words += ["--since", str(since)]
    return words


# (pattern in ssh's stderr, what the user reads): the first match wins.
_SSH_REASONS: Final[tuple[tuple[str, str], ...]] = (
    ("REMOTE HOST IDENTIFICATION HAS CHANGED",
     "host key changed: the host's key differs from the one in known_hosts; if the change is "
     "expected, remove the old key with `ssh-keygen -R HOST`"),
    ("Host key verification failed",
     "host key not trusted: it is not in known_hosts (connect once with `ssh HOST` to check "
     "and accept it)"),
    ("Permission denied",
     "permission denied: the host refused every key offered (add your public key to its "
     "~/.ssh/authorized_keys, or load the key into ssh-agent)"),
    ("Connection refused", "connection refused: nothing listens for ssh at that address"),
    ("Could not resolve hostname", "unknown host: the name does not resolve"),
    ("No route to host", "no route to host"),
    ("timed out", "connection timed out: the host does not answer"),
    ("Connection closed by", "the host closed the connection before login"),
)
_NOT_INSTALLED: Final = ("command not found", "No such file or directory", "not found")


def unreachable_reason(returncode: int, stderr: str, *, command: str) -> str:
    """Why an ``ssh`` running the stream ended before its first frame, in words the user can
    act on (the last line of ``stderr`` when nothing better is known).

    ``returncode`` 255 is ssh's own failure (matched on its message); 127 (or a shell's "not
    found") is the remote command missing; :data:`EXIT_NO_DAEMON` with ``no daemon`` on stderr
    is paneward there without a running daemon; an argument error about ``--fleet`` is a
    paneward too old to be followed.
    """
    text = stderr[-4096:]
    if returncode == 255:
        for pattern, reason in _SSH_REASONS:
            if pattern in text:
                return reason
    if "unrecognized arguments" in text or "invalid choice: 'watch'" in text:
        return (f"paneward too old there: `{command} watch --fleet` is not known (upgrade "
                "paneward on that host)")
    if returncode == EXIT_NO_DAEMON and "no daemon" in text:
        return ("daemon not running there: start it on that host with `paneward run` (or "
                "`paneward install-service`)")
    if returncode == 127 or (returncode != 255 and any(p in text for p in _NOT_INSTALLED)):
        return (f"paneward not installed there: `{command}` was not found (install it, or set "
                "the host's command to its full path with `paneward fleet add HOST --command`)")
    last = next((line for line in reversed(text.splitlines()) if line.strip()), "")
    shown = _CONTROLS.sub("?", last)[:200]
    return f"ssh exited {returncode}" + (f": {shown}" if shown else "")
