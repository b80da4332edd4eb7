"""Helpers for tests that run a real tmux server on a private socket (``tmux -L pw-<random>``).

Each :class:`TmuxServer` talks to its own server only and kills only that server.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import pty
import re
import secrets
import struct
import subprocess
import termios
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import anyio.abc

from messages import Activity, Attention, Evidence, SessionKey, Snapshot, Transition
from tests.support.polling import poll_until

T0 = 1_800_000_000_000


class TmuxServer:
    """A private tmux server for one test."""

    def __init__(self) -> None:
        self.name = f"pw-{secrets.token_hex(5)}"

    def argv(self, *args: str) -> list[str]:
        return ["tmux", "-L", self.name, *args]

    def start(self, *, width: int = 200, height: int = 60) -> None:
        """Start the server with one detached session ``main`` (no user config)."""
        self.run(
            "-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", str(width),
            "-y", str(height),
        )

    def run(self, *args: str) -> str:
        """Run one tmux command synchronously (fixture setup only, never inside a test body)."""
        done = subprocess.run(self.argv(*args), capture_output=True, text=True, check=True)
        return done.stdout

    async def arun(self, *args: str, check: bool = True) -> str:
        done = await anyio.run_process(self.argv(*args), check=check)
        return done.stdout.decode()

    async def show(self, pane: str, option: str) -> str | None:
        """A pane option's own value (``None``: not set on the pane)."""
        out = await self.arun("show-options", "-p", "-q", "-t", pane, option)
        if not out.strip():
            return None
        value = await self.arun("show-options", "-p", "-q", "-v", "-t", pane, option)
        return value.removesuffix("\n")

    async def pane_option_names(self, pane: str) -> list[str]:
        out = await self.arun("show-options", "-p", "-t", pane)
        return [line.split(" ", 1)[0] for line in out.splitlines() if line]

    async def new_pane(self, command: str = "sleep 600", *, window: bool = False) -> str:
        """Split (or open a window) running ``command``; returns the new pane id."""
        verb = ["new-window", "-d"] if window else ["split-window", "-d", "-t", "main"]
        out = await self.arun(*verb, "-P", "-F", "#{pane_id}", command)
        return out.strip()

    async def wait_down(self, badges: dict[str, str]) -> None:
        """Until tmux's hook has shown paneward's end: each pane of ``badges`` shows its badge
        marked stale, the summary says so, and the hold and the hook are gone (callers bound
        it with ``fail_after``)."""

        async def down() -> bool:
            for pane, badge in badges.items():
                if await self.show(pane, "@paneward_badge") != f"{badge} (stale)":
                    return False
            summary = await self.arun("show-options", "-g", "-q", "-v", "@paneward_summary")
            claim = await self.arun("show-options", "-s", "-q", "-v", "@paneward_daemon")
            hooks = await self.arun("show-hooks", "-g")
            return (summary.strip() == "paneward: down" and claim == ""
                    and "[7501]" not in hooks)

        await eventually(down)

    def kill(self) -> None:
        subprocess.run(self.argv("kill-server"), capture_output=True, check=False)


class AttachedClient:
    """A real ``tmux attach`` in a PTY the test holds, as a user's terminal would run it.

    ``name`` is the client's name (its tty); :attr:`output` is every byte tmux drew on that
    terminal (status-line messages, menus, passthrough OSC sequences); :meth:`type` sends key
    bytes as the user's keyboard would.
    """

    def __init__(self, name: str, master: int, process: anyio.abc.Process) -> None:
        self.name = name
        self.output = bytearray()
        self._master = master
        self._process = process
        self._changed = anyio.Event()

    async def _read(self) -> None:
        while True:
            await anyio.wait_readable(self._master)
            try:
                data = os.read(self._master, 65536)
            except OSError:
                return  # the client went away (EIO)
            if not data:
                return
            self.output += data
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_output(self, check: Callable[[bytes], bool], what: str) -> None:
        """Until ``check(output)`` holds (callers bound it with ``fail_after``)."""
        while not check(bytes(self.output)):
            await self._changed.wait()
        del what

    async def type(self, keys: bytes) -> None:
        await anyio.to_thread.run_sync(os.write, self._master, keys)


@contextlib.asynccontextmanager
async def attached_client(
    server: TmuxServer, session: str, *, width: int = 160, height: int = 50
) -> AsyncIterator[AttachedClient]:
    """Attach a real client to ``session`` of ``server`` in a PTY; detach it at the end."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
    name = os.ttyname(slave)
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    env["TERM"] = "xterm-256color"
    try:
        process = await anyio.open_process(
            server.argv("attach-session", "-t", session),
            stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
        )
    finally:
        os.close(slave)
    client = AttachedClient(name, master, process)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client._read)

            async def attached() -> bool:
                out = await server.arun("list-clients", "-F", "#{client_name}")
                return name in out.split()

            await poll_until(attached, f"client {name} attached")
            try:
                yield client
            finally:
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.terminate()
            with anyio.fail_after(10):
                await process.wait()
            await process.aclose()
            os.close(master)




async def eventually(check: Callable[[], Awaitable[bool]], interval: float = 0.01) -> None:
    """A tmux option has no event: :func:`tests.support.polling.poll_until` (callers bound it)."""
    await poll_until(check, "the tmux options", within=3600, interval=interval)


_EVIDENCE_MS = itertools.count(T0)


def activity(
    sid: str,
    pane: str | None,
    *,
    presence: str = "running",
    turn: str = "idle",
    attention: str | None = None,
    harness: str = "claude-code",
) -> Activity:
    # Each activity made is newer evidence than the one before, as in the real stream (the
    # pane-winner rule breaks ties by the newest evidence).
    return Activity(
        key=SessionKey(harness, sid),  # type: ignore[arg-type]
        presence=presence,  # type: ignore[arg-type]
        turn=turn,  # type: ignore[arg-type]
        evidence=Evidence(source="claude_registry", native_state=turn, at_ms=next(_EVIDENCE_MS)),
        attention=(
            Attention(kind=attention, reason="test", since_ms=T0)  # type: ignore[arg-type]
            if attention is not None
            else None
        ),
        pane=pane,
    )


class TransitionSource:
    """A fake ``latest`` subscription built from real messages: a Snapshot, then Transitions."""

    def __init__(self, *activities: Activity) -> None:
        self.seq = 1
        self.current = {a.key: a for a in activities}
        self.send, self.receive = anyio.create_memory_object_stream[Snapshot | Transition](10_000)
        self.send.send_nowait(Snapshot(seq=1, activities=tuple(activities)))

    def publish(self, after: Activity) -> Transition:
        self.seq += 1
        item = Transition(
            seq=self.seq, key=after.key, after=after, cause="test",
            before=self.current.get(after.key),
        )
        self.current[after.key] = after
        self.send.send_nowait(item)
        return item

    def close(self) -> None:
        self.send.close()
        self.receive.close()


_CSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-Za-z]|\x1b\][^\x07]*\x07|\x0e|\x0f")


def drawn_text(out: bytes) -> str:
    """The characters tmux drew, escape sequences and blanks removed (a menu line is drawn
    left to right, one line after the other, so its items appear in order; tmux may move the
    cursor over blanks instead of drawing them)."""
    return "".join(_CSI.sub(b"", out).decode("utf-8", "replace").split())
