"""``paneward install-service``: the systemd user unit it writes (checked by the real
``systemd-analyze verify`` where it is installed), ``--uninstall``, ``--enable`` with and
without ``systemctl``, and the tmux autostart line it prints, run by a real private tmux server
that then has a real daemon attached.

There is no systemd user manager on this machine (``systemctl --user`` cannot reach a bus): the
real ``systemctl`` is run where its failure is the point; ``--enable``'s success path runs a
stand-in ``systemctl`` script that records its arguments, the one fake here."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from actors.core.install import service
from tests.support.daemon import PANEWARD, daemon_env, poll_until, request
from tests.support.tmux import TmuxServer


def paneward(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([os.fspath(PANEWARD), *args], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    base = daemon_env(tmp_path / "state 100%")  # a space and a % in a value the unit carries
    base["XDG_CONFIG_HOME"] = os.fspath(tmp_path / "config")
    return base


def unit_file(env: dict[str, str]) -> Path:
    return Path(env["XDG_CONFIG_HOME"]) / "systemd" / "user" / "paneward.service"


def test_the_unit_runs_this_paneward_and_restarts_it_on_failure(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = paneward(env, "install-service")
    assert done.returncode == 0, done.stderr
    path = unit_file(env)
    state = env["PANEWARD_STATE_DIR"].replace("%", "%%")
    assert path.read_text().splitlines() == [
        service.MARKER,
        "[Unit]",
        "Description=paneward: per-pane presence, turn and attention for coding agents",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={PANEWARD} run --tmux",
        f'Environment="PANEWARD_STATE_DIR={state}"',
        f'Environment="CLAUDE_CONFIG_DIR={env["CLAUDE_CONFIG_DIR"]}"',
        f'Environment="CODEX_HOME={env["CODEX_HOME"]}"',
        f'Environment="HERMES_HOME={env["HERMES_HOME"]}"',
        "Restart=on-failure",
        "RestartSec=2",
        "",
        "[Install]",
        "WantedBy=default.target",
    ]
    assert done.stdout.splitlines() == [
        f"wrote {path}",
        "start it now and at every login:",
        "  systemctl --user daemon-reload && systemctl --user enable --now paneward.service",
        "or, without systemd, start it with tmux: add to ~/.tmux.conf",
        f'  run-shell -b "{PANEWARD} run --tmux >/dev/null 2>&1 || true"',
    ]
    analyze = shutil.which("systemd-analyze")
    if analyze is not None:  # systemd's own parser, where the machine has it
        runtime = tmp_path / "runtime"
        runtime.mkdir(mode=0o700)
        checked = subprocess.run(
            [analyze, "--user", "verify", os.fspath(path)], capture_output=True, text=True,
            env={**env, "XDG_RUNTIME_DIR": os.fspath(runtime)}, timeout=60,
        )
        assert (checked.returncode, checked.stderr) == (0, ""), checked.stderr
    # the same again: nothing to write
    again = paneward(env, "install-service")
    assert again.returncode == 0 and again.stdout.startswith(f"{path} is up to date\n")
    # the tmux server and --no-tmux
    assert paneward(env, "install-service", "-L", "work").returncode == 0
    assert f"ExecStart={PANEWARD} run --tmux -L work\n" in path.read_text()
    assert paneward(env, "install-service", "--no-tmux").returncode == 0
    assert f"ExecStart={PANEWARD} run\n" in path.read_text()


def test_exec_start_words_are_quoted_for_systemd() -> None:
    assert service.exec_quote("/opt/my tools/paneward") == '"/opt/my tools/paneward"'
    assert service.exec_quote("50%$HOME") == "50%%$$HOME"
    assert service.exec_quote('a"b\\c') == '"a\\"b\\\\c"'
    with pytest.raises(ValueError, match="line break"):
        service.unit_text(["/bin/paneward\nExecStartPre=/bin/rm", "run"], {})


def test_uninstall_removes_exactly_its_unit_and_refuses_another(env: dict[str, str]) -> None:
    path = unit_file(env)
    assert paneward(env, "install-service").returncode == 0
    neighbour = path.with_name("other.service")
    neighbour.write_text("[Service]\nExecStart=/bin/true\n")
    wants = path.parent / "default.target.wants"
    wants.mkdir()
    (wants / "paneward.service").symlink_to(path)  # what `systemctl --user enable` makes
    (wants / "other.service").symlink_to(neighbour)
    done = paneward(env, "install-service", "--uninstall")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"removed {path}"
    assert not path.exists() and not (wants / "paneward.service").is_symlink()
    assert neighbour.exists() and (wants / "other.service").is_symlink()
    done = paneward(env, "install-service", "--uninstall")
    assert (done.returncode, done.stdout) == (0, f"no unit at {path}: nothing to remove\n")

    # a unit of the same name the user wrote is never overwritten nor removed
    path.write_text("[Service]\nExecStart=/usr/local/bin/mine\n")
    for argv in (["install-service"], ["install-service", "--uninstall"]):
        done = paneward(env, *argv)
        assert done.returncode == 1 and "was not written by paneward" in done.stderr
        assert path.read_text() == "[Service]\nExecStart=/usr/local/bin/mine\n"


def test_enable_runs_the_printed_systemctl_line_only_when_there_is_one(
    env: dict[str, str], tmp_path: Path
) -> None:
    path = unit_file(env)
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    done = paneward({**env, "PATH": os.fspath(bare)}, "install-service", "--enable")
    assert done.returncode == 1 and "systemctl not found, nothing done" in done.stderr
    assert "run-shell -b" in done.stderr  # the alternative
    assert not path.exists()

    real = shutil.which("systemctl")
    if real is not None:  # the real one, with no user manager to talk to: its error is said
        done = paneward(env, "install-service", "--enable")
        assert done.returncode == 1
        assert "paneward install-service: systemctl --user daemon-reload: " in done.stderr

    # A stand-in systemctl (no systemd user manager here) records what it is asked to run.
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    log = tmp_path / "systemctl.log"
    script = fake / "systemctl"
    script.write_text(f"#!/bin/sh\necho \"$*\" >> {shlex.quote(os.fspath(log))}\n")
    script.chmod(0o755)
    path_env = {**env, "PATH": os.fspath(fake) + os.pathsep + env["PATH"]}
    done = paneward(path_env, "install-service", "--enable")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "enabled and started paneward.service"
    assert log.read_text().splitlines() == [
        "--user daemon-reload", "--user enable --now paneward.service"
    ]
    assert paneward(path_env, "install-service", "--disable").returncode == 2
    done = paneward(path_env, "install-service", "--uninstall", "--disable")
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines()[-1] == "--user disable --now paneward.service"
    assert not path.exists()


async def test_the_tmux_autostart_line_starts_a_daemon_on_that_server(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {k: v for k, v in daemon_env(state).items() if k not in ("TMUX", "TMUX_PANE")}
    line = service.tmux_autostart_line(shlex.quote(os.fspath(PANEWARD)))
    conf = tmp_path / "tmux.conf"
    conf.write_text(line + "\n")
    server = TmuxServer()
    await anyio.run_process(
        server.argv("-f", os.fspath(conf), "new-session", "-d", "-s", "main"), env=env
    )
    pid = 0
    try:
        with anyio.fail_after(60):

            async def attached() -> bool:
                try:
                    status = await request(state / "control.sock", {"op": "status"})
                except OSError:
                    return False
                return bool(status["statistics"].get("tmux", {}).get("connected"))

            await poll_until(attached, "the daemon tmux started, connected to that server")
            pid = int((state / "daemon.lock").read_text())
            clients = await server.arun("list-clients", "-F", "#{client_control_mode}")
            assert clients.split() == ["1"]  # the daemon's control-mode client, nothing else
            # sourcing the configuration again starts no second daemon: the one it starts
            # refuses (the state directory is held) and is gone before the first is stopped,
            # which it would otherwise outlive, holding the state directory from then on
            await server.arun("source-file", os.fspath(conf))
            seen: set[int] = set()

            async def refused() -> bool:
                others = _daemons_of(state) - {pid}
                seen.update(others)
                return bool(seen) and not others

            await poll_until(refused, "the second daemon to refuse and exit", interval=0.005)
            assert int((state / "daemon.lock").read_text()) == pid
            counters = json.loads(
                (await anyio.run_process([os.fspath(PANEWARD), "status", "--counters"],
                                         env=env)).stdout
            )
            assert counters["tmux"]["connected"] is True
    finally:
        for daemon in _daemons_of(state) | ({pid} if pid else set()):
            os.kill(daemon, signal.SIGTERM)
        await server.arun("kill-server", check=False)
    with anyio.fail_after(20):
        await poll_until(lambda: not os.path.exists(f"/proc/{pid}"), "the daemon to end")
        await poll_until(lambda: not _daemons_of(state), "no daemon of that state dir left")


def _daemons_of(state: Path) -> set[int]:
    """The live ``paneward run`` processes started for ``state`` (by their environment)."""
    import psutil

    found = set()
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE or "run" not in (
                proc.info["cmdline"] or []
            ):
                continue
            if proc.environ().get("PANEWARD_STATE_DIR") == os.fspath(state):
                found.add(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found
