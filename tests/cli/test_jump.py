"""Acting on attention, end to end: ``paneward run --tmux`` on a private tmux server with several
sessions and windows, fake agents in its panes (processes renamed to ``claude`` that write a
Claude registry file, driven by typing into their panes as in tests/cli/test_daemon_tmux.py), and a
real client attached in a PTY the test holds, as a user's terminal would run it.

- ``paneward next`` moves that client to the oldest ``needs_input``, then the next; a
  ``turn_done`` it jumps to is cleared.
- ``paneward pick`` draws the queue, in order, as a tmux menu on that client; choosing an item
  (its key typed on the client's keyboard) jumps there.
- Notifications: the tmux ``display-message`` on the attached client (observed through a
  control-mode client of the test's own, reading the client's message log with
  ``show-messages``) and the OSC 9 sequence tmux passed through to the client's terminal (read
  from the PTY), for a pane the client does not show; nothing for the pane it shows.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from actors.core.tmux.protocol import TmuxTarget
from actors.sinks.tmux_client import ControlClient
from actors.sources import procfs
from tests import support
from tests.support.daemon import PANEWARD, DaemonProcess, daemon_env, poll_until
from tests.support.tmux import (
    AttachedClient,
    TmuxServer,
    attached_client,
    drawn_text,
    eventually,
)

FAKE_CLAUDE = support.FIXTURES / "claude_registry" / "fake_claude.py"

pytestmark = pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="renaming needs Linux /proc")


class Agents:
    """Fake Claude agents in panes of the test's server."""

    def __init__(self, server: TmuxServer, claude_home: Path) -> None:
        self.server = server
        self.home = claude_home
        self.python = shlex.quote(sys.executable)

    def command(self, session_id: str) -> str:
        return f"{self.python} {shlex.quote(str(FAKE_CLAUDE))} {shlex.quote(str(self.home))} " \
            f"{session_id}"

    async def type(self, pane: str, line: str) -> None:
        await self.server.arun("send-keys", "-t", pane, "-l", line)
        await self.server.arun("send-keys", "-t", pane, "Enter")


async def badge(server: TmuxServer, pane: str, want: str) -> None:
    async def check() -> bool:
        return await server.show(pane, "@paneward_badge") == want

    await eventually(check, interval=0.02)


async def client_pane(server: TmuxServer, client: AttachedClient) -> str:
    out = await server.arun("list-clients", "-F", "#{client_name}|#{pane_id}")
    panes = dict(line.split("|", 1) for line in out.splitlines())
    return panes[client.name]


async def paneward(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    done = await anyio.run_process([os.fspath(PANEWARD), *args], env=env, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


@asynccontextmanager
async def observer(server: TmuxServer) -> AsyncIterator[ControlClient]:
    """The test's own control-mode client (never a recipient: control clients have no status
    line, and paneward leaves them out)."""
    async with ControlClient(TmuxTarget(socket_name=server.name)) as client:
        yield client


async def messages_of(control: ControlClient, client: AttachedClient) -> list[str]:
    """What tmux showed on ``client``'s status line (its message log), oldest first."""
    [reply] = await control.run_batch([f'show-messages -t "{client.name}"'])
    assert reply.ok, reply
    mark = f" {client.name} message: "
    shown = [line.split(mark, 1)[1] for line in reply.lines if mark in line]
    return shown[::-1]  # tmux lists the newest first


@pytest.mark.timeout(300)  # a long story of real processes; slow on a loaded 2-core machine
async def test_next_pick_and_notifications_on_a_real_server(
    server: TmuxServer, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    env = daemon_env(state)
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    claude_home = Path(env["CLAUDE_CONFIG_DIR"])
    (claude_home / "sessions").mkdir(parents=True)
    agents = Agents(server, claude_home)
    cli_env = {k: v for k, v in env.items() if k not in ("TMUX", "TMUX_PANE")}

    with anyio.fail_after(240):
        # main: window 0 a shell (%0, where the user looks), window 1 agent A;
        # other: window 0 agent B, window 1 agent C.
        a = (await server.arun("new-window", "-d", "-t", "main", "-P", "-F", "#{pane_id}",
                               agents.command("s-a"))).strip()
        b = (await server.arun("new-session", "-d", "-s", "other", "-P", "-F", "#{pane_id}",
                               agents.command("s-b"))).strip()
        c = (await server.arun("new-window", "-d", "-t", "other", "-P", "-F", "#{pane_id}",
                               agents.command("s-c"))).strip()
        await server.arun("set-option", "-g", "allow-passthrough", "on")
        # tmux logs every command too: keep enough of the log for the messages to stay in it.
        await server.arun("set-option", "-g", "message-limit", "100000")
        daemon = DaemonProcess(
            state, discovery=True, env=env,
            extra_args=["--tmux", "-L", server.name, "--notify-via", "tmux,osc9",
                        "--notify-interval", "0"],
        )
        async with daemon, attached_client(server, "main") as user, observer(server) as control:
            assert await client_pane(server, user) == "%0"
            for pane in (a, b, c):
                await badge(server, pane, "? unknown")
                await agents.type(pane, "status idle")
                await badge(server, pane, "○ idle")

            async def counters() -> dict[str, Any]:
                notify = (await daemon.counters())["notify"]
                assert isinstance(notify, dict)
                return notify

            # B (another session) asks first, then A (another window of this session).
            await agents.type(b, "waiting permission prompt")
            await badge(server, b, "▲ needs you")
            await agents.type(a, "waiting permission prompt")
            await badge(server, a, "▲ needs you")

            # Both are elsewhere: told on the status line and through passthrough.
            want = [
                f"paneward: claude-code needs you in other:0.0 ({b}): permission prompt",
                f"paneward: claude-code needs you in main:1.0 ({a}): permission prompt",
            ]

            async def told() -> bool:
                return await messages_of(control, user) == want

            await poll_until(told, "two display-messages")
            osc_b = f"\x1b]9;claude-code needs you: permission prompt · other:0.0 ({b})\x07"
            osc_a = f"\x1b]9;claude-code needs you: permission prompt · main:1.0 ({a})\x07"
            with anyio.fail_after(20):
                await user.wait_output(
                    lambda out: osc_b.encode() in out and osc_a.encode() in out, "OSC 9"
                )

            # next: the oldest needs_input first (B, in the other session), then A.
            code, out, err = await paneward(cli_env, "next", "-L", server.name)
            assert code == 0, err
            assert out.startswith(f"{b} on {user.name}: claude-code:s-b needs you ")
            assert await client_pane(server, user) == b

            # The pane the user now looks at asks again: not told (it is in front of them).
            await agents.type(b, "status busy")
            await badge(server, b, "● working")
            before = (await counters())["watched"]
            await agents.type(b, "waiting permission prompt")
            await badge(server, b, "▲ needs you")

            async def skipped() -> bool:
                return bool(int((await counters())["watched"]) == before + 1)

            await poll_until(skipped, "the focused pane's alert to be skipped")
            assert await messages_of(control, user) == want

            code, _, err = await paneward(cli_env, "next", "-L", server.name, "-q")
            assert code == 0, err
            assert await client_pane(server, user) == a  # A is now the oldest
            await agents.type(a, "status busy")
            await badge(server, a, "● working")
            code, _, err = await paneward(cli_env, "next", "-L", server.name, "-q")
            assert code == 0, err
            assert await client_pane(server, user) == b

            # C's turn completes (hook-less: registry busy -> idle) while the user is at B.
            await agents.type(b, "status busy")
            await agents.type(c, "status busy")
            await badge(server, c, "● working")
            await agents.type(c, "status idle")
            await badge(server, c, "✔ done")

            async def told_done() -> bool:
                shown = await messages_of(control, user)
                return shown[-1:] == [f"paneward: claude-code done in other:1.0 ({c}): "
                                      "turn done (idle)"]

            await poll_until(told_done, "the turn_done message")
            # --kind: only needs_input is asked for, and none is open.
            code, _, err = await paneward(cli_env, "next", "-L", server.name, "--kind",
                                          "needs_input")
            assert (code, err.strip()) == (1, "paneward next: nothing needs you")
            code, _, err = await paneward(cli_env, "next", "-L", server.name)
            assert code == 0, err
            assert await client_pane(server, user) == c
            await badge(server, c, "○ idle")  # jumping to a done clears it

            # pick: A then B (in the order they asked), drawn as a menu on the client.
            await agents.type(a, "waiting permission prompt")
            await badge(server, a, "▲ needs you")
            await agents.type(b, "waiting permission prompt")
            await badge(server, b, "▲ needs you")
            mark = len(user.output)
            first, second = f"main:1.0({a})", f"other:0.0({b})"

            def menu_text(out: bytes) -> str:
                # what was drawn from the menu's title on (status-line messages about the
                # same panes may come before it)
                drawn = drawn_text(out[mark:])
                title = drawn.find("paneward:attention")
                return drawn[title:] if title >= 0 else ""

            def menu(out: bytes) -> bool:
                drawn = menu_text(out)
                return first in drawn and second in drawn

            # pick returns when the menu closes (tmux's display-menu waits for the choice)
            argv = [os.fspath(PANEWARD), "pick", "-L", server.name, "--client", user.name]
            pick = await anyio.open_process(argv, env=cli_env)
            try:
                with anyio.fail_after(60):
                    await user.wait_output(menu, "the menu")
                drawn = menu_text(bytes(user.output))
                assert drawn.index(first) < drawn.index(second)
                await user.type(b"2")  # the second item's key
                with anyio.fail_after(20):
                    assert await pick.wait() == 0
            finally:
                if pick.returncode is None:
                    pick.kill()  # the menu is still open: it would wait for ever
                with anyio.CancelScope(shield=True):
                    await pick.aclose()

            async def jumped() -> bool:
                return await client_pane(server, user) == b

            await poll_until(jumped, "the menu's jump to B")
            notify = await counters()
        assert await daemon.stop() == 0
    assert notify["tmux_errors"] == 0 and notify["osc_failures"] == 0, notify
    assert notify["tmux_messages"] >= 3 and notify["osc_writes"] >= 3, notify


async def test_next_and_pick_without_a_daemon_or_a_queue(
    server: TmuxServer, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    env = {k: v for k, v in daemon_env(state).items() if k not in ("TMUX", "TMUX_PANE")}
    with anyio.fail_after(60):
        code, _, err = await paneward(env, "next", "-L", server.name)
        assert code == 2 and "no daemon" in err
        async with DaemonProcess(state, env=env), attached_client(server, "main") as user:
            code, _, err = await paneward(env, "next", "-L", server.name, "-q", "--client",
                                          user.name)
            assert code == 1 and err == ""  # quiet: told on the client instead

            async def shown() -> bool:
                out = await server.arun("show-messages", "-t", user.name)
                return "message: paneward: nothing needs you" in out

            await poll_until(shown, "the message on the client")
            code, _, err = await paneward(env, "pick", "-L", server.name)
            assert code == 1 and "nothing needs you" in err
    # never starts a server: a named server that does not exist stays absent
    missing = TmuxServer()
    async with DaemonProcess(tmp_path / "state2") as daemon:
        code, _, err = await paneward(daemon.env, "next", "-L", missing.name)
        assert code == 1
        assert "the tmux server does not exist" in err and "nothing needs you" not in err
        code, _, err = await paneward(daemon.env, "pick", "-L", missing.name)
        assert code == 1 and "tmux" in err
    probe = await anyio.run_process(missing.argv("has-session"), check=False)
    assert probe.returncode != 0
