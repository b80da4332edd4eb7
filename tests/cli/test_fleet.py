"""The fleet's hosts file, ``paneward fleet add|remove|list|check`` and ``watch --fleet``.

The rules are pure (:mod:`actors.core.fleet.hosts`); ``check`` runs against real ``sshd`` servers
on loopback (:mod:`tests.support.ssh`: throwaway host and client keys, never the system's
sshd) in front of real daemons (:class:`tests.support.daemon.DaemonProcess`), one reason per way a
host can be out of reach.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

import messages
from actors.core.fleet import hosts as core
from tests.support.daemon import PANEWARD, DaemonProcess
from tests.support.ssh import SshWorld

# --------------------------------------------------------------------------- the hosts file


def test_the_hosts_file_round_trips_and_keeps_the_order() -> None:
    fleet = core.Fleet()
    for host in (core.Host("gpu1"), core.Host("me@10.0.0.5", "~/venv/bin/paneward", "tmux -L w"),
                 core.Host('odd"name\\x')):
        fleet = core.add_host(fleet, host)
    text = core.render_fleet(fleet)
    assert core.parse_fleet(text) == fleet
    assert [h.name for h in core.parse_fleet(text).hosts] == ["gpu1", "me@10.0.0.5",
                                                             'odd"name\\x']
    replaced = core.add_host(fleet, core.Host("gpu1", "/opt/pw/bin/paneward"))
    assert replaced.hosts[0].command == "/opt/pw/bin/paneward"
    assert core.remove_host(replaced, "gpu1").hosts == fleet.hosts[1:]


def test_a_nats_entry_round_trips_beside_the_ssh_hosts() -> None:
    fleet = core.add_host(core.Fleet(), core.Host("gpu1"))
    fleet = core.add_nats(fleet, core.NatsEntry("tls://nats.lan:4222", creds="/k/f.creds",
                                                 tls_ca="/k/ca.pem", stream="PW"))
    fleet = core.add_nats(fleet, core.NatsEntry("nats://127.0.0.1:4222"))
    assert core.parse_fleet(core.render_fleet(fleet)) == fleet
    assert [n.url for n in fleet.nats] == ["tls://nats.lan:4222", "nats://127.0.0.1:4222"]
    assert core.is_nats_url("nats://x:1") and not core.is_nats_url("gpu1")
    assert not core.is_nats_url("me@nats")
    removed = core.remove_host(fleet, "tls://nats.lan:4222")
    assert (removed.hosts, [n.url for n in removed.nats]) == (fleet.hosts,
                                                               ["nats://127.0.0.1:4222"])
    settings = fleet.nats[0].settings("follower")
    assert (settings.url, settings.creds, settings.stream) == (
        "tls://nats.lan:4222", "/k/f.creds", "PW")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[[host]\n", "not valid TOML"),
        ("hosts = 1\n", "unknown setting 'hosts'"),
        ("keepalive_s = 0\n", "keepalive_s"),
        ("[[host]]\ncommand = 'x'\n", "host 1: destination, command and tmux must be strings"),
        ("[[host]]\ndestination = '-oProxyCommand=evil'\n", "not an ssh destination"),
        ("[[host]]\ndestination = 'a b'\n", "not an ssh destination"),
        ("[[host]]\ndestination = \"a\\u001b[2J\"\n", "not an ssh destination"),
        ("[[host]]\ndestination = 'a'\ncommand = \"pw\\nrm -rf ~\"\n", "not a command"),
        ("[[host]]\ndestination = 'a'\nport = 22\n", "unknown key 'port'"),
        ("[[host]]\ndestination = 'a'\ntmux = 3\n", "must be strings"),
        ("[[host]]\ndestination = 'a'\n[[host]]\ndestination = 'a'\n", "listed twice"),
        ("[[nats]]\ncreds = '/c'\n", "nats 1: a url"),
        ("[[nats]]\nurl = 'http://x:1'\n", "is not a NATS URL"),
        ("[[nats]]\nurl = 'nats://me:pw@x:1'\n", "never in the URL"),
        ("[[nats]]\nurl = 'nats://x:1'\ntls_cert = '/c'\n", "needs both tls_cert and tls_key"),
        ("[[nats]]\nurl = 'nats://x:1'\nstream = 'a.b'\n", "stream: letters, digits"),
        ("[[nats]]\nurl = 'nats://x:1'\nuser = 'me'\n", "nats 1: unknown key 'user'"),
        ("[[nats]]\nurl = 'nats://x:1'\n[[nats]]\nurl = 'nats://x:1'\n", "listed twice"),
    ],
)
def test_a_bad_hosts_file_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(core.FleetFileError, match=None) as caught:
        core.parse_fleet(text)
    assert says in str(caught.value)


def test_ssh_runs_in_batch_mode_with_keepalives_on_one_multiplexed_connection() -> None:
    host = core.Host("gpu1", "~/bin/paneward")
    argv = core.ssh_argv(host, "/run/user/1/paneward/fleet", core.watch_command(host, 41),
                         keepalive_s=7)
    options = {argv[i + 1] for i, word in enumerate(argv) if word == "-o"}
    assert {"BatchMode=yes", "ServerAliveInterval=7", "ServerAliveCountMax=1",
            "ControlMaster=auto", f"ControlPersist={core.CONTROL_PERSIST_S}",
            f"ControlPath=/run/user/1/paneward/fleet/{core.control_name(host)}"} <= options
    # ssh expands % in the path: a % of the directory's own is written %%
    odd = core.ssh_argv(host, "/tmp/a%b", [], keepalive_s=7)
    assert f"ControlPath=/tmp/a%%b/{core.control_name(host)}" in odd
    # the destination comes after "--": it can never be read as an option
    tail = argv[argv.index("--") + 1 :]
    assert tail == ["gpu1", "~/bin/paneward", "watch", "--json", "--fleet", "--since", "41"]


def test_the_control_sockets_always_fit_a_unix_socket_path() -> None:
    """``<runtime>/fleet`` when its sockets' paths fit ``sun_path`` (ssh binds the path plus
    a 17-character temporary suffix first), else a short private ``/tmp/paneward-UID``."""
    here = "/run/user/1000/paneward"
    assert core.control_dir(here, 1000) == "/run/user/1000/paneward/fleet"
    # no $XDG_RUNTIME_DIR: the runtime dir is the state dir, under a $HOME of any length
    assert core.control_dir("/home/firstname.lastname/.local/state/paneward", 1000) == (
        "/home/firstname.lastname/.local/state/paneward/fleet")
    state = "/home/firstname.lastname/containers/gpu-dev-box/.local/state/paneward"
    fallback = core.control_dir(state, 1000)
    assert os.path.dirname(fallback) == "/tmp/paneward-1000"
    # a second daemon of the same user (another state dir) gets masters of its own
    other = core.control_dir(state + "-2", 1000)
    assert os.path.dirname(other) == "/tmp/paneward-1000" and other != fallback
    host = core.Host("a-rather-long-alias.of-a-gpu-box.example.com")
    for runtime in (here, state, "/" + "x" * 300, "/tmp/" + "é" * 30):
        for uid in (0, 4294967294):
            directory = core.control_dir(runtime, uid)
            socket = os.path.join(directory, core.control_name(host)) + "." + "X" * 16
            assert len(os.fsencode(socket)) < 108, socket  # sun_path, with its NUL


@pytest.mark.parametrize(
    ("code", "stderr", "says"),
    [
        (255, "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\nHost key verification "
         "failed.", "host key changed"),
        (255, "Host key verification failed.", "host key not trusted"),
        (255, "root@127.0.0.1: Permission denied (publickey).", "permission denied"),
        (255, "ssh: connect to host 127.0.0.1 port 9: Connection refused", "connection refused"),
        (127, "bash: line 1: paneward: command not found", "paneward not installed there"),
        (2, "paneward: error: unrecognized arguments: --fleet", "paneward too old there"),
        (2, "paneward watch: no daemon at /x/control.sock (...); start one", "daemon not running"),
        (3, "something \x1b[31mred", "ssh exited 3: something ?[31mred"),
    ],
)
def test_why_a_host_is_unreachable_in_words_to_act_on(code: int, stderr: str, says: str) -> None:
    assert says in core.unreachable_reason(code, stderr, command="paneward")


# --------------------------------------------------------------------------- the commands


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([os.fspath(PANEWARD), *args], env=env, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # The ControlPath socket (this dir + /paneward/fleet/ + a 40-character hash + ssh's own
    # 17-character suffix) must fit a Unix socket path: pytest's tmp_path is too long.
    with tempfile.TemporaryDirectory(prefix="pwf", dir="/tmp") as name:
        yield Path(name)


def _env(root: Path, world: SshWorld | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PANEWARD_SOCKET", "PANEWARD_STATE_DIR", "XDG_STATE_HOME")}
    env.update(XDG_CONFIG_HOME=os.fspath(root / "config"),
               XDG_RUNTIME_DIR=os.fspath(root / "run"))
    if world is not None:
        env.update(world.env())
    return env


def test_fleet_add_remove_list_edit_the_hosts_file(short_dir: Path) -> None:
    env = _env(short_dir)
    assert _run(env, "fleet", "list").stdout == ""
    assert _run(env, "fleet", "add", "gpu1").returncode == 0
    assert _run(env, "fleet", "add", "me@10.0.0.5", "--command", "/opt/pw/paneward").returncode == 0
    assert _run(env, "fleet", "list").stdout == "gpu1\nme@10.0.0.5  (/opt/pw/paneward)\n"
    path = short_dir / "config" / "paneward" / "fleet.toml"
    assert core.parse_fleet(path.read_text()).host("gpu1") == core.Host("gpu1")
    bad = _run(env, "fleet", "add", "-oProxyCommand=x")
    assert bad.returncode != 0
    assert _run(env, "fleet", "remove", "gpu1").returncode == 0
    missing = _run(env, "fleet", "remove", "gpu1")
    assert (missing.returncode, "no host 'gpu1'" in missing.stderr) == (2, True)
    assert _run(env, "fleet", "list").stdout == "me@10.0.0.5  (/opt/pw/paneward)\n"
    added = _run(env, "fleet", "add", "nats://127.0.0.1:4222", "--nats-nkey", "k.nk")
    assert added.returncode == 0 and "every host on nats://127.0.0.1:4222" in added.stdout
    server = core.parse_fleet(path.read_text()).server("nats://127.0.0.1:4222")
    assert server is not None and server.nkey == os.path.abspath("k.nk")
    assert _run(env, "fleet", "list").stdout == (
        "me@10.0.0.5  (/opt/pw/paneward)\nnats://127.0.0.1:4222  (NATS: every host publishing "
        "there)\n")
    secret = _run(env, "fleet", "add", "nats://me:hunter2@127.0.0.1:4222")
    assert secret.returncode == 2 and "never in the URL" in secret.stderr
    assert "hunter2" not in secret.stderr
    path.write_text("[[host]]\ndestination = 'a b'\n")
    broken = _run(env, "fleet", "list")
    assert broken.returncode == 2
    assert f"{path}: host 1: not an ssh destination" in broken.stderr


@pytest.fixture
async def world(short_dir: Path) -> AsyncIterator[SshWorld]:
    ssh = SshWorld(short_dir / "ssh")
    try:
        yield ssh
    finally:
        await ssh.aclose()


async def test_fleet_check_says_ok_or_exactly_why_not(
    world: SshWorld, short_dir: Path
) -> None:
    """One host per way to fail, each behind a real sshd; the one that works answers with its
    daemon's identity; the connection is the one ``ControlPath`` under the runtime dir."""
    with anyio.fail_after(180):
        good = await world.add_server("good")
        await world.add_server("untrusted", trusted=False)
        state = short_dir / "good-state"
        idle_state = short_dir / "idle-state"
        for made in (state, idle_state):
            made.mkdir(mode=0o700)
        env = _env(short_dir, world)
        stranger = world.client / "stranger"
        await anyio.run_process(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", stranger])
        world.alias("nokey", good.port, key=stranger)
        closed = _closed_port()
        world.alias("closed", closed)
        world.alias("nopaneward", good.port)
        world.alias("nodaemon", good.port)
        # "changed": good's port under another name, with another key in known_hosts
        other = world.servers["untrusted"].public_host_key()
        world.alias("changed", good.port)
        with world.known_hosts.open("a") as out:
            out.write(f"[localhost]:{good.port} ssh-ed25519 {other}\n")
        # ssh keys known_hosts by HostName: give "changed" its own name for the same server
        world.config.write_text(world.config.read_text().replace(
            "Host changed\n  HostName 127.0.0.1", "Host changed\n  HostName localhost"))
        adds = [
            ("good", world.remote_command("good", state)),
            ("untrusted", world.remote_command("untrusted", state)),
            ("nokey", world.remote_command("good", state)),
            ("closed", "paneward"),
            ("nopaneward", "/nonexistent/bin/paneward"),
            ("nodaemon", world.remote_command("idle", idle_state)),
            ("changed", world.remote_command("good", state)),
        ]
        for name, command in adds:
            added = await anyio.to_thread.run_sync(
                _run, env, "fleet", "add", name, "--command", command
            )
            assert added.returncode == 0, added
        async with DaemonProcess(state):
            result = await anyio.to_thread.run_sync(lambda: _run(env, "fleet", "check"))
            only_good = await anyio.to_thread.run_sync(
                lambda: _run(env, "fleet", "check", "good")
            )
        lines = dict(line.split(None, 1) for line in result.stdout.splitlines())
        assert result.returncode == 1, result
        assert lines["good"].startswith("ok: paneward "), lines
        assert "host key not trusted" in lines["untrusted"]
        assert "permission denied" in lines["nokey"]
        assert "connection refused" in lines["closed"]
        assert "paneward not installed there" in lines["nopaneward"]
        assert "daemon not running there" in lines["nodaemon"]
        assert "host key changed" in lines["changed"]
        control = short_dir / "run" / "paneward" / "fleet"
        assert control.stat().st_mode & 0o777 == 0o700
        assert only_good.returncode == 0, only_good


async def test_fleet_check_works_without_a_runtime_dir_under_a_long_home(
    world: SshWorld, short_dir: Path
) -> None:
    """No ``$XDG_RUNTIME_DIR`` and a ``$HOME`` of 60 characters: the runtime dir is the state
    dir, too long for ``<runtime>/fleet/<socket>``; the sockets go to ``/tmp/paneward-UID``
    (0700) and the host answers."""
    with anyio.fail_after(120):
        await world.add_server("good")
        state = short_dir / "good-state"
        state.mkdir(mode=0o700)
        home = short_dir / ("h" * (60 - len(os.fspath(short_dir)) - 1))
        home.mkdir()
        env = _env(short_dir, world)
        del env["XDG_RUNTIME_DIR"]
        env["HOME"] = os.fspath(home)
        added = await anyio.to_thread.run_sync(
            _run, env, "fleet", "add", "good", "--command", world.remote_command("good", state))
        assert added.returncode == 0, added
        async with DaemonProcess(state):
            result = await anyio.to_thread.run_sync(lambda: _run(env, "fleet", "check"))
        assert result.returncode == 0, result
        assert result.stdout.startswith("good  ok: paneward "), result.stdout
        short = os.stat(f"/tmp/paneward-{os.getuid()}")
        assert (short.st_mode & 0o777, short.st_uid) == (0o700, os.getuid())


def test_a_short_control_dir_that_is_not_ours_alone_is_refused(short_dir: Path) -> None:
    """The fallback directory is in a shared place: used only when it is a real directory,
    ours, closed to everyone else; otherwise refused with the reason."""
    from actors.cli.fleet import prepare_control_dir

    runtime = "/" + "r" * 80
    mine = short_dir / f"paneward-{os.getuid()}"
    made = Path(prepare_control_dir(runtime, short_base=os.fspath(short_dir)))
    assert made.parent == mine
    assert (mine.stat().st_mode & 0o777, made.stat().st_mode & 0o777) == (0o700, 0o700)
    made.rmdir()
    mine.chmod(0o755)
    with pytest.raises(core.FleetFileError, match="accessible by other users"):
        prepare_control_dir(runtime, short_base=os.fspath(short_dir))
    mine.rmdir()
    elsewhere = short_dir / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    mine.symlink_to(elsewhere)
    with pytest.raises(core.FleetFileError, match="symbolic link"):
        prepare_control_dir(runtime, short_base=os.fspath(short_dir))


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: nothing listens there


async def test_watch_fleet_starts_with_the_daemon_identity_then_replay_then_snapshot(
    tmp_path: Path,
) -> None:
    """``watch --fleet --since N``: a Daemon line (same id across a restart, another run),
    the journal after N, the snapshot at the Daemon's seq, then live."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    env = {**os.environ, "PANEWARD_STATE_DIR": os.fspath(state)}
    env.pop("XDG_RUNTIME_DIR", None)
    env.pop("PANEWARD_SOCKET", None)

    def inject(n: int) -> None:
        frame = {"type": "ProgramStatus", "state": "working" if n % 2 else "idle",
                 "key": {"harness": "terminal", "session_id": "t1"},
                 "at_ms": 1795995370911 + n, "observed_at_ms": 1795995370911 + n}
        subprocess.run([os.fspath(PANEWARD), "inject", json.dumps(frame)], env=env, check=True)

    async def first_lines(since: int, count: int) -> list[messages.Outbound]:
        async with await anyio.open_process(
            [os.fspath(PANEWARD), "watch", "--fleet", "--since", str(since)], env=env
        ) as proc:
            assert proc.stdout is not None
            data = b""
            while data.count(b"\n") < count:
                data += await proc.stdout.receive()
            proc.terminate()
        return [messages.decode_outbound(line) for line in data.splitlines()[:count]]

    with anyio.fail_after(120):
        async with DaemonProcess(state, env=env):
            for n in range(4):
                await anyio.to_thread.run_sync(inject, n)
            lines = await first_lines(1, 5)
        hello, *replay, snapshot = lines
        assert isinstance(hello, messages.Daemon)
        assert [t.seq for t in replay if isinstance(t, messages.Transition)] == [2, 3, 4]
        assert isinstance(snapshot, messages.Snapshot)
        assert snapshot.seq == hello.seq == 4
        async with DaemonProcess(state, env=env):
            (again,) = await first_lines(4, 1)
        assert isinstance(again, messages.Daemon)
        assert (again.id, again.run != hello.run, again.seq >= 4) == (hello.id, True, True)


def test_a_jump_attaches_to_a_plain_pane_id_only() -> None:
    host = core.Host("gpu1", tmux="tmux -L work")
    argv = core.attach_argv(host, "/run/pw/fleet", "%12", keepalive_s=5)
    assert argv is not None and argv[1] == "-t"  # a terminal for tmux there
    assert argv[argv.index("--") + 1 :] == [
        "gpu1", "tmux -L work", "attach-session", "-t", "%12", "\\;", "select-window", "-t",
        "%12", "\\;", "select-pane", "-t", "%12"]
    for hostile in ("%1; rm -rf ~", "$(reboot)", "%", "main:1.2"):
        assert core.attach_argv(host, "/run/pw/fleet", hostile, keepalive_s=5) is None
