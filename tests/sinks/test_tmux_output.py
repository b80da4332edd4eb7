"""OSC 7501 read from tmux's own output stream, end to end: ``paneward run --tmux`` against a real
private tmux server whose panes run a stand-in agent (tests/fixtures/tmux_output/fake_osc_agent.py:
a process renamed to ``codex`` that writes the records it is typed), with discovery and hooks off.

- A Codex pane's own records drive its badge (evidence ``tmux_output``); a shell pane of the same
  session that prints a record is never read; when the agent exits, the pane no longer needs
  output and tmux has no output client left (``list-clients``).
- with ``--no-tmux-output``: no output client, the records change nothing.
- A daemon that falls behind (SIGSTOP while the agent floods its pane): tmux pauses the pane
  for the output client (``pause-after``), the daemon continues it and counts the pause, and the
  next record drives the pane again.
- The agent behind ``ssh`` (a loopback sshd the test starts, tests/support/ssh.py): the local
  pane shows it, as the session ``codex:ssh-<pid>-<token>`` of the ssh client, present while
  that client runs.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from actors.sources import procfs
from tests.support import FIXTURES
from tests.support.daemon import DaemonProcess, daemon_env
from tests.support.polling import poll_until
from tests.support.ssh import SshWorld, sshd_binary
from tests.support.tmux import TmuxServer

FAKE = FIXTURES / "tmux_output" / "fake_osc_agent.py"
AGENT = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} codex"

pytestmark = pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="renaming needs Linux /proc")


@asynccontextmanager
async def running(server: TmuxServer, tmp: Path, *extra: str) -> AsyncIterator[DaemonProcess]:
    state = tmp / "state"
    daemon = DaemonProcess(state, env=daemon_env(state),
                    extra_args=["--tmux", "-L", server.name, "--notify", "none", *extra])
    async with daemon:
        try:
            yield daemon
        except BaseException:
            with anyio.CancelScope(shield=True):
                print("counters:", (await daemon.counters()).get("tmux"))
                print("daemon stderr:", daemon.stderr()[-3000:])
            raise


async def output(daemon: DaemonProcess) -> dict[str, Any]:
    counters = (await daemon.counters())["tmux"]["output"]
    assert isinstance(counters, dict)
    return counters


async def output_clients(server: TmuxServer) -> list[str]:
    """The sessions tmux has an output client of ours attached to (its flags name pause-after)."""
    listing = await server.arun("list-clients", "-F", "#{client_flags} #{session_name}")
    return [line.split()[-1] for line in listing.splitlines() if "pause-after" in line]


async def screen(server: TmuxServer, pane: str) -> str:
    return await server.arun("capture-pane", "-p", "-t", pane)


async def type_line(server: TmuxServer, pane: str, line: str) -> None:
    await server.arun("send-keys", "-t", pane, "-l", line)
    await server.arun("send-keys", "-t", pane, "Enter")


async def shows(server: TmuxServer, pane: str, **want: str) -> None:
    """Until each ``@paneward_<name>`` option of ``pane`` reads its value."""

    async def check() -> bool:
        for name, value in want.items():
            if await server.show(pane, f"@paneward_{name}") != value:
                return False
        return True

    await poll_until(check, f"{pane}: {want}", within=30, interval=0.02)


async def record(server: TmuxServer, pane: str, data: str, **want: str) -> None:
    await type_line(server, pane, data)
    await shows(server, pane, **want)


async def shown_source(daemon: DaemonProcess, pane: str) -> str:
    status = await daemon.status()
    view = next(v for v in status["panes"] if v["pane"] == pane)
    key = view["key"]
    activity = next(a for a in status["activities"] if a["key"] == key)
    return str(activity["evidence"]["source"])


async def test_a_codex_panes_own_records_drive_it_and_no_other_pane_is_read(
    server: TmuxServer, tmp_path: Path
) -> None:
    with anyio.fail_after(120):
        async with running(server, tmp_path) as daemon:
            shell = await server.new_pane("sh")
            agent = await server.new_pane("sh")
            await type_line(server, agent, AGENT)
            # The pane mapper binds the renamed process (its own session: nothing else is known).
            await shows(server, agent, harness="codex", presence="running")
            await poll_until(lambda: _on(daemon, 1), "the agent pane's output read")
            assert await output_clients(server) == ["main"]
            await record(server, agent, "state=idle:app=codex", turn="idle", badge="○ idle")
            await record(server, agent, "state=working:app=codex", turn="working")
            assert await shown_source(daemon, agent) == "tmux_output"
            await record(server, agent, "state=blocked:app=codex:kind=permission",
                         turn="needs_input", attention="needs_input")
            await record(server, agent, "state=working:app=codex", turn="working", attention="")
            await record(server, agent, "state=done:app=codex", badge="✔ done",
                         attention="turn_done")
            # A shell pane of the same session prints a record: its output is never read.
            await type_line(server, shell, r"printf '\033]7501;state=working:app=codex\033\\'")
            await record(server, agent, "state=working:app=codex", turn="working", attention="")
            counters = await output(daemon)
            assert (counters["records"], counters["unattributed"]) == (6, 0), counters
            assert await server.pane_option_names(shell) == []
            # The agent exits; its pane (a shell again) no longer needs output: tmux is told off,
            # and the output client, with no pane left to read, detaches.
            await type_line(server, agent, "quit")
            await shows(server, agent, presence="persisted")

            async def detached() -> bool:
                return await output_clients(server) == []

            await poll_until(detached, "no output client on the tmux side", within=30)
            counters = await output(daemon)
            assert (counters["clients"], counters["panes_on"]) == (0, 0), counters
            assert counters["turned_off"] >= 1


async def _on(daemon: DaemonProcess, panes: int) -> bool:
    return int((await output(daemon))["panes_on"]) == panes


async def test_no_tmux_output_reads_no_pane(server: TmuxServer, tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with running(server, tmp_path, "--no-tmux-output") as daemon:
            agent = await server.new_pane(AGENT)
            await shows(server, agent, harness="codex", presence="running")
            await type_line(server, agent, "state=working:app=codex")

            async def sent() -> bool:
                return "sent" in await screen(server, agent)

            await poll_until(sent, "the record written")
            await poll_until(lambda: _settled(daemon), "the daemon idle")
            assert await server.show(agent, "@paneward_turn") == "unknown"
            assert await output_clients(server) == []
            assert (await daemon.counters())["tmux"]["output"] is None


async def _settled(daemon: DaemonProcess) -> bool:
    # One status round trip after the record: the bridge had its chance to read it.
    await daemon.status()
    return True


async def test_a_daemon_that_falls_behind_gets_the_pane_paused_then_continues(
    server: TmuxServer, tmp_path: Path
) -> None:
    with anyio.fail_after(120):
        async with running(server, tmp_path) as daemon:
            agent = await server.new_pane(AGENT)
            await shows(server, agent, harness="codex", presence="running")
            await poll_until(lambda: _on(daemon, 1), "the agent pane's output read")
            await record(server, agent, "state=working:app=codex", turn="working")
            # Stopped, the daemon reads nothing while the agent floods its pane for 3 s: tmux
            # holds the output for at most pause-after (1 s), then pauses the pane for it.
            os.kill(daemon.pid, signal.SIGSTOP)
            try:
                await type_line(server, agent, "flood 3")

                async def flooded() -> bool:
                    return "flooded" in await screen(server, agent)

                await poll_until(flooded, "the flood over", within=60)
            finally:
                os.kill(daemon.pid, signal.SIGCONT)

            async def paused() -> bool:
                return int((await output(daemon))["pauses"]) >= 1

            await poll_until(paused, "the pause counted")
            # Continued: the next record is read and drives the pane.
            await record(server, agent, "state=done:app=codex", attention="turn_done")
            counters = await output(daemon)
            # tmux never held output for the stopped reader much beyond pause-after.
            assert counters["max_age_ms"] < 10_000, counters


@pytest.mark.skipif(sshd_binary() is None, reason="sshd is not installed")
async def test_an_agent_behind_ssh_shows_on_the_local_pane(
    server: TmuxServer, tmp_path: Path
) -> None:
    world = SshWorld(tmp_path / "ssh")
    try:
        with anyio.fail_after(120):
            await world.add_server("h1")
            async with running(server, tmp_path) as daemon:
                pane = await server.new_pane("sh")
                await type_line(server, pane, f"{world.ssh} -tt h1 {AGENT}")

                async def ready() -> bool:
                    return "ready" in await screen(server, pane)

                await poll_until(ready, "the remote agent started", within=60)
                # The pane runs ssh: its output is read before any session is bound to it.
                await poll_until(lambda: _on(daemon, 1), "the ssh pane's output read")
                await record(server, pane, "state=working:app=codex", harness="codex",
                             turn="working", presence="running")
                status = await daemon.status()
                view = next(v for v in status["panes"] if v["pane"] == pane)
                key = view["key"]
                ssh_pid = int(key["session_id"].split("-")[1])
                assert key["harness"] == "codex" and key["session_id"].startswith("ssh-")
                assert procfs.read_comm(ssh_pid) == "ssh"
                assert await shown_source(daemon, pane) == "tmux_output"
                await record(server, pane, "state=blocked:app=codex:kind=permission",
                             attention="needs_input")
                await record(server, pane, "state=done:app=codex", attention="turn_done")
                # The remote agent quits, ssh with it: the session ends, output is off.
                await type_line(server, pane, "quit")
                await shows(server, pane, presence="persisted")

                async def detached() -> bool:
                    return await output_clients(server) == []

                await poll_until(detached, "no output client on the tmux side", within=30)
    finally:
        await world.aclose()
