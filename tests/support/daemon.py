"""Run the real ``paneward`` daemon, CLI and helper processes from tests and benchmarks.

Everything here starts real processes and cleans them up: :class:`DaemonProcess` (``paneward run``
on a private state directory, ``--no-discovery`` unless asked), :class:`WatchProcess`
(``paneward watch --json``), :class:`AgentStandIn` (a live process that stands for an agent: its
pid and start token are real, and it runs hook commands as its children, as Codex runs
``notify``). Waiting is done by polling the daemon's control socket with a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from actors.cli.control_client import request_lines
from tests.support.polling import poll_until

__all__ = [
    "HOLDER_SCRIPT",
    "PANEWARD",
    "DaemonProcess",
    "limited",
    "AgentStandIn",
    "WatchProcess",
    "daemon_env",
    "owner",
    "poll_until",
    "raw_send",
    "request",
    "start_token",
    "watching",
]

PANEWARD = Path(sys.executable).with_name("paneward")


# Variables that would point a child at another daemon or claim another owner.
_SCRUB = (
    "PANEWARD_SOCKET",
    "XDG_RUNTIME_DIR",
    "XDG_STATE_HOME",
    "CLAUDE_PID",
    "PANEWARD_HOOK_AT_MS",
    "PANEWARD_HOOK_DEBUG",
)


def daemon_env(state_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of every process of one test: all sockets under ``state_dir``."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env["PANEWARD_STATE_DIR"] = os.fspath(state_dir)
    # discovery is off, but point the harness homes at empty places all the same
    home = state_dir.parent / "homes"
    env["CLAUDE_CONFIG_DIR"] = os.fspath(home / "claude")
    env["CODEX_HOME"] = os.fspath(home / "codex")
    env["HERMES_HOME"] = os.fspath(home / "hermes")
    env.update(extra)
    return env


def limited(**limits: int) -> list[str]:
    """A command prefix that runs the rest under resource limits, soft = hard (e.g.
    ``limited(RLIMIT_NOFILE=256)``): the real daemon, with ``resource.setrlimit`` in its own
    process before it starts."""
    code = (
        "import os, resource, sys\n"
        "for name, value in zip(sys.argv[1::2], sys.argv[2::2]):\n"
        "    if name == '--':\n"
        "        break\n"
        "    resource.setrlimit(getattr(resource, name), (int(value), int(value)))\n"
        "argv = sys.argv[sys.argv.index('--') + 1:]\n"
        "os.execv(argv[0], argv)\n"
    )
    pairs = [part for name, value in limits.items() for part in (name, str(value))]
    return [sys.executable, "-c", code, *pairs, "--"]


def start_token(pid: int) -> str:
    """Field 22 of /proc/<pid>/stat, read independently of the code under test."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return fields[19]


def _request_sync(control: Path, body: dict[str, Any]) -> dict[str, Any]:
    line = next(iter(request_lines(control, body)))
    value = json.loads(line)
    assert isinstance(value, dict)
    return value


async def request(control: Path, body: dict[str, Any]) -> dict[str, Any]:
    """One control-socket request (status), off the event loop."""
    return await anyio.to_thread.run_sync(_request_sync, control, body)


def _raw_send_sync(path: Path, data: bytes) -> None:
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(os.fspath(path))
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        with suppress(OSError):
            sock.recv(1)  # wait for the listener to hang up: everything was read


async def raw_send(path: Path, data: bytes) -> None:
    """Send ``data`` over ONE connection to the hook socket (frames in order)."""
    await anyio.to_thread.run_sync(_raw_send_sync, path, data)


class _Lines:
    """Newline-delimited reader over a process pipe."""

    def __init__(self, stream: anyio.abc.ByteReceiveStream) -> None:
        self._buffered = BufferedByteReceiveStream(stream)

    async def receive_line(self) -> bytes:
        return await self._buffered.receive_until(b"\n", 1 << 24)


class DaemonProcess:
    """``paneward run`` on ``state_dir`` (its sockets there too); use ``async with``."""

    def __init__(
        self,
        state_dir: Path,
        *,
        extra_args: Sequence[str] = (),
        discovery: bool = False,
        env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
        runtime_dir: Path | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.runtime_dir = runtime_dir or state_dir  # where its sockets are
        self.env = dict(env) if env is not None else daemon_env(state_dir)
        self.args = [
            *prefix,
            os.fspath(PANEWARD),
            "run",
            "--state-dir",
            os.fspath(state_dir),
            *(() if discovery else ("--no-discovery",)),
            *(() if runtime_dir is None else ("--socket", os.fspath(runtime_dir / "hook.sock"))),
            *extra_args,
        ]
        self.process: anyio.abc.Process | None = None
        self.stderr_path = state_dir.parent / f"daemon-{id(self)}.stderr"

    @property
    def hook_socket(self) -> Path:
        return self.runtime_dir / "hook.sock"

    @property
    def control_socket(self) -> Path:
        return self.runtime_dir / "control.sock"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self) -> None:
        self.state_dir.parent.mkdir(parents=True, exist_ok=True)
        with self.stderr_path.open("wb") as err:
            self.process = await anyio.open_process(
                self.args, env=self.env, stdin=subprocess.DEVNULL, stdout=err, stderr=err
            )

        async def ready() -> bool:
            assert self.process is not None
            if self.process.returncode is not None:
                raise AssertionError(f"daemon exited {self.process.returncode}: {self.stderr()}")
            try:
                status = await self.status()
            except OSError:
                return False
            # The control socket answers first; the hook socket is bound a moment later.
            listener = status["statistics"].get("hook_listener", {})
            return listener.get("socket_path") is not None

        await poll_until(ready, "the daemon's control and hook sockets")

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    async def status(self) -> dict[str, Any]:
        return await request(self.control_socket, {"op": "status"})

    async def counters(self) -> dict[str, Any]:
        stats = (await self.status())["statistics"]
        assert isinstance(stats, dict)
        return stats

    async def wait_delivered(self, count: int, *, within: float = 20.0) -> None:
        """Until the hook listener has handed ``count`` frames to the supervisor."""

        async def done() -> bool:
            listener = (await self.counters())["hook_listener"]
            assert "error" not in listener, listener
            return int(listener["frames_delivered"]) >= count

        await poll_until(done, f"{count} delivered frames", within=within)

    async def wait_received(self, count: int, *, within: float = 30.0) -> dict[str, Any]:
        """Until the listener has read ``count`` frames (delivered or rejected); its counters."""
        last: dict[str, Any] = {}

        async def done() -> bool:
            nonlocal last
            last = (await self.counters())["hook_listener"]
            return int(last["frames_received"]) >= count

        await poll_until(done, f"{count} received frames", within=within)
        return last

    async def stop(self, signum: signal.Signals = signal.SIGTERM, *, within: float = 20.0) -> int:
        """Signal the daemon and wait for it; returns its exit code."""
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signum)
        with anyio.fail_after(within):
            return await self.process.wait()

    async def kill(self) -> None:
        assert self.process is not None
        if self.process.returncode is None:
            self.process.kill()
        with anyio.fail_after(10):
            await self.process.wait()

    async def __aenter__(self) -> DaemonProcess:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.process is None:
            return
        if self.process.returncode is None:
            with anyio.CancelScope(shield=True):
                try:
                    await self.stop()
                except TimeoutError:
                    await self.kill()
        await self.process.aclose()


class WatchProcess:
    """``paneward watch --json [--since SEQ]``: records every line it prints."""

    def __init__(self, env: Mapping[str, str], since: int | None = None) -> None:
        self.env = dict(env)
        self.args = [os.fspath(PANEWARD), "watch", "--json"]
        if since is not None:
            self.args += ["--since", str(since)]
        self.items: list[dict[str, Any]] = []
        self.process: anyio.abc.Process | None = None
        self._changed = anyio.Event()

    @property
    def seqs(self) -> list[int]:
        return [int(item["seq"]) for item in self.items if item.get("type") == "Transition"]

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        lines = _Lines(self.process.stdout)
        with suppress(anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
            while True:
                line = await lines.receive_line()
                self.items.append(json.loads(line))
                self._changed.set()
                self._changed = anyio.Event()

    async def wait_for(
        self, check: Callable[[list[dict[str, Any]]], bool], what: str, within: float = 20.0
    ) -> None:
        try:
            with anyio.fail_after(within):
                while not check(self.items):
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"watcher: timed out waiting for {what}") from None

    async def wait_exit(self, within: float = 20.0) -> int:
        assert self.process is not None
        with anyio.fail_after(within):
            return await self.process.wait()


@asynccontextmanager
async def watching(
    daemon: DaemonProcess, since: int | None = None
) -> AsyncIterator[WatchProcess]:
    """A running watcher, subscribed before this yields (the daemon counted its request)."""
    before = int((await daemon.counters())["control"]["watches"])
    watcher = WatchProcess(daemon.env, since)
    process = await anyio.open_process(
        watcher.args, env=watcher.env, stdin=subprocess.DEVNULL, stderr=None
    )
    async with process, anyio.create_task_group() as tg:
        watcher.process = process
        tg.start_soon(watcher._read)

        async def subscribed() -> bool:
            # the control server subscribes in the same step as it counts the watch
            return int((await daemon.counters())["control"]["watches"]) > before

        await poll_until(subscribed, "the watcher's subscription")
        try:
            yield watcher
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    process.terminate()
                with anyio.fail_after(10):
                    await process.wait()
            # the reader ends at EOF of the dead process's stdout


_OWNER_SCRIPT = r"""
import json, subprocess, sys
while True:
    line = sys.stdin.readline()
    if not line:
        break
    req = json.loads(line)
    data = req["stdin"].encode() if req["stdin"] is not None else None
    done = subprocess.run(
        req["argv"], env=req["env"], input=data,
        stdin=None if data is not None else subprocess.DEVNULL,
    )
    sys.stdout.write(f"{done.returncode}\n")
    sys.stdout.flush()
"""


class AgentStandIn:
    """A live stand-in for an agent process: real pid + start token, runs hooks as children."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.pid = process.pid
        self.token = start_token(process.pid)
        assert process.stdout is not None
        self._lines = _Lines(process.stdout)

    async def run(
        self, argv: Sequence[str], env: Mapping[str, str], stdin: str | None = None
    ) -> int:
        """Run ``argv`` as this process's child; its exit code."""
        assert self.process.stdin is not None
        body = {"argv": list(argv), "env": dict(env), "stdin": stdin}
        await self.process.stdin.send(json.dumps(body).encode() + b"\n")
        return int(await self._lines.receive_line())


@asynccontextmanager
async def owner() -> AsyncIterator[AgentStandIn]:
    async with await anyio.open_process([sys.executable, "-c", _OWNER_SCRIPT]) as process:
        try:
            yield AgentStandIn(process)
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                with anyio.fail_after(10):
                    await process.wait()


# ------------------------------------------------------------- hooks as Claude Code sends them


def claude_hook_payload(event: str, n: int, session: str = "bench") -> dict[str, object]:
    """The JSON a Claude Code hook receives on stdin (the ``n``-th event: a unique prompt id)."""
    return {
        "session_id": session,
        "transcript_path": f"/w/{session}.jsonl",
        "cwd": "/w",
        "hook_event_name": event,
        "prompt_id": f"p{n}",
        "source": "startup",
    }


def http_hook_request(token: str, payload: dict[str, object]) -> bytes:
    """One Claude Code ``http`` hook request for the daemon's ``--http-port`` listener."""
    body = json.dumps(payload).encode()
    return (
        b"POST /hook/claude-code HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"X-Paneward-Token: " + token.encode() + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode() + b"\r\n\r\n" + body
    )


async def start_command_hook(
    env: Mapping[str, str], payload: dict[str, object]
) -> anyio.abc.Process:
    """Start ``paneward hook --harness claude-code`` with ``payload`` on its stdin (closed);
    the caller waits for and closes the process."""
    hook = [os.fspath(PANEWARD), "hook", "--harness", "claude-code", "--owner", "env:CLAUDE_PID"]
    process = await anyio.open_process(hook, env=dict(env))
    assert process.stdin is not None
    await process.stdin.send(json.dumps(payload).encode())
    await process.stdin.aclose()
    return process


async def time_hook_events(
    env: Mapping[str, str],
    http_port: int,
    http_token: str,
    events: int,
    arm: Callable[[str], Callable[[], Awaitable[object]]],
    *,
    session: str = "bench",
) -> dict[str, list[float]]:
    """Milliseconds from firing each hook to its effect, for ``events`` command hooks (a
    ``paneward hook`` process each, timed from just before the spawn) and then ``events`` http
    hooks on one keep-alive connection. UserPromptSubmit and Stop alternate (every event is a
    transition). ``arm(event)``, called just before each hook is fired, returns the wait for
    that hook's effect."""
    out: dict[str, list[float]] = {"command hook": [], "http hook": []}
    n = 1
    for i in range(events):
        event = "UserPromptSubmit" if i % 2 == 0 else "Stop"
        wait = arm(event)
        begin = time.perf_counter()
        process = await start_command_hook(env, claude_hook_payload(event, n, session))
        await wait()
        out["command hook"].append((time.perf_counter() - begin) * 1000)
        await process.wait()
        await process.aclose()
        n += 1
    async with await anyio.connect_tcp("127.0.0.1", http_port) as stream:
        for i in range(events):
            event = "UserPromptSubmit" if i % 2 == 0 else "Stop"
            request = http_hook_request(http_token, claude_hook_payload(event, n, session))
            wait = arm(event)
            begin = time.perf_counter()
            await stream.send(request)
            await wait()
            out["http hook"].append((time.perf_counter() - begin) * 1000)
            response = b""
            while not response.endswith(b"{}"):
                response += await stream.receive()
            n += 1
    return out


#: A program (``python -c HOLDER_SCRIPT KIND WHERE N``) that holds ``N`` connections open that
#: never send a byte, to the Unix socket ``WHERE`` (``KIND`` ``unix``) or the loopback port
#: ``WHERE`` (``tcp``), and opens another for each one the daemon closes, until its stdin closes.
#: Prints ``held N`` once they are open and ``reopened M`` at the end. Inline, not a file: the
#: tests run it as another uid, which cannot read our checkout.
HOLDER_SCRIPT: Final = r"""
import select, socket, sys
kind, where, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
held = []
def one():
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex(where)
    else:
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", int(where)))
    return s
def fill():
    while len(held) < want:
        try:
            held.append(one())
        except OSError:
            break
fill()
print("held", len(held), flush=True)
reopened = 0
while True:
    ready, _, _ = select.select([sys.stdin] + held[:1000], [], [], 0.05)
    if sys.stdin in ready:
        break
    for s in ready:
        try:
            data = s.recv(1)
        except OSError:
            data = b""
        if not data:
            held.remove(s)
            s.close()
            reopened += 1
    fill()
print("reopened", reopened, flush=True)
"""
