"""Text from outside reaches tmux whole: each tmux command paneward sends that carries a reason,
a path or a directory name, against a real tmux server on a private socket.

tmux parses what paneward sends in several places, each with its own rules: the ``tmux`` argv
(split into commands at every argument ending in ``;``), a command string (control mode, a
config file, a menu item's command: quotes, escapes, ``;``), a format (``#{…}``, ``#(…)``
runs a shell command, ``#S``; expanded once per use), and the lines of a listing paneward
parses back. The hostile values here are what an agent controls (its tool commands, the
directories it makes) or what a user's machine may hold (a ``#`` in a path).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

import messages
from actors.cli.common import tmux
from actors.core.text import printable
from actors.core.tmux.protocol import TmuxTarget
from actors.core.views.notify import NotifySettings
from actors.sinks.notify import Notifier
from actors.sinks.tmux import TmuxBridge
from actors.sinks.tmux_client import ControlClient
from messages import PaneBound, PaneOpened, ProgramStatus, PtyExit, PtySpawned, SessionKey
from tests.support.daemon import PANEWARD, DaemonProcess, daemon_env, poll_until, start_token
from tests.support.sinks import ListSink
from tests.support.tmux import (
    AttachedClient,
    TmuxServer,
    TransitionSource,
    activity,
    attached_client,
    drawn_text,
    eventually,
)

#: What an agent's tool command can hold: tmux's command separator (inside and at the end),
#: quotes, a shell command in a format, format variables, a conditional, a variable, escapes.
HOSTILE = "\"; run-shell 'true' ; #(true) #S #{pane_id} %if $HOME \\ \\; ls;"


def _now() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A private directory with a short path (sockets must fit in 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="pw-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _args(server: TmuxServer) -> argparse.Namespace:
    return argparse.Namespace(tmux_socket_name=server.name, tmux_socket_path=None)


async def test_argv_words_ending_in_a_semicolon_reach_tmux_whole(server: TmuxServer) -> None:
    """``next``/``pick`` run their commands as one ``tmux`` argv (``common.tmux``): a word ending in
    ``;`` (a reason, a message) stays one word of its command."""
    words = {"@a": "ls;", "@b": "x\\;", "@c": ";", "@d": "a;b", "@e": HOSTILE}
    with anyio.fail_after(20):
        await anyio.to_thread.run_sync(
            lambda: tmux(_args(server), *(["set-option", "-g", k, v] for k, v in words.items()))
        )
        for name, value in words.items():
            shown = await server.arun("show-options", "-g", "-v", name)
            assert shown.removesuffix("\n") == value


def _inject(env: dict[str, str], message: messages.Inbound) -> None:
    import subprocess

    subprocess.run(
        [os.fspath(PANEWARD), "inject", messages.encode(message).decode()],
        env=env, check=True, capture_output=True,
    )


async def _asking(env: dict[str, str], pane: str, reason: str, session: str = "s1") -> None:
    """A terminal session (this process is its live owner) shown in ``pane``, blocked on a
    permission whose message is ``reason``."""
    key = SessionKey("terminal", session)
    now = _now()
    for message in (
        PtySpawned(key=key, pid=os.getpid(), start_token=start_token(os.getpid()), at_ms=now,
                   observed_at_ms=now),
        PaneBound(key=key, pane=pane, at_ms=now + 1, proof="host"),
        ProgramStatus(key=key, state="blocked", kind="permission", message=reason, at_ms=now + 2,
                      observed_at_ms=now + 2),
    ):
        await anyio.to_thread.run_sync(_inject, env, message)


@asynccontextmanager
async def picking(env: dict[str, str], server: TmuxServer, user: AttachedClient,
                  *extra: str) -> AsyncIterator[anyio.abc.Process]:
    argv = [os.fspath(PANEWARD), "pick", "-L", server.name, "--client", user.name, *extra]
    pick = await anyio.open_process(argv, env=env)
    try:
        yield pick
    finally:
        if pick.returncode is None:
            pick.kill()  # the menu is still open: it would wait for ever
        with anyio.CancelScope(shield=True):
            await pick.aclose()


async def wait_menu(
    user: AttachedClient, mark: int, pick: anyio.abc.Process, *texts: str
) -> None:
    """Until the menu drawn on ``user`` after ``mark`` (bytes of its output) shows every one of
    ``texts``; fails at once when ``pick`` exits first (tmux refused the menu), with what it
    said."""

    async def exited() -> None:
        code = await pick.wait()
        assert pick.stderr is not None
        said = (await pick.stderr.receive()).decode(errors="replace") if code else ""
        raise AssertionError(f"pick exited {code} before its menu was drawn: {said}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(exited)
        await user.wait_output(lambda _: all(_menu_drawn(user, mark, t) for t in texts),
                               "the menu")
        tg.cancel_scope.cancel()


def _menu_drawn(user: AttachedClient, mark: int, text: str) -> bool:
    drawn = drawn_text(bytes(user.output[mark:]))
    title = drawn.find("paneward:attention")
    return title >= 0 and "".join(text.split()) in drawn[title:]


async def _client_pane(server: TmuxServer, user: AttachedClient) -> str:
    out = await server.arun("list-clients", "-F", "#{client_name}|#{pane_id}")
    return dict(line.split("|", 1) for line in out.splitlines())[user.name]


async def test_pick_draws_its_menu_whatever_the_reason_holds(
    server: TmuxServer, short_dir: Path
) -> None:
    """A reason ending in ``;`` (a permission for ``ls;``) and one full of tmux syntax are
    menu items shown as written; the menu is drawn and its item jumps."""
    env = {k: v for k, v in daemon_env(short_dir / "state").items()
           if k not in ("TMUX", "TMUX_PANE")}
    with anyio.fail_after(90):
        pane = await server.new_pane(window=True)
        other = await server.new_pane(window=True)
        async with (
            DaemonProcess(short_dir / "state", env=env),
            attached_client(server, "main") as user,
        ):
            await _asking(env, pane, "ls;", "s1")
            await _asking(env, other, HOSTILE, "s2")
            mark = len(user.output)
            async with picking(env, server, user, "--full-text") as pick:
                with anyio.fail_after(30):
                    await wait_menu(user, mark, pick, "ls;", HOSTILE)
                await user.type(b"1")
                with anyio.fail_after(20):
                    assert await pick.wait() == 0

            async def jumped() -> bool:
                return await _client_pane(server, user) == pane

            await poll_until(jumped, "the jump to the first item's pane")


async def test_the_menu_jumps_whatever_the_paths_of_paneward_and_its_socket(
    server: TmuxServer, short_dir: Path
) -> None:
    """A menu item's command is expanded twice (when the menu is built, and by ``run-shell``):
    a socket path holding ``#S``, ``#(…)`` and a line break reaches the ``paneward next`` it
    runs as is."""
    runtime = short_dir / "r#S#(echo x)\nx"
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in daemon_env(short_dir / "state").items()
           if k not in ("TMUX", "TMUX_PANE")}
    env["PANEWARD_SOCKET"] = os.fspath(runtime / "hook.sock")
    with anyio.fail_after(90):
        pane = await server.new_pane(window=True)
        async with DaemonProcess(short_dir / "state", env=env, runtime_dir=runtime), \
                attached_client(server, "main") as user:
            await _asking(env, pane, "permission prompt")
            mark = len(user.output)
            async with picking(env, server, user) as pick:
                with anyio.fail_after(30):
                    await wait_menu(user, mark, pick, pane)
                await user.type(b"1")
                with anyio.fail_after(20):
                    assert await pick.wait() == 0

            async def jumped() -> bool:
                return await _client_pane(server, user) == pane

            await poll_until(jumped, "the jump to the item's pane")


async def test_the_key_bindings_run_paneward_whatever_its_path(
    server: TmuxServer, short_dir: Path
) -> None:
    """``paneward tmux-config`` writes the full path of the paneward it is: its bindings run
    that program even when the path holds ``#S``, ``#{…}``, ``#(…)``, quotes, ``$`` and a
    line break."""
    bindir = short_dir / "b #S#{pane_id}#(echo x)'\"$HOME;\nx"
    bindir.mkdir()
    program = bindir / "paneward"
    program.symlink_to(PANEWARD)
    state = short_dir / "state"  # no daemon: `next` tells the client so
    env = {k: v for k, v in daemon_env(state).items() if k not in ("TMUX", "TMUX_PANE")}
    with anyio.fail_after(60):
        done = await anyio.run_process([os.fspath(program), "tmux-config"], env=env)
        conf = short_dir / "paneward.conf"
        conf.write_bytes(done.stdout)
        # run-shell's jobs get the server's environment: the test's state dir
        await server.arun("set-environment", "-g", "PANEWARD_STATE_DIR", os.fspath(state))
        await server.arun("source-file", os.fspath(conf))
        async with attached_client(server, "main") as user:
            await user.type(b"\x02a")  # prefix a

            async def told() -> bool:
                out = await server.arun("show-messages", "-t", user.name)
                return "message: paneward: no daemon at " in out

            await poll_until(told, "the binding's paneward to tell the client")


async def test_a_directory_name_with_a_newline_forges_no_pane_row(
    server: TmuxServer, short_dir: Path
) -> None:
    """The bridge parses its pane listing line by line: a pane whose directory's name holds a
    newline and a whole row (saying another, live pane died with status 1) is one pane, with
    that directory as its ``cwd``, byte for byte."""
    victim_pid = int((await server.arun("display-message", "-p", "-t", "%0",
                                        "#{pane_pid}")).strip())
    forged = f"x\n%0|{victim_pid}|1|1||0|\n%0|{victim_pid}|1|1||0|@0|y \\n | # $ \" '\r"
    hostile = short_dir / forged
    hostile.mkdir()
    sink = ListSink()
    source = TransitionSource()
    bridge = TmuxBridge(socket_name=server.name, backoff_initial=0.02, backoff_max=0.1)
    try:
        with anyio.fail_after(30):
            pane = (await server.arun("split-window", "-d", "-t", "main", "-c",
                                      os.fspath(hostile), "-P", "-F", "#{pane_id}",
                                      "sleep 600")).strip()

            async def tmux_knows_the_directory() -> bool:
                # tmux reads a pane's directory from its foreground process, which a pane
                # just forked has not got yet: until then the listing's field is empty
                path = await server.arun("display-message", "-p", "-t", pane,
                                         "#{pane_current_path}")
                return path.strip() != ""

            await poll_until(tmux_knows_the_directory, "tmux to know the new pane's directory")
            async with anyio.create_task_group() as tg:
                tg.start_soon(bridge.serve, source.receive, sink)
                opened = await sink.wait_one(
                    lambda m: isinstance(m, PaneOpened) and m.pane == pane
                )
                # a listing after the one that saw the new pane: nothing else came of it
                await server.arun("select-pane", "-t", pane)
                await sink.wait_one(lambda m: getattr(m, "pane", None) == pane
                                    and type(m).__name__ == "PaneFocused")
                tg.cancel_scope.cancel()
    finally:
        source.close()
    assert sink.of(PtyExit) == []
    assert isinstance(opened, PaneOpened) and opened.cwd == os.fspath(hostile)
    assert [m.pane for m in sink.of(PaneOpened)] == ["%0", pane]
    assert bridge.statistics().bad_pane_rows == 0


async def test_reasons_reach_pane_options_and_messages_as_written(
    server: TmuxServer,
) -> None:
    """A reason goes to tmux in a pane option (a command string over control mode) and in a
    notification (``display-message``, a format): stored and shown as written, never run or
    expanded (control characters become spaces in the option, as a border or status line
    needs, and escapes in the message, as every text paneward writes to a terminal)."""
    reason = HOSTILE + "\nnext line"
    shown = reason.replace("\n", " ")
    with anyio.fail_after(30):
        pane = await server.new_pane(window=True)
        source = TransitionSource()
        alerts = TransitionSource()
        bridge = TmuxBridge(socket_name=server.name, panes=False, full_text=True)
        notifier = Notifier(
            NotifySettings(channels=("tmux",), min_interval_ms=0, full_text=True), tmux=bridge
        )
        asking = activity("s", pane, turn="needs_input", attention="needs_input")
        assert asking.attention is not None
        asking = msgspec_replace(asking, reason)
        try:
            async with attached_client(server, "main") as user, \
                    ControlClient(TmuxTarget(socket_name=server.name)) as control, \
                    anyio.create_task_group() as tg:
                tg.start_soon(bridge.serve, source.receive, None)
                tg.start_soon(notifier.serve, alerts.receive)
                source.publish(asking)

                async def stored() -> bool:
                    return await server.show(pane, "@paneward_reason") == shown

                await eventually(stored)

                async def connected() -> bool:
                    return bridge.statistics().connected

                await eventually(connected)
                alerts.publish(asking)
                await notifier.wait_handled(1)

                async def told() -> bool:
                    [reply] = await control.run_batch([f'show-messages -t "{user.name}"'])
                    told = printable(f"paneward: terminal needs you in main:1.0 ({pane}): "
                                     f"{reason}")  # a message escapes every control
                    return any(line.endswith(f"message: {told}") for line in reply.lines)

                await poll_until(told, "the message as written")
                tg.cancel_scope.cancel()
        finally:
            source.close()
            alerts.close()
    assert notifier.statistics().tmux_errors == 0


def msgspec_replace(asking: messages.Activity, reason: str) -> messages.Activity:
    import msgspec

    assert asking.attention is not None
    return msgspec.structs.replace(
        asking,
        key=SessionKey("terminal", asking.key.session_id),
        attention=msgspec.structs.replace(asking.attention, reason=reason),
    )
