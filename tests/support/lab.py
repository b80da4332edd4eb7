"""One test's world for a real agent CLI in a pane: a home, a work directory, the real daemon
(``paneward run --tmux``) on the test's private tmux server, and the keys a user would press.

Nothing is injected: the CLI fires its hooks, the hook client or the in-process forwarder sends
them to the daemon, the pane mapper binds the session to its pane by process identity, the
reducer decides and the badge appears as pane options.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

from tests.support.daemon import PANEWARD, DaemonProcess
from tests.support.polling import poll_until
from tests.support.tmux import TmuxServer


class Lab:
    """One test's world: a home, a work directory, the daemon on the private tmux server."""

    def __init__(self, tmp: Path, server: TmuxServer) -> None:
        self.tmp = tmp
        self.server = server
        self.home = tmp / "home"
        self.work = tmp / "work"
        self.state = tmp / "state"
        for d in (self.home, self.work):
            d.mkdir(parents=True)
        self.daemon = DaemonProcess(self.state, extra_args=["--tmux", "-L", server.name])
        self.pane = ""
        self.key: dict[str, str] | None = None  # the session shown in the pane, once seen

    def install(self, harness: str, env: dict[str, str]) -> str:
        """``paneward install-hooks <harness>``: what it printed."""
        done = subprocess.run(
            [os.fspath(PANEWARD), "install-hooks", harness, "--executable", os.fspath(PANEWARD)],
            env={**self.base_env(), **env}, capture_output=True, text=True, check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def base_env(self) -> dict[str, str]:
        # Only what the CLI needs, and the daemon's state dir (its hook socket is there).
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.fspath(self.home),
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            "PANEWARD_STATE_DIR": os.fspath(self.state),
        }

    async def start(self, argv: list[str], env: dict[str, str]) -> str:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**self.base_env(), **env}.items())
        line = f"cd {shlex.quote(os.fspath(self.work))} && exec env -i {exports} {shlex.join(argv)}"
        self.pane = await self.server.new_pane(line)
        await self.server.arun("resize-pane", "-t", self.pane, "-x", "150", "-y", "45")
        return self.pane

    async def screen(self) -> str:
        return await self.server.arun("capture-pane", "-p", "-J", "-t", self.pane, "-S", "-100")

    async def wait_text(self, text: str, within: float = 60) -> None:
        async def shown() -> bool:
            return text in await self.screen()

        await poll_until(shown, f"{text!r} on the screen", within=within, interval=0.1)

    async def keys(self, *keys: str, literal: bool = False) -> None:
        await self.server.arun("send-keys", "-t", self.pane, *(["-l"] if literal else []), *keys)

    async def option(self, name: str) -> str | None:
        return await self.server.show(self.pane, name)

    async def shows(self, turn: str, attention: str = "", within: float = 60) -> None:
        """Until the pane's options show ``turn`` and ``attention`` ("" for none)."""

        async def check() -> bool:
            return (
                await self.option("@paneward_turn") == turn
                and (await self.option("@paneward_attention") or "") == attention
            )

        await poll_until(check, f"turn {turn} / attention {attention!r}", within=within,
                         interval=0.05)

    async def submit(self, text: str, turn: str, attention: str = "") -> None:
        """Type ``text``, press Enter until the turn has started, then wait for the pane to show
        ``turn`` / ``attention``. (A TUI can take an Enter right after typed text as part of a
        paste, so Enter is repeated -- but only until the daemon has seen the turn start: one
        more could answer the dialog the turn opens.)"""
        before = await self._evidence()
        await self.keys(text, literal=True)
        await self.wait_text(text)

        async def started() -> bool:
            return await self._evidence() != before

        for _ in range(15):
            await self.keys("Enter")
            with suppress(AssertionError):  # not yet: press again
                await poll_until(started, "the turn's start", within=2, interval=0.05)
                break
        else:
            raise AssertionError(f"{text!r} never started a turn")
        await self.shows(turn, attention)

    async def _evidence(self) -> tuple[object, ...] | None:
        """What the daemon last published for the pane's session (``None``: nothing yet)."""
        for a in (await self.daemon.status())["activities"]:
            if a["pane"] == self.pane or (self.key is not None and a["key"] == self.key):
                return (a["turn"], a["attention"], a["evidence"]["at_ms"])
        return None

    async def press_until(self, key: str, turn: str, attention: str = "") -> None:
        """Press ``key`` every 2 s until the pane shows ``turn`` / ``attention``."""
        for _ in range(15):
            await self.keys(key)
            with suppress(AssertionError):  # not yet: press again
                await self.shows(turn, attention, within=2)
                return
        raise AssertionError(f"{key!r} never led to turn {turn} / attention {attention!r}")

    async def activity(self, harness: str) -> dict[str, Any]:
        """The activity of the session in the pane (after the exit, of that same session: the
        pane is gone with the program)."""
        found = [
            a for a in (await self.daemon.status())["activities"]
            if a["key"]["harness"] == harness
            and (a["key"] == self.key if self.key is not None else a["pane"] == self.pane)
        ]
        assert len(found) == 1, found
        first: dict[str, Any] = found[0]
        self.key = first["key"]
        return first

    async def quit(self, command: str, harness: str) -> dict[str, Any]:
        """Type ``command`` and Enter until the session has ended (presence ``persisted``)."""
        await self.activity(harness)  # remember the key while the pane still shows it
        await self.keys(command, literal=True)
        await self.wait_text(command)
        async def ended() -> bool:
            presence: str = (await self.activity(harness))["presence"]
            return presence == "persisted"

        for _ in range(15):
            with suppress(subprocess.CalledProcessError):
                await self.keys("Enter")  # the pane may be gone already
            with suppress(AssertionError):  # not yet: press again
                await poll_until(ended, "the session's end", within=2, interval=0.05)
                return await self.activity(harness)
        raise AssertionError(f"{command!r} never ended the session")


@asynccontextmanager
async def lab(tmp_path: Path, server: TmuxServer) -> AsyncIterator[Lab]:
    world = Lab(tmp_path, server)
    async with world.daemon:
        try:
            yield world
        except BaseException:
            with suppress(Exception):
                print(f"--- pane {world.pane} ---\n{await world.screen()}")
            print(world.daemon.stderr()[-4000:])
            raise
