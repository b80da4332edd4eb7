"""The fleet: which other machines' daemons this one follows, and how it reaches them (pure).

The hosts file is ``$XDG_CONFIG_HOME/paneward/fleet.toml`` (:func:`fleet_path`), read with the
standard library's :mod:`tomllib` and written by ``paneward fleet add|remove``
(:mod:`actors.cli.fleet`) through :func:`render_fleet`::

    keepalive_s = 10          # optional: ServerAliveInterval (seconds); stale within 2 of them

    [[host]]
    destination = "gpu1"      # exactly as the user types it after `ssh`
    command = "paneward"      # optional: the remote paneward command (a path, a venv's bin)

    [[nats]]
    url = "nats://nats.lan:4222"   # every host publishing to this server (paneward run --nats)
    creds = "/home/me/.config/paneward/fleet.creds"   # optional: nkey, tls_cert + tls_key, tls_ca

Each destination is also the host's name in every view; a NATS entry brings every host that
publishes there, by the name it publishes under (:class:`NatsEntry`). An SSH host's transport
is the user's own OpenSSH client (:func:`ssh_argv`), so ``~/.ssh/config``, the agent, ``ProxyJump``,
certificates and ``known_hosts`` work as in their shell. What an ended ``ssh`` means, in words
the user can act on, is :func:`unreachable_reason`.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import tomllib
from dataclasses import dataclass
from typing import Final

from actors.core.fleet.follow import STALE_AFTER_INTERVALS
from actors.core.fleet.nats import (
    DEFAULT_BUCKET,
    DEFAULT_PREFIX,
    DEFAULT_STREAM,
    NatsSettings,
    SettingsError,
    check_url,
)
from actors.core.paths import env_dir

__all__ = [
    "CONTROL_DIR_MAX",
    "CONTROL_PERSIST_S",
    "DEFAULT_COMMAND",
    "DEFAULT_KEEPALIVE_S",
    "EXIT_NO_DAEMON",
    "Fleet",
    "FleetFileError",
    "Host",
    "NatsEntry",
    "add_host",
    "add_nats",
    "answer_deadline_s",
    "attach_argv",
    "control_argv",
    "control_dir",
    "control_name",
    "control_path",
    "file_problem_line",
    "fleet_path",
    "paneward_config_dir",
    "parse_fleet",
    "is_nats_url",
    "remove_host",
    "render_fleet",
    "ssh_argv",
    "unreachable_reason",
    "watch_command",
]

DEFAULT_COMMAND: Final = "paneward"
#: ``ServerAliveInterval``: with ``ServerAliveCountMax`` one less than the fleet's stale rule
#: (:data:`actors.core.fleet.follow.STALE_AFTER_INTERVALS`), a silent link ends within that
#: many intervals.
DEFAULT_KEEPALIVE_S: Final = 10
#: The exit status of ``paneward watch`` when no daemon answers (:data:`actors.cli.EXIT_NO_DAEMON`;
#: restated here because core imports nothing of the CLI).
EXIT_NO_DAEMON: Final = 2
#: How long a host's connection outlives its last user (``ControlPersist``, seconds): the
#: master ssh runs on its own, so a stream that ends or restarts never ends the connection a
#: jump's window rides on, and the next try finds it up.
CONTROL_PERSIST_S: Final = 60
_CONTROL_NAME_LEN: Final = 16
#: The one length rule of the ``ControlPath`` sockets: a Unix socket's path holds at most 107
#: bytes (``sun_path`` is 108 with its NUL), and ssh first binds the path plus ``.`` and 16
#: random characters, then renames it; so the directory holds at most 107 - 1 ("/") - 16
#: (:func:`control_name`) - 17 bytes.
CONTROL_DIR_MAX: Final = 107 - 1 - _CONTROL_NAME_LEN - 17
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


_NATS_FILES: Final = ("creds", "nkey", "tls_cert", "tls_key", "tls_ca")
_NATS_NAMES: Final = ("stream", "bucket", "prefix")
_NATS_KEYS: Final = frozenset(("url", *_NATS_FILES, *_NATS_NAMES))
_NAME_TOKEN: Final = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True, slots=True)
class NatsEntry:
    """One NATS server followed: every host that publishes to it (``paneward run --nats``),
    each by the name it publishes under. ``url`` is also the entry's name; credentials are
    files by the NATS conventions (``creds``, ``nkey``, ``tls_cert`` + ``tls_key``,
    ``tls_ca``); ``stream``, ``bucket`` and ``prefix`` are the publishers' (docs/fleet.md)."""

    url: str
    creds: str | None = None
    nkey: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    stream: str = DEFAULT_STREAM
    bucket: str = DEFAULT_BUCKET
    prefix: str = DEFAULT_PREFIX

    @property
    def name(self) -> str:
        return self.url

    def settings(self, client: str) -> NatsSettings:
        """The connection settings of a reader named ``client`` (its connection's name)."""
        return NatsSettings(url=self.url, host=client, creds=self.creds, nkey=self.nkey,
                            tls_cert=self.tls_cert, tls_key=self.tls_key, tls_ca=self.tls_ca,
                            stream=self.stream, bucket=self.bucket, prefix=self.prefix)


def is_nats_url(text: str) -> bool:
    """Whether a fleet entry the user typed is a NATS URL rather than an ssh destination."""
    return text.split("://", 1)[0] in ("nats", "tls", "ws", "wss") and "://" in text


def check_nats(entry: NatsEntry) -> NatsEntry:
    """``entry`` if it can be followed.

    :raises FleetFileError: the URL is not a NATS URL or carries a secret, a file name is empty
        or has a control character, a certificate comes without its key, or a stream, bucket
        or prefix is not one token.
    """
    try:
        check_url(entry.url, "url")
    except SettingsError as exc:
        raise FleetFileError(str(exc)) from None
    for key in _NATS_FILES:
        value = getattr(entry, key)
        if value is not None and (not value or _CONTROLS.search(value)):
            raise FleetFileError(f"{key}: a file name, got {value!r}")
    if (entry.tls_cert is None) != (entry.tls_key is None):
        raise FleetFileError("a TLS client certificate needs both tls_cert and tls_key")
    for key in _NATS_NAMES:
        if not _NAME_TOKEN.match(getattr(entry, key)):
            raise FleetFileError(f"{key}: letters, digits, '_' and '-' only")
    return entry


@dataclass(frozen=True, slots=True)
class Fleet:
    """The hosts file: every SSH host and every NATS server, in the order added, and the
    keepalive interval."""

    hosts: tuple[Host, ...] = ()
    keepalive_s: int = DEFAULT_KEEPALIVE_S
    nats: tuple[NatsEntry, ...] = ()

    def host(self, name: str) -> Host | None:
        return next((h for h in self.hosts if h.name == name), None)

    def server(self, url: str) -> NatsEntry | None:
        return next((n for n in self.nats if n.url == url), None)

    @property
    def empty(self) -> bool:
        return not self.hosts and not self.nats


def paneward_config_dir() -> str:
    """``$XDG_CONFIG_HOME/paneward``, else ``~/.config/paneward``."""
    xdg = env_dir("XDG_CONFIG_HOME")
    base = xdg if xdg is not None else os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "paneward")


def fleet_path() -> str:
    """The hosts file."""
    return os.path.join(paneward_config_dir(), "fleet.toml")


def control_name(host: Host) -> str:
    """The name of ``host``'s ``ControlPath`` socket: 16 hex digits of a hash of its
    destination (each hosts-file entry its own connection, whatever its alias resolves to)."""
    return hashlib.sha256(host.destination.encode()).hexdigest()[:_CONTROL_NAME_LEN]


def control_dir(runtime_dir: str, uid: int, *, short_base: str = "/tmp") -> str:
    """Where the per-host ``ControlPath`` sockets live (made 0700 by the caller):
    ``<runtime>/fleet`` when a socket's path there fits :data:`CONTROL_DIR_MAX`, else
    ``<short_base>/paneward-UID/<12 hex digits of a hash of the runtime dir>``
    (``/tmp/paneward-1000/3f2a…``), which always fits. The last level keeps each daemon's
    masters its own: two daemons of one user (two state dirs, each with its own ssh settings)
    never ride on each other's connection to a host of the same name."""
    preferred = os.path.join(runtime_dir, "fleet")
    if len(os.fsencode(preferred)) <= CONTROL_DIR_MAX:
        return preferred
    mine = hashlib.sha256(os.fsencode(runtime_dir)).hexdigest()[:12]
    return os.path.join(short_base, f"paneward-{uid}", mine)


def file_problem_line(error: str, since_ms: int, *, kept: bool) -> str:
    """The line under ``status``'s hosts while the hosts file cannot be used: ``error`` (it
    names the file), since when, and what is followed meanwhile (``kept``: the last good
    file's hosts; else none)."""
    clock = time.strftime("%H:%M:%S", time.localtime(since_ms / 1000))
    then = "the last good file is in use" if kept else "no host is followed until it is fixed"
    return f"fleet: {_CONTROLS.sub('?', error)} (since {clock}; {then})"


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
    unknown = sorted(set(data) - {"host", "keepalive_s", "nats"})
    if unknown:
        raise FleetFileError(
            f"unknown setting {unknown[0]!r} (expected host, nats, keepalive_s)"
        )
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
    return Fleet(tuple(hosts), keepalive, _parse_nats(data.get("nats", [])))


def _parse_nats(entries: object) -> tuple[NatsEntry, ...]:
    if not isinstance(entries, list):
        raise FleetFileError("nats must be an array of tables ([[nats]])")
    servers: list[NatsEntry] = []
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise FleetFileError(f"nats {number} is not a table")
        extra = sorted(set(entry) - _NATS_KEYS)
        if extra:
            raise FleetFileError(f"nats {number}: unknown key {extra[0]!r}")
        if not all(isinstance(v, str) for v in entry.values()) or "url" not in entry:
            raise FleetFileError(f"nats {number}: a url, and every value a string")
        try:
            server = check_nats(NatsEntry(**entry))
        except FleetFileError as exc:
            raise FleetFileError(f"nats {number}: {exc}") from None
        if any(s.url == server.url for s in servers):
            raise FleetFileError(f"nats {number}: {server.url!r} is listed twice")
        servers.append(server)
    return tuple(servers)


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
    defaults = NatsEntry("")
    for server in fleet.nats:
        lines += ["", "[[nats]]", f"url = {_toml_string(server.url)}"]
        for key in (*_NATS_FILES, *_NATS_NAMES):
            value = getattr(server, key)
            if value != getattr(defaults, key):
                lines.append(f"{key} = {_toml_string(value)}")
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
    return Fleet(hosts, fleet.keepalive_s, fleet.nats)


def add_nats(fleet: Fleet, server: NatsEntry) -> Fleet:
    """``fleet`` with the NATS ``server`` (an entry with that URL is replaced in place).

    :raises FleetFileError: see :func:`check_nats`.
    """
    server = check_nats(server)
    if fleet.server(server.url) is not None:
        servers = tuple(server if n.url == server.url else n for n in fleet.nats)
    else:
        servers = (*fleet.nats, server)
    return Fleet(fleet.hosts, fleet.keepalive_s, servers)


def remove_host(fleet: Fleet, name: str) -> Fleet:
    """``fleet`` without the host or NATS server ``name``.

    :raises FleetFileError: no entry has that name.
    """
    if fleet.host(name) is None and fleet.server(name) is None:
        raise FleetFileError(f"no host {name!r} in the fleet")
    return Fleet(tuple(h for h in fleet.hosts if h.name != name), fleet.keepalive_s,
                 tuple(n for n in fleet.nats if n.url != name))


def ssh_argv(
    host: Host, control_dir: str, remote: list[str], *, keepalive_s: int, ssh: str = "ssh",
    tty: bool = False, extra_options: tuple[str, ...] = (),
) -> list[str]:
    """The ``ssh`` command line that runs ``remote`` (words joined by the remote shell) on
    ``host`` through the host's one multiplexed connection.

    ``BatchMode=yes``: never a password or host-key prompt (the daemon has no terminal); a
    failure is an exit status and a line on stderr (:func:`unreachable_reason`).
    ``ServerAliveInterval``/``ServerAliveCountMax``: a link that stops answering ends within
    :data:`~actors.core.fleet.follow.STALE_AFTER_INTERVALS` intervals (the fleet's one stale
    rule). ``ControlMaster=auto`` with ``ControlPath`` ``control_dir``/:func:`control_name`
    and ``ControlPersist`` (:data:`CONTROL_PERSIST_S`): the first ssh to a host starts its
    master in the background and is itself a client of it, as is every later one -- the
    stream, ``fleet check``, ``next``'s ``ssh -t`` -- so a host has one TCP connection however
    many sessions and commands there are, each client ends with its own remote command (the
    stream's end is the stream's alone), and the master ends when its connection is lost
    (every client with it) or :data:`CONTROL_PERSIST_S` after its last client.
    ``extra_options`` are more ``-o`` settings (tests set ``Port``, ``UserKnownHostsFile``,
    ``IdentityFile`` there; a user sets them in ``~/.ssh/config``).
    """
    argv = [ssh, "-t" if tty else "-T"]
    options = (
        "BatchMode=yes",
        f"ServerAliveInterval={keepalive_s}",
        f"ServerAliveCountMax={STALE_AFTER_INTERVALS - 1}",
        f"ConnectTimeout={max(keepalive_s, 5)}",
        "ControlMaster=auto",
        # ssh expands %-tokens in the path: the directory's own % is written %%
        f"ControlPath={control_path(host, control_dir.replace('%', '%%'))}",
        f"ControlPersist={CONTROL_PERSIST_S}",
        *extra_options,
    )
    for option in options:
        argv += ["-o", option]
    return [*argv, "--", host.destination, *remote]


_PANE_ID: Final = re.compile(r"^%[0-9]{1,9}$")


def control_path(host: Host, control_dir: str) -> str:
    """The path of ``host``'s ``ControlPath`` socket in ``control_dir``."""
    return os.path.join(control_dir, control_name(host))


def control_argv(
    host: Host, control_dir: str, command: str, *, ssh: str = "ssh",
    extra_options: tuple[str, ...] = (),
) -> list[str]:
    """``ssh -O COMMAND`` (``check``, ``exit``) to ``host``'s master: the same ``ControlPath``
    as :func:`ssh_argv`'s, never a connection of its own."""
    argv = [ssh, "-o", "BatchMode=yes", "-o",
            f"ControlPath={control_path(host, control_dir.replace('%', '%%'))}"]
    for option in extra_options:
        argv += ["-o", option]
    return [*argv, "-O", command, "--", host.destination]


def answer_deadline_s(keepalive_s: int) -> int:
    """Seconds an ssh to a host is given to answer with its first line (the connect timeout
    and 10 s more): past it, the try has failed (``no answer in time``)."""
    return max(keepalive_s, 5) + 10


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
