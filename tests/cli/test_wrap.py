"""``paneward wrap`` (actors.cli.wrap): real processes, real PTYs, a real private tmux server.

The wrapper runs as ``python -m actors.cli.wrap`` (the lead wires ``paneward wrap`` to
``wrap_main``); what it reports is read from a real Unix listener socket in the test.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

import messages
from actors.cli.wrap import (
    Reporter,
    UsageError,
    aliases,
    exit_status,
    infer_harness,
    parse_args,
    session_key,
    wrap_main,
)
from tests.support.wrap import WRAP, AgentTmuxServer, base_env, frame_listener

# -- pure parts -------------------------------------------------------------------------


def test_parse_args() -> None:
    opts = parse_args(["--", "claude", "--permission-mode", "manual"])
    assert (opts.command, opts.harness, opts.pass_status) == (
        ("claude", "--permission-mode", "manual"), "claude-code", False)
    opts = parse_args(["--harness", "cursor", "--pass-status", "--", "/usr/bin/codex"])
    assert (opts.command, opts.harness, opts.pass_status) == (("/usr/bin/codex",), "cursor", True)
    assert parse_args(["--harness=codex", "vim"]).harness == "codex"
    assert parse_args(["vim", "--", "x"]).command == ("vim", "--", "x")
    assert parse_args(["--aliases"]).aliases
    for bad, reason in [([], "no COMMAND"), (["--"], "no COMMAND"), (["--harness"], "needs a"),
                        (["--harness", "emacs", "--", "x"], "unknown harness 'emacs'"),
                        (["--frob", "--", "x"], "unknown option '--frob'")]:
        with pytest.raises(UsageError, match=reason):
            parse_args(bad)


def test_infer_harness_and_key() -> None:
    assert infer_harness("/opt/x/node_modules/.bin/claude") == "claude-code"
    assert infer_harness("codex") == "codex"
    assert infer_harness("claude.exe") == "terminal"
    assert infer_harness("bash") == "terminal"
    assert session_key("codex", 42, "777") == messages.SessionKey("codex", "pty-42-777")


def test_exit_status_like_a_shell() -> None:
    assert exit_status(3 << 8) == (3, 3, None)
    assert exit_status(15) == (143, None, 15)  # killed by SIGTERM
    assert exit_status(9 | 0x80) == (137, None, 9)  # SIGKILL with core flag


def test_aliases_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert aliases() == ("alias claude='paneward wrap -- claude'\n"
                         "alias codex='paneward wrap -- codex'\n")
    assert wrap_main(["--aliases"]) == 0
    assert capsys.readouterr().out == aliases()
    assert wrap_main(["--harness", "x", "--", "true"]) == 2
    assert "unknown harness 'x'" in capsys.readouterr().err


def test_reporter_queue_is_bounded_and_counts_drops(tmp_path: Path) -> None:
    reporter = Reporter(tmp_path / "absent.sock", max_frames=3)
    key = messages.SessionKey("terminal", "pty-1-1")
    for _ in range(5):
        reporter.send_nowait(messages.ProgramStatus(
            state="working", at_ms=1_700_000_000_000, observed_at_ms=1_700_000_000_000, key=key))
    reporter.send_nowait(messages.ProgramStatus(  # invalid: rejected, never queued
        state="working", at_ms=5, observed_at_ms=5, key=key))
    reporter.maybe_connect(0.0)  # nobody listens: stays disconnected, no exception
    stats = reporter.statistics()
    assert (stats.queued, stats.dropped, stats.rejected, stats.connected) == (3, 2, 1, False)


# -- real processes -------------------------------------------------------------------------


@pytest.fixture
def sock(tmp_path: Path) -> Path:
    return tmp_path / "d.sock"


def _env(sock: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    env["PANEWARD_SOCKET"] = str(sock)
    return env


async def test_exit_code_is_the_childs(sock: Path) -> None:
    with anyio.fail_after(20):
        async with frame_listener(sock) as frames:
            result = await anyio.run_process(
                [*WRAP, "--", "sh", "-c", "echo out; exit 3"], env=_env(sock),
                stdin=subprocess.DEVNULL, check=False)
            assert result.returncode == 3
            assert result.stdout == b"out\r\n"
            await frames.wait_for(lambda items: len(items) == 2)
            spawned, exited = frames.items
            assert isinstance(spawned, messages.PtySpawned)
            assert isinstance(exited, messages.PtyExit)
            assert spawned.key == messages.SessionKey(
                "terminal", f"pty-{spawned.pid}-{spawned.start_token}")
            assert spawned.pane is None
            assert (exited.key, exited.code, exited.signal) == (spawned.key, 3, None)


async def test_signal_death_is_reported_and_exits_128_plus_n(sock: Path) -> None:
    with anyio.fail_after(20):
        async with frame_listener(sock) as frames:
            result = await anyio.run_process(
                [*WRAP, "--", "sh", "-c", "kill -TERM $$"], env=_env(sock),
                stdin=subprocess.DEVNULL, check=False)
            assert result.returncode == 143
            await frames.wait_for(lambda items: any(
                isinstance(m, messages.PtyExit) for m in items))
            (exited,) = frames.of(messages.PtyExit)
            assert isinstance(exited, messages.PtyExit)
            assert (exited.code, exited.signal) == (None, 15)


async def test_end_of_piped_input_reaches_the_child_as_eof(tmp_path: Path) -> None:
    """Like `script`: when the wrapper's (non-terminal) stdin ends, the child reads EOF."""
    with anyio.fail_after(20):
        result = await anyio.run_process(
            [*WRAP, "--", "sh", "-c", "cat; echo done; exit 4"],
            input=b"one\ntwo\n", env=_env(tmp_path / "nobody.sock"), check=False)
    assert result.returncode == 4
    # the PTY echoes the input, cat repeats it, then cat sees EOF and sh goes on
    assert result.stdout.endswith(b"done\r\n")
    assert result.stdout.count(b"two") == 2


async def test_missing_command_exits_127_without_a_daemon(tmp_path: Path) -> None:
    with anyio.fail_after(20):
        result = await anyio.run_process(
            [*WRAP, "--", str(tmp_path / "no-such-program")],
            env=_env(tmp_path / "nobody.sock"), stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 127
    assert b"No such file or directory" in result.stderr


async def test_status_records_are_stripped_and_reported(sock: Path, tmp_path: Path) -> None:
    page = tmp_path / "page"
    page.write_bytes(b"a\x1b]7501;state=working:app=t:msg=aGk=\x1b\\b\x1b]0;t\x07c")
    with anyio.fail_after(20):
        async with frame_listener(sock) as frames:
            plain = await anyio.run_process([*WRAP, "--", "cat", str(page)], env=_env(sock),
                                            stdin=subprocess.DEVNULL)
            kept = await anyio.run_process(
                [*WRAP, "--pass-status", "--", "cat", str(page)], env=_env(sock),
                stdin=subprocess.DEVNULL)
            await frames.wait_for(lambda items: len(frames.of(messages.PtyExit)) == 2)
    assert plain.stdout == b"ab\x1b]0;t\x07c"
    assert kept.stdout == page.read_bytes()
    statuses = frames.of(messages.ProgramStatus)
    assert [(m.state, m.app, m.message) for m in statuses  # type: ignore[union-attr]
            ] == [("working", "t", "hi")] * 2
    spawned = frames.of(messages.PtySpawned)
    assert [m.key for m in statuses] == [m.key for m in spawned]  # type: ignore[union-attr]


async def test_without_a_daemon_output_is_intact(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(os.urandom(3 * 1024 * 1024).replace(b"\x1b", b"E"))
    with anyio.fail_after(30):
        result = await anyio.run_process(
            [*WRAP, "--", "cat", str(big)], env=_env(tmp_path / "nobody.sock"),
            stdin=subprocess.DEVNULL)
    # The PTY turns \n into \r\n (onlcr), exactly as a terminal would see it.
    assert result.stdout == big.read_bytes().replace(b"\n", b"\r\n")


async def test_reconnects_when_the_daemon_appears_later(sock: Path) -> None:
    with anyio.fail_after(30):
        async with await anyio.open_process(
            [*WRAP, "--", "sh", "-c", "read x; echo got-$x"], env=_env(sock),
        ) as proc:
            assert proc.stdin is not None
            async with frame_listener(sock) as frames:
                # Reconnection is attempted once a second: PtySpawned arrives first.
                await frames.wait_for(lambda items: len(items) >= 1)
                assert isinstance(frames.items[0], messages.PtySpawned)
                await proc.stdin.send(b"go\n")
                await frames.wait_for(lambda items: any(
                    isinstance(m, messages.PtyExit) for m in items))
            assert await proc.wait() == 0
    exited = frames.of(messages.PtyExit)[0]
    assert isinstance(exited, messages.PtyExit)
    assert exited.code == 0


# -- inside a real tmux pane ---------------------------------------------------------------



SIGINT_CHILD = (
    "import signal, sys\n"
    "def on_int(*_):\n"
    "    print('GOT-INT', flush=True)\n"
    "    sys.exit(7)\n"
    "signal.signal(signal.SIGINT, on_int)\n"
    "print('READY', flush=True)\n"
    "while True:\n"
    "    signal.pause()\n"
)


async def test_ctrl_c_in_the_pane_reaches_the_child(tmux: AgentTmuxServer, sock: Path) -> None:
    with anyio.fail_after(30):
        async with frame_listener(sock) as frames:
            pane = tmux.start([*WRAP, "--", sys.executable, "-c", SIGINT_CHILD], base_env(sock))
            await tmux.wait_text(pane, "READY")
            tmux.run("send-keys", "-t", pane, "C-c")
            assert await tmux.wait_dead(pane) == 7
            assert "GOT-INT" in tmux.capture(pane)
            await frames.wait_for(lambda items: any(
                isinstance(m, messages.PtyExit) for m in items))
    spawned = frames.of(messages.PtySpawned)[0]
    exited = frames.of(messages.PtyExit)[0]
    assert isinstance(spawned, messages.PtySpawned) and isinstance(exited, messages.PtyExit)
    assert spawned.pane == pane == exited.pane
    assert (exited.code, exited.signal) == (7, None)


async def test_pane_resize_reaches_the_child(tmux: AgentTmuxServer, sock: Path) -> None:
    with anyio.fail_after(30):
        pane = tmux.start(
            [*WRAP, "--", "sh", "-c", "stty size; echo READY; read x; stty size; read x"],
            base_env(sock), width=80, height=24)
        screen = await tmux.wait_text(pane, "READY")
        assert "24 80" in screen
        tmux.run("resize-window", "-t", pane, "-x", "100", "-y", "30")
        tmux.run("send-keys", "-t", pane, "Enter")
        await tmux.wait_text(pane, "30 100")
        tmux.run("send-keys", "-t", pane, "Enter")
        assert await tmux.wait_dead(pane) == 0


PROBE_CHILD = (
    "import os, sys, termios, tty\n"
    "tty.setraw(0)\n"
    "os.write(1, b'\\x1b]7501;?\\x07')\n"
    "got = b''\n"
    "while not got.endswith(b'\\x07'):\n"
    "    got += os.read(0, 100)\n"
    "os.write(1, b'\\r\\nANSWER ' + repr(got).encode() + b'\\r\\n')\n"
    "os.write(1, b'\\x1b]7501;state=idle:app=probe-test\\x07')\n"
    "os.read(0, 1)\n"
)


async def test_probe_is_answered_inside_tmux(tmux: AgentTmuxServer, sock: Path) -> None:
    with anyio.fail_after(30):
        async with frame_listener(sock) as frames:
            pane = tmux.start([*WRAP, "--", sys.executable, "-c", PROBE_CHILD], base_env(sock))
            await tmux.wait_text(pane, "ANSWER b'\\x1b]7501;?\\x07'")
            await frames.wait_for(lambda items: any(
                isinstance(m, messages.ProgramStatus) for m in items))
            tmux.run("send-keys", "-t", pane, "q")
            assert await tmux.wait_dead(pane) == 0
    status = frames.of(messages.ProgramStatus)[0]
    assert isinstance(status, messages.ProgramStatus)
    assert (status.state, status.app, status.pane) == ("idle", "probe-test", pane)


# -- outside tmux, behind a terminal that this test plays -----------------------------------

DA1_CHILD = (
    "import os, tty\n"
    "tty.setraw(0)\n"
    "os.write(1, b'\\x1b]7501;?\\x07\\x1b[c')\n"
    "got = b''\n"
    "while not got.endswith(b'c'):\n"
    "    got += os.read(0, 100)\n"
    "os.write(1, b'GOT ' + repr(got).encode() + b' END')\n"
)


def _read_until(fd: int, marker: bytes, deadline: float) -> bytes:
    got = b""
    while marker not in got:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise TimeoutError(f"{marker!r} not seen; got {got!r}")
        got += os.read(fd, 4096)
    return got


@pytest.mark.parametrize(
    ("terminal_reply", "child_gets"),
    [
        # A terminal that does not know OSC 7501 answers only DA1: the wrapper answers the
        # probe just before that DA1 reply, so Claude sees the 7501 answer first.
        (b"\x1b[?62;22c", b"\x1b]7501;?\x07\x1b[?62;22c"),
        # A terminal that knows OSC 7501 answers it itself: the wrapper adds nothing.
        (b"\x1b]7501;?\x07\x1b[?62;22c", b"\x1b]7501;?\x07\x1b[?62;22c"),
    ],
)
def test_probe_outside_tmux_waits_for_the_outer_terminal(
    tmp_path: Path, terminal_reply: bytes, child_gets: bytes
) -> None:
    master, slave = os.openpty()
    env = _env(tmp_path / "nobody.sock")
    proc = subprocess.Popen([*WRAP, "--", sys.executable, "-c", DA1_CHILD], stdin=slave,
                            stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    try:
        deadline = time.monotonic() + 20
        # The probe reaches the outer terminal (it may know OSC 7501), then DA1.
        assert b"\x1b]7501;?\x07\x1b[c" in _read_until(master, b"\x1b[c", deadline)
        os.write(master, terminal_reply)
        shown = _read_until(master, b" END", deadline)
        assert f"GOT {child_gets!r} END".encode() in shown
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
