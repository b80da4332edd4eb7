"""Real OpenSSH for the fleet tests: private ``sshd`` servers on loopback, a client set up for them.

:class:`SshWorld` makes, in a temporary directory, a throwaway client key, an ``ssh_config``
with one ``Host`` alias per server, a ``known_hosts`` holding each server's throwaway host key,
and an ``ssh`` wrapper (``ssh -F that-config``) that paneward runs through ``$PANEWARD_SSH``
(:func:`actors.cli.fleet.ssh_program`): what a user has in ``~/.ssh``, without touching it.
Each :class:`Sshd` is the system's ``sshd`` binary started by the test on its own port and
config -- never the system's sshd service -- as the test uid (root here: ``PermitRootLogin
yes``, ``StrictModes no`` for the temporary directory's modes, ``UsePAM no``). A host's
paneward is a script (:meth:`SshWorld.remote_command`) that runs this checkout's paneward with
the environment of that host's daemon (:class:`tests.support.daemon.DaemonProcess`).
:func:`ssh_fleet` is the whole fleet set-up the fleet tests and ``bench/bench_fleet.py`` share:
``count`` hosts ``h1``, ``h2``, ... each an sshd in front of its own started daemon, and the
hosts file naming them in a config directory of the local side's own.

``sshd`` needs its privilege-separation directory (``/run/sshd``); :func:`sshd_binary` makes it
when missing (it is empty, and only the sshd binary uses it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc

from actors.core.fleet import hosts as core
from actors.sources import procfs
from tests.support.daemon import PANEWARD, DaemonProcess, daemon_env
from tests.support.polling import poll_until

__all__ = ["SshFleet", "Sshd", "SshWorld", "ssh_fleet", "sshd_binary"]


def sshd_binary() -> str | None:
    """The sshd binary, with its privilege-separation directory ready; None when not installed."""
    found = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
    if found is not None:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.fspath(path)],
                   check=True, stdin=subprocess.DEVNULL)


class Sshd:
    """One private sshd on ``127.0.0.1:port`` (its own host key, config and log)."""

    def __init__(self, root: Path, name: str, authorized_keys: Path) -> None:
        self.name = name
        self.dir = root / f"sshd-{name}"
        self.dir.mkdir(parents=True)
        self.host_key = self.dir / "host_key"
        _keygen(self.host_key)
        self.port = _free_port()
        self.authorized_keys = authorized_keys
        self.log = self.dir / "sshd.log"
        self.process: anyio.abc.Process | None = None

    def public_host_key(self) -> str:
        return (self.dir / "host_key.pub").read_text().split(" ", 2)[1]

    def _config(self) -> Path:
        path = self.dir / "sshd_config"
        path.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.host_key}\n"
            f"PidFile {self.dir / 'sshd.pid'}\nAuthorizedKeysFile {self.authorized_keys}\n"
            "PermitRootLogin yes\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nUseDNS no\n"
            "MaxStartups 100\nMaxSessions 100\nLogLevel VERBOSE\n"
            # bash sources ~/.bashrc for a command sshd runs unless SHLVL says it is nested:
            # the test uid's rc file (a version manager's start-up, say) stays out of the way.
            "SetEnv SHLVL=1\n"
        )
        return path

    async def start(self) -> None:
        binary = sshd_binary()
        assert binary is not None, "sshd is not installed (.ci/run installs openssh-server)"
        config = self._config()
        with self.log.open("ab") as log:
            self.process = await anyio.open_process(
                [binary, "-D", "-e", "-f", os.fspath(config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            )

        async def banner() -> bool:
            assert self.process is not None
            if self.process.returncode is not None:
                raise AssertionError(f"sshd exited {self.process.returncode}: {self.log_text()}")
            try:
                stream = await anyio.connect_tcp("127.0.0.1", self.port)
            except OSError:
                return False
            async with stream:
                return (await stream.receive(64)).startswith(b"SSH-")

        await poll_until(banner, f"sshd {self.name} on port {self.port}")

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def signal(self, signum: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def connections(self) -> int:
        """Established TCP connections to this sshd's port (its side), from /proc/net/tcp."""
        count = 0
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table) as lines:
                next(lines)
                for line in lines:
                    fields = line.split()
                    local, state = fields[1], fields[3]
                    if state == "01" and int(local.rsplit(":", 1)[1], 16) == self.port:
                        count += 1
        return count

    async def stop(self) -> None:
        """Stop the listener and end the connections it accepted: a client's master ssh
        (``ControlPersist``) ends with its connection, never outliving the test."""
        if self.process is None:
            return
        sessions = procfs.children(self.process.pid)
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGCONT)  # a stopped sshd takes no SIGTERM
            self.process.terminate()
        with anyio.fail_after(10):
            await self.process.wait()
        await self.process.aclose()
        self.process = None
        for pid in sessions:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGTERM)


class SshWorld:
    """A client set-up and any number of :class:`Sshd` servers, under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.client = root / "client"
        self.client.mkdir(parents=True)
        self.key = self.client / "id_ed25519"
        _keygen(self.key)
        self.authorized_keys = self.client / "authorized_keys"
        self.authorized_keys.write_text((self.client / "id_ed25519.pub").read_text())
        self.known_hosts = self.client / "known_hosts"
        self.known_hosts.write_text("")
        self.config = self.client / "ssh_config"
        self.config.write_text("")
        self.ssh = self.client / "ssh"
        self.ssh.write_text(f'#!/bin/sh\nexec ssh -F {self.config} "$@"\n')
        self.ssh.chmod(0o755)
        self.servers: dict[str, Sshd] = {}

    async def add_server(self, name: str, *, trusted: bool = True) -> Sshd:
        """A started sshd reachable as ``name`` (its key in known_hosts unless not ``trusted``)."""
        server = Sshd(self.root, name, self.authorized_keys)
        await server.start()
        self.servers[name] = server
        self.alias(name, server.port)
        if trusted:
            with self.known_hosts.open("a") as out:
                out.write(f"[127.0.0.1]:{server.port} ssh-ed25519 {server.public_host_key()}\n")
        return server

    def alias(self, name: str, port: int, *, key: Path | None = None) -> None:
        """``Host name`` in the client config: loopback ``port``, our key and known_hosts."""
        with self.config.open("a") as out:
            out.write(
                f"Host {name}\n  HostName 127.0.0.1\n  Port {port}\n  User root\n"
                f"  IdentityFile {key or self.key}\n  IdentitiesOnly yes\n"
                f"  UserKnownHostsFile {self.known_hosts}\n  StrictHostKeyChecking yes\n"
                "  LogLevel ERROR\n"
            )

    def remote_command(self, name: str, state_dir: Path) -> str:
        """A script that runs this checkout's paneward as the daemon on ``state_dir`` sees it."""
        script = self.client / f"paneward-{name}"
        script.write_text(
            "#!/bin/sh\nunset XDG_RUNTIME_DIR PANEWARD_SOCKET XDG_STATE_HOME\n"
            f"export PANEWARD_STATE_DIR={state_dir}\nexec {PANEWARD} \"$@\"\n"
        )
        script.chmod(0o755)
        return os.fspath(script)

    def env(self, **extra: str) -> dict[str, str]:
        """What a local paneward needs to use this world: ``$PANEWARD_SSH``."""
        return {"PANEWARD_SSH": os.fspath(self.ssh), **extra}

    async def aclose(self) -> None:
        for server in self.servers.values():
            with anyio.CancelScope(shield=True):
                await server.stop()


@dataclass
class SshFleet:
    """What :func:`ssh_fleet` made: the ssh world, each host's daemon (in host order), the
    hosts file's fleet, and the local side's state directory and environment (its config
    directory holds that hosts file; ``$PANEWARD_SSH`` is the world's ssh)."""

    world: SshWorld
    remotes: list[DaemonProcess] = field(default_factory=list)
    hosts: core.Fleet = field(default_factory=core.Fleet)
    local_state: Path = Path()
    env: dict[str, str] = field(default_factory=dict)


@asynccontextmanager
async def ssh_fleet(
    root: Path, count: int, *, keepalive_s: int = 2, tmux: str = "tmux", discovery: bool = False
) -> AsyncIterator[SshFleet]:
    """``count`` hosts behind private sshd servers, each with a started daemon (``discovery``
    on or off, its harness homes empty either way), and the hosts file for a local daemon to
    follow them (started by the caller, on ``local_state`` with ``env``). Everything it started
    is stopped on the way out."""
    world = SshWorld(root / "ssh")
    made = SshFleet(world, hosts=core.Fleet(keepalive_s=keepalive_s))
    try:
        for i in range(count):
            name = f"h{i + 1}"
            await world.add_server(name)
            state = root / f"{name}-state"
            state.mkdir(mode=0o700)
            remote = DaemonProcess(state, discovery=discovery)
            await remote.start()
            made.remotes.append(remote)
            made.hosts = core.add_host(made.hosts, core.Host(
                name, world.remote_command(name, state), tmux))
        config = root / "config" / "paneward"
        config.mkdir(parents=True)
        (config / "fleet.toml").write_text(core.render_fleet(made.hosts))
        made.local_state = root / "local"
        made.local_state.mkdir(mode=0o700)
        made.env = daemon_env(made.local_state, XDG_CONFIG_HOME=os.fspath(root / "config"),
                              PANEWARD_SSH=os.fspath(world.ssh))
        yield made
    finally:
        with anyio.CancelScope(shield=True):
            for remote in made.remotes:
                await remote.__aexit__(None, None, None)
            await world.aclose()
