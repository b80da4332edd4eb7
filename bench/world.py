"""A real world for whole-daemon benchmarks: live Claude and Codex sessions in tmux panes.

What the daemon sees is what it sees with real agents, minus the agents' own work:

- a private tmux server (``tmux -L pw-bench-<random>``, killed at the end, nothing else);
- each Claude session is a pane whose process is named ``claude`` (a copy of ``sleep``),
  with its ``sessions/<pid>.json`` written the way Claude Code writes it (pid, sessionId,
  ``procStart`` = field 22 of its stat, status, times), rewritten on every status change;
- each Codex session is a pane whose process is named ``codex`` (a copy of ``sleep``) and
  holds its ``rollout-*.jsonl`` open for appending (the shell opens it, ``exec`` keeps it), as
  the Codex TUI holds its rollout; a turn appends ``task_started`` / ``task_complete``;
- ``paneward run --tmux -L <server>`` with discovery on (Claude registry, Codex rollouts,
  Hermes ledger, pid watcher, pane mapper), its homes pointed at this world.

:func:`thread_cpu` reads every thread of a process from ``/proc/<pid>/task/*/stat`` and the
wake-ups (context switches) from ``/proc/<pid>/task/*/status``; :func:`process_cpu` the whole
process (exited threads included) from ``/proc/<pid>/stat``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from actors.core.tmux.protocol import TmuxTarget, quote
from actors.sinks.tmux_client import ControlClient
from tests.support.daemon import DaemonProcess, daemon_env, poll_until, start_token

__all__ = [
    "CLK_TCK",
    "ClaudeSession",
    "CodexSession",
    "World",
    "process_cpu",
    "thread_cpu",
    "world",
]

CLK_TCK = os.sysconf("SC_CLK_TCK")
T0_MS = 1_796_000_000_000
DAY = "2026/11/30"


def process_cpu(pid: int) -> float:
    """Seconds of CPU of the whole process (every thread, exited ones too): utime + stime."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


@dataclass(frozen=True)
class ThreadSample:
    cpu_ns: int  # schedstat: time on a CPU, ns (finer than the 10 ms ticks of stat)
    wakeups: int  # voluntary + involuntary context switches


def thread_cpu(pid: int) -> dict[int, ThreadSample]:
    """Every live thread of ``pid``: CPU time (schedstat) and context switches so far."""
    out: dict[int, ThreadSample] = {}
    for name in os.listdir(f"/proc/{pid}/task"):
        tid = int(name)
        try:
            run_ns = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
            switches = 0
            for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    switches += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread exited meanwhile
        out[tid] = ThreadSample(run_ns, switches)
    return out


def threads_cpu_ns(pid: int) -> int:
    """CPU time of every live thread of ``pid`` (schedstat), ns: finer than
    :func:`process_cpu` for a process that is nearly idle. A thread that exits takes its time
    with it: for a process whose threads come and go use :func:`process_cpu_ns`."""
    return sum(sample.cpu_ns for sample in thread_cpu(pid).values())


def _ticks(stat: str) -> int:
    fields = stat.rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


def process_cpu_ns(pid: int) -> int:
    """CPU time of the whole process, ns, exited threads included: the live threads' schedstat
    (ns) plus what the process's utime + stime holds beyond the live threads' own (the exited
    threads', at the 10 ms tick resolution of stat). anyio's worker threads exit after 10 s
    idle, so an idle daemon's live threads alone can lose time between two samples."""
    live_ns = live_ticks = 0
    for name in os.listdir(f"/proc/{pid}/task"):
        try:
            live_ns += int(Path(f"/proc/{pid}/task/{name}/schedstat").read_text().split()[0])
            live_ticks += _ticks(Path(f"/proc/{pid}/task/{name}/stat").read_text())
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited between the listing and the read: counted in the process's
    total_ticks = _ticks(Path(f"/proc/{pid}/stat").read_text())
    return live_ns + max(0, total_ticks - live_ticks) * 1_000_000_000 // CLK_TCK


@dataclass
class ClaudeSession:
    pane: str
    pid: int
    session_id: str
    record_path: Path
    status: str = "idle"

    def write(self, status: str, at_ms: int) -> None:
        """Rewrite the registry record as Claude does on a status edge (write + rename)."""
        self.status = status
        record = {
            "pid": self.pid,
            "sessionId": self.session_id,
            "cwd": "/work",
            "startedAt": T0_MS,
            "procStart": start_token(self.pid),
            "version": "2.1.332",
            "peerProtocol": 1,
            "kind": "interactive",
            "entrypoint": "cli",
            "status": status,
            "updatedAt": at_ms,
            "statusUpdatedAt": at_ms,
        }
        tmp = self.record_path.with_name(f".{self.record_path.name}.tmp")
        tmp.write_text(json.dumps(record))
        os.rename(tmp, self.record_path)


@dataclass
class CodexSession:
    pane: str
    pid: int
    thread_id: str
    rollout: Path
    turns: int = 0
    fd: int | None = None  # the append descriptor, kept open as Codex keeps its rollout's

    def append(self, boundary: str, at_ms: int) -> None:
        """Append one lifecycle record, as Codex does at a turn boundary: through a descriptor
        that stays open (Codex holds its rollout open for the thread's life and never closes
        it after a write; a close after each append is what a process letting go of the
        rollout does, and makes the daemon sample ownership)."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at_ms / 1000))
        record = {
            "timestamp": f"{stamp}.{at_ms % 1000:03d}Z",
            "type": "event_msg",
            "payload": {"type": boundary, "turn_id": f"turn-{self.turns}"},
        }
        if self.fd is None:
            self.fd = os.open(self.rollout, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        os.write(self.fd, (json.dumps(record) + "\n").encode())

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@dataclass
class World:
    root: Path
    tmux_name: str
    bin_dir: Path
    claude_sessions: Path
    codex_day: Path
    env: dict[str, str]
    claude: list[ClaudeSession] = field(default_factory=list)
    codex: list[CodexSession] = field(default_factory=list)
    daemon: DaemonProcess | None = None

    def tmux_argv(self, *args: str) -> list[str]:
        return ["tmux", "-L", self.tmux_name, *args]

    def tmux(self, *args: str) -> str:
        done = subprocess.run(self.tmux_argv(*args), capture_output=True, text=True, check=True)
        return done.stdout

    def tmux_pid(self) -> int:
        """The pid of this world's tmux server."""
        return int(self.tmux("display-message", "-p", "#{pid}"))

    def _new_pane(self, command: str) -> tuple[str, int]:
        out = self.tmux("new-window", "-d", "-P", "-F", "#{pane_id} #{pane_pid}", command)
        pane, pid = out.split()
        return pane, int(pid)

    def add_claude(self, count: int) -> None:
        for _ in range(count):
            n = len(self.claude)
            pane, pid = self._new_pane(f"exec {quote(str(self.bin_dir / 'claude'))} 1000000")
            session = ClaudeSession(
                pane=pane,
                pid=pid,
                session_id=f"0c1a0de0-0000-4000-8000-{n:012d}",
                record_path=self.claude_sessions / f"{pid}.json",
            )
            session.write("idle", T0_MS + n)
            self.claude.append(session)

    def add_codex(self, count: int) -> None:
        for _ in range(count):
            n = len(self.codex)
            thread = f"01a229ab-0000-7000-8000-{n:012d}"
            rollout = self.codex_day / f"rollout-2026-11-30T00-00-00-{thread}.jsonl"
            meta = {
                "timestamp": "2026-11-30T00:00:00.000Z",
                "type": "session_meta",
                "payload": {"id": thread, "cli_version": "0.171.0", "cwd": "/work"},
            }
            done = {
                "timestamp": "2026-11-30T00:00:01.000Z",
                "type": "event_msg",
                "payload": {"type": "task_complete", "turn_id": "turn-0"},
            }
            rollout.write_text(json.dumps(meta) + "\n" + json.dumps(done) + "\n")
            codex = quote(str(self.bin_dir / "codex"))
            pane, pid = self._new_pane(f"exec 3>>{quote(str(rollout))}; exec {codex} 1000000")
            self.codex.append(CodexSession(pane=pane, pid=pid, thread_id=thread, rollout=rollout))

    async def start_daemon(self, *extra: str) -> DaemonProcess:
        state = self.root / "state"
        daemon = DaemonProcess(
            state,
            discovery=True,
            env=self.env,
            extra_args=["--tmux", "-L", self.tmux_name, *extra],
        )
        await daemon.start()
        self.daemon = daemon
        return daemon

    async def wait_bound(self, within: float = 120.0) -> None:
        """Until every session is ``running`` and shown on its own pane by the daemon."""
        assert self.daemon is not None
        want = {s.pane for s in self.claude} | {s.pane for s in self.codex}
        daemon = self.daemon

        async def bound() -> bool:
            body = await daemon.status()
            panes = {
                a["pane"]
                for a in body["activities"]
                if a.get("pane") and a["presence"] == "running"
            }
            return want <= panes

        await poll_until(bound, f"{len(want)} sessions bound to their panes", within=within)

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[ControlClient]:
        """Another control-mode client of this tmux server (to read pane options)."""
        async with ControlClient(TmuxTarget(self.tmux_name)) as client:
            yield client

    async def wait_badge(
        self, client: ControlClient, pane: str, want: str, poll: float = 0.001
    ) -> None:
        """Poll ``@paneward_badge`` of ``pane`` every ``poll`` s until it reads ``want``."""
        show = f"show-options -p -q -v -t {quote(pane)} @paneward_badge"
        while True:
            [reply] = await client.run_batch([show])
            if reply.lines and reply.lines[0] == want:
                return
            await anyio.sleep(poll)


def claude_sleepers(
    bin_dir: Path, count: int, seconds: int = 3600
) -> list[subprocess.Popen[bytes]]:
    """``count`` live processes whose comm is ``claude`` (a copy of ``sleep`` in ``bin_dir``):
    a registry record counts only when a ``claude`` process of our uid owns it."""
    binary = bin_dir / "claude"
    if not binary.exists():
        bin_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(shutil.which("sleep") or "/bin/sleep", binary)
    return [subprocess.Popen([os.fspath(binary), str(seconds)]) for _ in range(count)]


def _fake_binaries(bin_dir: Path) -> None:
    """``claude`` and ``codex``: copies of ``sleep``, so their comm is what discovery expects."""
    bin_dir.mkdir(parents=True)
    sleep = shutil.which("sleep")
    assert sleep is not None
    for name in ("claude", "codex"):
        shutil.copy2(sleep, bin_dir / name)


def _make_world(root: Path) -> World:
    tmux_name = f"pw-bench-{secrets.token_hex(5)}"
    env = daemon_env(root / "state")
    claude_home = Path(env["CLAUDE_CONFIG_DIR"])
    codex_home = Path(env["CODEX_HOME"])
    (claude_home / "sessions").mkdir(parents=True)
    codex_day = codex_home / "sessions" / DAY
    codex_day.mkdir(parents=True)
    Path(env["HERMES_HOME"]).mkdir(parents=True)
    _fake_binaries(root / "bin")
    subprocess.run(
        ["tmux", "-L", tmux_name, "-f", "/dev/null", "new-session", "-d", "-s", "main",
         "-x", "200", "-y", "50"],
        check=True,
    )
    return World(
        root=root,
        tmux_name=tmux_name,
        bin_dir=root / "bin",
        claude_sessions=claude_home / "sessions",
        codex_day=codex_day,
        env=env,
    )


@asynccontextmanager
async def world(root: Path) -> AsyncIterator[World]:
    """A fresh world under ``root``: empty harness homes, a tmux server with one idle pane."""
    w = await anyio.to_thread.run_sync(_make_world, root)
    try:
        yield w
    finally:
        with anyio.CancelScope(shield=True):
            if w.daemon is not None:
                await w.daemon.__aexit__(None, None, None)
            for codex in w.codex:
                codex.close()
            await anyio.run_process(w.tmux_argv("kill-server"), check=False)
