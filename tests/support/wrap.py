"""Shared helpers for the wrapper tests: a frame listener socket and a private tmux server."""

from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import anyio
import anyio.abc

import messages

REPO = Path(__file__).resolve().parents[2]
WRAP = [sys.executable, "-m", "actors.cli.wrap"]


class Frames:
    """Newline-delimited JSON frames received on a Unix socket, decoded as inbound messages."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[messages.Inbound] = []
        self.connections = 0
        self._changed = anyio.Event()

    async def _serve(self, stream: anyio.abc.SocketStream) -> None:
        self.connections += 1
        buf = b""
        async with stream:
            async for chunk in stream:
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    self.items.append(messages.decode_inbound(line))
                self._changed.set()
                self._changed = anyio.Event()

    async def wait_for(
        self, predicate: Callable[[list[messages.Inbound]], bool]
    ) -> list[messages.Inbound]:
        """Wait (bounded by the caller's fail_after) until ``predicate(items)`` holds."""
        while not predicate(self.items):
            await self._changed.wait()
        return self.items

    def of(self, kind: type[messages.Inbound]) -> list[messages.Inbound]:
        return [m for m in self.items if isinstance(m, kind)]


@asynccontextmanager
async def frame_listener(path: Path) -> AsyncIterator[Frames]:
    frames = Frames(path)
    listener = await anyio.create_unix_listener(path)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, frames._serve)
        try:
            yield frames
        finally:
            tg.cancel_scope.cancel()


#: What the tmux client (and so a server it starts) runs with: nothing of the caller's.
_TMUX_ENV: Final = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "TERM": "xterm-256color",
    "HOME": os.environ.get("HOME", "/root"),
}


class AgentTmuxServer:
    """A private tmux server for the real agent CLIs (``tmux -L pw-test-<random>``), each pane
    given exactly the environment its test gives; only it is ever killed."""

    def __init__(self, tmp: Path) -> None:
        self.name = f"pw-test-{secrets.token_hex(4)}"
        self.tmp = tmp

    def run(self, *args: str) -> str:
        # The server is started with a bare environment, and each program gets exactly the
        # environment its test gives (`env -i` in start()): a variable of the caller's (say
        # CLAUDE_CONFIG_DIR) must not reach the agent through the tmux server's global one.
        result = subprocess.run(
            # -u: UTF-8 output whatever the (bare) locale, else tmux prints any non-ASCII as "_".
            ["tmux", "-u", "-L", self.name, "-f", "/dev/null", *args],
            check=False, capture_output=True, text=True, timeout=10, env=_TMUX_ENV,
        )
        if result.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def start(self, command: list[str], env: dict[str, str], *, width: int = 80,
              height: int = 24, cwd: Path = REPO) -> str:
        """Start a detached session running ``command``; return its pane id."""
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # The shell reports the exit status on screen: tmux 3.3a sometimes leaves the pane's
        # process unreaped (a zombie, #{pane_dead_status} empty) when it exits quickly.
        line = (
            # tmux's own TMUX and TMUX_PANE (the wrapper reads its pane from them) pass through.
            f'cd {shlex.quote(str(cwd))} && env -i TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" '
            f"{exports} {shlex.join(command)}; "
            'echo "[exit $?]"'
        )
        # One tmux command list, so remain-on-exit is in force before the program can exit.
        # (No global window-size: tmux 3.3a's server can crash with it; resize-window sets
        # the window's own window-size to manual.)
        pane = self.run(
            "start-server", ";",
            "set-option", "-g", "remain-on-exit", "on", ";",
            "new-session", "-d", "-P", "-F", "#{pane_id}", "-x", str(width), "-y", str(height),
            "sh", "-c", line,
        ).strip()
        return pane

    def capture(self, pane: str) -> str:
        return self.run("capture-pane", "-p", "-J", "-t", pane, "-S", "-200")

    def pane_value(self, pane: str, fmt: str) -> str:
        return self.run("display-message", "-p", "-t", pane, fmt).strip()

    async def wait_text(self, pane: str, text: str) -> str:
        """Poll the pane until ``text`` is on screen (bounded by the caller's fail_after)."""
        while True:
            screen = await anyio.to_thread.run_sync(self.capture, pane)
            if text in screen:
                return screen
            await anyio.sleep(0.05)

    async def wait_dead(self, pane: str) -> int:
        """Wait until the pane's program has exited; return its exit status."""
        while True:
            screen = await self.wait_text(pane, "[exit ")
            found = re.search(r"\[exit (\d+)\]", screen)
            if found:
                return int(found.group(1))
            await anyio.sleep(0.05)

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.name, "kill-server"], capture_output=True,
                       timeout=10, check=False)


def base_env(socket: Path) -> dict[str, str]:
    return {
        "PANEWARD_SOCKET": str(socket),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(REPO),
        "TERM": "xterm-256color",
    }
