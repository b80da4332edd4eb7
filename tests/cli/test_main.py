"""The ``paneward`` command line as a user meets it: help, version, usage errors, the "no
daemon" messages, a tmux server that does not exist. Every command is the real console script
in a real process."""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path

import anyio
import pytest

from actors.cli import hook_client
from tests.support.daemon import PANEWARD, DaemonProcess, daemon_env
from tests.support.tmux import TmuxServer


def paneward(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [os.fspath(PANEWARD), *args], env=env, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No daemon: every socket under an empty state directory."""
    return {k: v for k, v in daemon_env(tmp_path / "state").items()
            if k not in ("TMUX", "TMUX_PANE")}


def test_version_and_bare_paneward(env: dict[str, str]) -> None:
    version = paneward(env, "version")
    flag = paneward(env, "--version")
    assert (flag.returncode, flag.stdout) == (0, version.stdout)
    assert flag.stdout.startswith("paneward ") and flag.stdout.strip() != "paneward"
    bare = paneward(env)
    assert bare.returncode == 0 and bare.stderr == ""
    assert bare.stdout.startswith("usage: paneward [-h] [--version] COMMAND")
    for command in ("run", "status", "wait", "ack", "forget", "install-service"):
        assert re.search(rf"\n    {command}\s", bare.stdout), command
    assert "starts none" in bare.stdout


@pytest.mark.parametrize(
    ("argv", "usage", "error"),
    [
        (["status", "--jsn"], "usage: paneward status ", "unrecognized arguments: --jsn"),
        (["watch", "--sine", "3"], "usage: paneward watch ", "unrecognized arguments: --sine 3"),
        (["wait", "--any", "--until", "attention", "--timout", "1"], "usage: paneward wait ",
         "unrecognized arguments: --timout 1"),
        (["next", "--knd", "failed"], "usage: paneward next ", "unrecognized arguments"),
        (["status", "--panes"], "usage: paneward status ",
         "--panes prints the pane views as JSON: give --json --panes"),
    ],
)
def test_a_usage_error_prints_that_subcommands_usage(
    env: dict[str, str], argv: list[str], usage: str, error: str
) -> None:
    done = paneward(env, *argv)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(usage), done.stderr
    assert f"paneward {argv[0]}: error: {error}" in done.stderr


def test_hook_help_is_the_hook_clients_own(env: dict[str, str]) -> None:
    for flag in ("--help", "-h"):
        done = paneward(env, "hook", flag)
        assert (done.returncode, done.stdout, done.stderr) == (0, hook_client.HELP, "")
    # The harness ids are not spelled here (they would drift): install-hooks lists them.
    for word in ("--owner", "env:CLAUDE_PID", "--forward-json", "install-hooks --help"):
        assert word in done.stdout, word


@pytest.mark.parametrize(
    "argv",
    [["status"], ["status", "--json"], ["watch"], ["next"], ["pick"],
     ["wait", "--any", "--until", "attention"], ["ack", "%1"], ["forget", "abc"], ["top"],
     ["inject", '{"type": "PaneClosed", "pane": "%1", "at_ms": 1795995370000}']],
)
def test_every_no_daemon_message_says_how_to_start_one(
    env: dict[str, str], argv: list[str]
) -> None:
    done = paneward(env, *argv)
    assert done.returncode == 2, done.stderr
    assert "no daemon" in done.stderr
    assert "start one with `paneward run`" in done.stderr, done.stderr


async def test_next_names_a_tmux_server_that_does_not_exist(tmp_path: Path) -> None:
    missing = TmuxServer()  # never started
    with anyio.fail_after(60):
        async with DaemonProcess(tmp_path / "state") as daemon:
            for command in ("next", "pick"):
                done = await anyio.to_thread.run_sync(
                    functools.partial(paneward, daemon.env, command, "-L", missing.name)
                )
                assert done.returncode == 1
                assert f"paneward {command}: tmux: the tmux server does not exist " \
                       f"(tmux -L {missing.name}: " in done.stderr, done.stderr
                assert "nothing needs you" not in done.stderr
    probe = await anyio.run_process(missing.argv("has-session"), check=False)
    assert probe.returncode != 0  # and none was started
