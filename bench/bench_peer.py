"""A peer side by side: paneward and ccmanager with the same real ``claude`` sessions.

Run: ``.venv/bin/python bench/bench_peer.py [--sessions 4] [--idle-s 30] [--events 5]
[--runs 3]``

Needs the real Claude Code (``$PANEWARD_AGENT_PREFIX``, default ``~/.cache/paneward-npm``) and
ccmanager's Linux binary (``npm install --prefix ~/.cache/paneward-ccmanager
@kodaikabasawa/ccmanager-linux-x64@4.4.3``: the ``ccmanager`` package itself stops at 4.2.3
here, whose platform package is missing; 4.4.3's runs). Both talk to the loopback mock of the
Anthropic API (tests/support/mock_apis.py), with the same ``$HOME`` (onboarding done, the worktrees
trusted, ``permissions.defaultMode`` manual, so a shell tool asks).

1. **paneward**: ``--sessions`` tmux panes, each running ``claude`` in its own git worktree;
   ``paneward run --tmux`` with discovery on (the registry ``sessions/<pid>.json`` is the only
   source: no hooks installed). The state is the pane's ``@paneward_turn`` option.
2. **ccmanager**: the same worktrees, each session started from ccmanager's menu (it runs
   ``claude`` in its own PTYs and shows each one's state in its menu, by reading their
   screens); the state is the ``[● Busy]`` / ``[◐ Waiting]`` / ``[○ Idle]`` mark of the
   worktree's row.

Measured, in the same run, for each: idle CPU of the tool's own process over ``--idle-s``
(``/proc/<pid>/stat``, every thread; the ``claude`` processes are not counted for either) and
its RSS; then ``--events`` times: prompt -> busy (a prompt whose answer the mock stalls),
turn end -> idle (the stall released); and once per session permission -> waiting (a prompt
answered with a shell tool call). Both states are read by another tmux client every 5 ms (an
option for paneward, the screen for ccmanager). For ccmanager a prompt is typed into the
session, then ``Ctrl-E`` returns to its menu (where the state is shown): the time starts at the
Enter of the prompt.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(ROOT))

from bench.world import process_cpu  # noqa: E402
from tests.support.daemon import PANEWARD, DaemonProcess, poll_until  # noqa: E402
from tests.support.mock_apis import MockServer, anthropic_server  # noqa: E402

API_KEY = "sk-ant-dummy-key-for-mock-0123456789"
AGENTS = Path(os.environ.get("PANEWARD_AGENT_PREFIX") or Path.home() / ".cache" / "paneward-npm")
CCMANAGER = (
    Path.home() / ".cache" / "paneward-ccmanager" / "node_modules" / "@kodaikabasawa"
    / "ccmanager-linux-x64" / "bin" / "ccmanager"
)
T = TypeVar("T")
POLL_S = 0.005
MARKS = {"working": "\u25cf Busy", "needs_input": "\u25d0 Waiting", "idle": "\u25cb Idle"}
# ccmanager's menu rows: "  2 ARROW b2 @ wt2  [MARK]  just now" (selected: "ARROW 2 ARROW ...").
ARROW = "\u276f"
Reader = Callable[[], Awaitable[str]]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class PeerTmuxServer:
    """The bench's private tmux server (``tmux -L pw-bench-peer-<random>``); only it is killed."""

    def __init__(self) -> None:
        self.name = f"pw-bench-peer-{secrets.token_hex(4)}"

    def argv(self, *args: str) -> list[str]:
        return ["tmux", "-L", self.name, "-f", "/dev/null", *args]

    def run(self, *args: str) -> str:
        return subprocess.run(self.argv(*args), capture_output=True, text=True, check=True).stdout

    def kill(self) -> None:
        subprocess.run(self.argv("kill-server"), capture_output=True, check=False)


class PeerHome:
    """What both tools share: HOME, a git repository with ``sessions`` worktrees, and the mock
    API."""

    def __init__(self, root: Path, sessions: int, mock: MockServer) -> None:
        self.root = root
        self.home = root / "home"
        self.repo = root / "repo"
        (root / "tmp").mkdir()
        (self.home / ".claude").mkdir(parents=True)
        self.repo.mkdir()
        git = ["git", "-c", "user.email=bench@paneward", "-c", "user.name=bench"]
        subprocess.run([*git, "init", "-q", str(self.repo)], check=True)
        subprocess.run([*git, "-C", str(self.repo), "commit", "-q", "--allow-empty", "-m", "0"],
                       check=True)
        self.worktrees = [self.repo]
        for i in range(1, sessions):
            path = root / f"wt{i}"
            subprocess.run([*git, "-C", str(self.repo), "worktree", "add", "-q", "-b", f"b{i}",
                            str(path)], check=True)
            self.worktrees.append(path)
        config = {
            "hasCompletedOnboarding": True,
            "lastOnboardingVersion": "2.1.332",
            "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
            "projects": {
                str(p): {"hasTrustDialogAccepted": True, "allowedTools": []}
                for p in self.worktrees
            },
        }
        (self.home / ".claude.json").write_text(json.dumps(config))
        settings = {"permissions": {"defaultMode": "manual"}}
        (self.home / ".claude" / "settings.json").write_text(json.dumps(settings))
        self.env = {
            "HOME": str(self.home),
            "PATH": f"{AGENTS / 'node_modules' / '.bin'}:/usr/bin:/bin",
            "TERM": "xterm-256color",
            "TMPDIR": str(root / "tmp"),
            "CLAUDE_CODE_TMPDIR": str(root / "tmp"),
            "ANTHROPIC_BASE_URL": mock.url,
            "ANTHROPIC_API_KEY": API_KEY,
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }

    def shell(self, cwd: Path, command: str) -> str:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return f"cd {shlex.quote(str(cwd))} && exec env {exports} {command}"


async def poll(read: Reader, want: str, what: str, within: float = 60.0) -> float:
    """Seconds until ``read()`` returns ``want`` (a tmux option or screen: no event exists)."""
    start = time.perf_counter()

    async def check() -> bool:
        return await read() == want

    await poll_until(check, what, within=within, interval=POLL_S)
    return time.perf_counter() - start


#: Offers Claude Code opens by itself now and then (answered with Esc: "stay").
OFFERS = ("Make auto mode your default permission mode?", "Switch your default effort to")


async def dismiss_offers(tmux: PeerTmuxServer, pane: str) -> bool:
    """Press Esc on an offer dialog Claude opened on its own; whether there was one."""
    screen = (await anyio.run_process(tmux.argv("capture-pane", "-p", "-t", pane))).stdout
    if any(offer.encode() in screen for offer in OFFERS):
        await anyio.run_process(tmux.argv("send-keys", "-t", pane, "Escape"))
        await anyio.sleep(0.5)
        return True
    return False


async def type_text(tmux: PeerTmuxServer, pane: str, text: str) -> None:
    await dismiss_offers(tmux, pane)
    await anyio.run_process(tmux.argv("send-keys", "-t", pane, "-l", text))
    await anyio.sleep(0.3)  # bench only: let the TUI take the text in before Enter


async def paneward_side(
    w: PeerHome, mock: MockServer, idle_s: float, events: int
) -> dict[str, object]:
    tmux = PeerTmuxServer()
    tmux.run("new-session", "-d", "-s", "main", "-x", "160", "-y", "45")
    try:
        panes = [
            tmux.run("new-window", "-d", "-P", "-F", "#{pane_id}", "-c", str(wt),
                     "sh", "-c", w.shell(wt, "claude")).strip()
            for wt in w.worktrees
        ]
        state = w.root / "state"
        env = dict(w.env)
        env["PANEWARD_STATE_DIR"] = str(state)
        env["PATH"] = f"{PANEWARD.parent}:{env['PATH']}"
        for name in ("CODEX_HOME", "HERMES_HOME"):
            env[name] = str(w.root / name.lower())
        async with DaemonProcess(state, discovery=True, env=env,
                                 extra_args=["--tmux", "-L", tmux.name]) as daemon:

            def turn_of(pane: str) -> Reader:
                async def read() -> str:
                    out = await anyio.run_process(
                        tmux.argv("show-options", "-p", "-q", "-v", "-t", pane, "@paneward_turn")
                    )
                    return out.stdout.decode().strip()

                return read

            for pane in panes:
                try:
                    read = turn_of(pane)

                    async def idle_or_offer(pane: str = pane, read: Reader = read) -> str:
                        state = await read()
                        if state != "idle" and await dismiss_offers(tmux, pane):
                            return "offer dismissed"
                        return state

                    await poll(idle_or_offer, "idle", f"paneward: {pane} idle", within=120)
                except AssertionError:
                    print(tmux.run("capture-pane", "-p", "-t", pane), file=sys.stderr)
                    print(json.dumps((await daemon.status())["activities"], indent=1),
                          file=sys.stderr)
                    raise
            await anyio.sleep(5)
            cpu0, t0 = process_cpu(daemon.pid), time.monotonic()
            await anyio.sleep(idle_s)
            idle = (process_cpu(daemon.pid) - cpu0) / (time.monotonic() - t0) * 100
            rss = rss_mb(daemon.pid)
            out = await latencies(tmux, panes, mock, events, turn_of, None)
    finally:
        tmux.kill()
    return {"idle_percent": idle, "rss_mb": rss, **out}


async def latencies(
    tmux: PeerTmuxServer,
    targets: Sequence[T],
    mock: MockServer,
    events: int,
    state_of: Callable[[T], Reader],
    enter: Callable[[T], Awaitable[str]] | None,
) -> dict[str, object]:
    """Prompt -> busy and turn end -> idle ``events`` times, permission -> waiting once per
    session.

    ``enter(target)`` brings a session to the foreground (ccmanager) and returns the pane to
    type into; without it the target is the pane itself (paneward: a pane per session)."""
    busy: list[float] = []
    idle: list[float] = []
    waiting: list[float] = []
    for k in range(events):
        target = targets[k % len(targets)]
        read = state_of(target)
        pane = await enter(target) if enter else str(target)
        mock.stalled.clear()
        mock.release.clear()
        await type_text(tmux, pane, "be SLOW")
        start = time.perf_counter()
        await anyio.run_process(tmux.argv("send-keys", "-t", pane, "Enter"))
        if enter:
            await anyio.run_process(tmux.argv("send-keys", "-t", pane, "C-e"))
        await poll(read, "working", "busy")
        busy.append(time.perf_counter() - start)
        if not await anyio.to_thread.run_sync(mock.stalled.wait, 30):
            screen = tmux.run("capture-pane", "-p", "-t", pane)
            raise AssertionError(f"the mock never stalled; the screen:\n{screen}")
        start = time.perf_counter()
        mock.release.set()
        await poll(read, "idle", "idle after the stall")
        idle.append(time.perf_counter() - start)
    # Permission -> waiting: once per session, each its first shell tool call (a denied call
    # leaves Claude's next turns different).
    for target in targets:
        read = state_of(target)
        pane = await enter(target) if enter else str(target)
        await type_text(tmux, pane, "please WRITE a file")
        start = time.perf_counter()
        await anyio.run_process(tmux.argv("send-keys", "-t", pane, "Enter"))
        if enter:
            await anyio.run_process(tmux.argv("send-keys", "-t", pane, "C-e"))
        try:
            await poll(read, "needs_input", "waiting for permission")
        except AssertionError:
            raise AssertionError(
                "no permission wait; the screen:\n" + tmux.run("capture-pane", "-p", "-t", pane)
            ) from None
        waiting.append(time.perf_counter() - start)
    return {"busy": busy, "idle": idle, "waiting": waiting}


async def ccmanager_side(
    w: PeerHome, mock: MockServer, idle_s: float, events: int
) -> dict[str, object]:
    tmux = PeerTmuxServer()
    try:
        pane = tmux.run("new-session", "-d", "-P", "-F", "#{pane_id}", "-x", "160", "-y", "45",
                        "sh", "-c", w.shell(w.repo, str(CCMANAGER))).strip()
        pid = int(tmux.run("display-message", "-p", "-t", pane, "#{pane_pid}").strip())

        async def screen() -> str:
            out = await anyio.run_process(tmux.argv("capture-pane", "-p", "-t", pane))
            return out.stdout.decode()

        def row_state(index: int) -> Reader:
            async def read() -> str:
                for line in (await screen()).splitlines():
                    if line.strip().startswith((f"{ARROW} {index} {ARROW}", f"{index} {ARROW}")):
                        for state, mark in MARKS.items():
                            if mark in line:
                                return state
                        return "none"
                return "menu hidden"

            return read

        async def enter(index: int) -> str:
            await anyio.run_process(tmux.argv("send-keys", "-t", pane, str(index)))
            await anyio.sleep(0.5)  # bench only: the session's screen is redrawn
            return pane

        await poll(row_state(0), "none", "ccmanager's menu", within=60)
        for i in range(len(w.worktrees)):
            await enter(i)
            async def prompt_shown(index: int = i) -> bool:
                shown = await screen()
                if "manual" in shown:
                    return True
                if "Select a worktree" in shown:
                    await enter(index)  # the menu missed the key (it was redrawing): again
                else:
                    await dismiss_offers(tmux, pane)  # an offer dialog hides the prompt
                return False

            try:
                await poll_until(prompt_shown, f"claude in worktree {i}", within=90, interval=0.2)
            except AssertionError:
                raise AssertionError(
                    f"claude in worktree {i} not shown; the screen:\n{await screen()}"
                ) from None
            await dismiss_offers(tmux, pane)
            await anyio.run_process(tmux.argv("send-keys", "-t", pane, "C-e"))
            await poll(row_state(i), "idle", f"ccmanager: worktree {i} idle", within=60)
        await anyio.sleep(5)
        cpu0, t0 = process_cpu(pid), time.monotonic()
        await anyio.sleep(idle_s)
        idle = (process_cpu(pid) - cpu0) / (time.monotonic() - t0) * 100
        rss = rss_mb(pid)
        out = await latencies(tmux, range(len(w.worktrees)), mock, events, row_state, enter)
    finally:
        tmux.kill()
    return {"idle_percent": idle, "rss_mb": rss, **out}


def summary(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    return (f"min {ms[0]:.0f} / median {statistics.median(ms):.0f} / max {ms[-1]:.0f} ms "
            f"(n={len(ms)})")


async def amain(args: argparse.Namespace) -> None:
    for binary in (AGENTS / "node_modules" / ".bin" / "claude", CCMANAGER):
        if not binary.exists():
            raise SystemExit(f"{binary} is not installed (see this file's docstring)")
    runs: dict[str, list[dict[str, object]]] = {"paneward": [], "ccmanager 4.4.3": []}
    for run in range(args.runs):
        for name, side in (("paneward", paneward_side), ("ccmanager 4.4.3", ccmanager_side)):
            mock = anthropic_server()
            try:
                # Claude processes a killed ccmanager left may still write there for a moment.
                with tempfile.TemporaryDirectory(
                    prefix="pw-bench-peer-", ignore_cleanup_errors=True
                ) as raw:
                    w = PeerHome(Path(raw), args.sessions, mock)
                    r = await side(w, mock, args.idle_s, args.events)
            finally:
                mock.close()
            runs[name].append(r)
            print(f"run {run + 1} {name}: idle {r['idle_percent']:.2f} % of a core, "
                  f"RSS {r['rss_mb']:.1f} MB; prompt -> busy {summary(r['busy'])}; "  # type: ignore[arg-type]
                  f"turn end -> idle {summary(r['idle'])}; "  # type: ignore[arg-type]
                  f"permission -> waiting {summary(r['waiting'])}", flush=True)  # type: ignore[arg-type]
    print(f"{args.sessions} real claude sessions (Claude Code 2.1.332) against the mock API, "
          f"{args.runs} runs")
    for name, results in runs.items():
        idle = sorted(float(r["idle_percent"]) for r in results)  # type: ignore[arg-type]
        rss = sorted(float(r["rss_mb"]) for r in results)  # type: ignore[arg-type]
        print(f"{name}: idle % of a core over {args.idle_s:.0f} s min {idle[0]:.2f} / median "
              f"{statistics.median(idle):.2f} / max {idle[-1]:.2f}; RSS MB min {rss[0]:.1f} / "
              f"median {statistics.median(rss):.1f} / max {rss[-1]:.1f}")
        for kind, label in (("busy", "prompt -> busy"), ("idle", "turn end -> idle"),
                            ("waiting", "permission -> waiting")):
            values = [v for r in results for v in r[kind]]  # type: ignore[attr-defined]
            print(f"    {label}: {summary(values)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument("--events", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    anyio.run(amain, parser.parse_args())


if __name__ == "__main__":
    main()
