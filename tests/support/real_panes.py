"""Real agent CLIs in tmux panes with ``paneward run --tmux`` (discovery on, nothing injected),
read back as a user sees them.

:class:`Panes` holds the daemon, its lossless transition stream (``paneward watch``) and the
panes' options: each pane's option is checked before a deadline; what the pane showed in between
comes from the transition stream, through the same pane-winner rule the badges use
(:func:`actors.core.session.reducer.pane_winners`).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec

from actors.core.session.reducer import pane_winners
from actors.core.views.redact import shown_reason
from messages import Activity
from tests.support.daemon import PANEWARD, DaemonProcess, WatchProcess, daemon_env, watching
from tests.support.polling import poll_until
from tests.support.wrap import AgentTmuxServer, base_env

#: How long a CLI may take for one step (the first Codex start installs its daemon: ~8 s).
STEP_S = 60.0


def keepalive_tmux(tmp_path: Path) -> Iterator[AgentTmuxServer]:
    """A private tmux server with a keep-alive session, so the server exists before paneward
    connects to it; only it is killed. The body of the real-pane tests' ``tmux`` fixture."""
    server = AgentTmuxServer(tmp_path)
    try:
        server.start(["sh", "-c", "exec sleep 3600"], {"PATH": "/usr/bin:/bin"})
        yield server
    finally:
        server.kill()


class Panes:
    """The daemon, its transition stream, and the panes' options."""

    def __init__(self, tmux: AgentTmuxServer, daemon: DaemonProcess, watcher: WatchProcess) -> None:
        self.tmux = tmux
        self.daemon = daemon
        self.watcher = watcher

    def option(self, pane: str, name: str) -> str:
        return self.tmux.pane_value(pane, "#{" + name + "}")

    async def wait(self, pane: str, *, turn: str, attention: str = "", what: str = "") -> None:
        """Until ``pane``'s options say ``turn`` and ``attention`` (``""``: none)."""

        def check() -> bool:
            return (self.option(pane, "@paneward_turn"), self.option(pane, "@paneward_attention")) \
                == (turn, attention)

        await poll_until(lambda: anyio.to_thread.run_sync(check),
                         what or f"{pane}: turn {turn}, attention {attention or 'none'}",
                         within=STEP_S, interval=0.02)

    async def view(self, pane: str) -> dict[str, Any] | None:
        """The daemon's ``PaneView`` of ``pane`` (``paneward status --json --panes``)."""
        for view in (await self.daemon.status())["panes"]:
            if view["pane"] == pane:
                assert isinstance(view, dict)
                return view
        return None

    async def shown(self, pane: str) -> Activity:
        """The activity ``pane`` shows now."""
        view = await self.view(pane)
        assert view is not None, f"{pane} shows nothing"
        activities = msgspec.convert((await self.daemon.status())["activities"], list[Activity])
        return next(a for a in activities if str(a.key) == key_text(view["key"]))

    async def caught_up(self) -> None:
        """Until the watcher has printed every transition the daemon published so far: a badge
        read from tmux can come before the watch line of the same transition."""
        seq = int((await self.daemon.status())["seq"])

        def printed(items: list[dict[str, Any]]) -> bool:
            return max((int(i["seq"]) for i in items if "seq" in i), default=0) >= seq

        await self.watcher.wait_for(printed, f"the watch line of transition {seq}")

    async def history(self, pane: str, since: int = 0) -> list[tuple[int, str, str, str | None]]:
        """What ``pane`` showed after each transition (seq, session, turn, attention kind),
        consecutive repeats folded, from transition ``since`` on, as of every transition the
        daemon has published by now."""
        await self.caught_up()
        latest: dict[str, Activity] = {}
        out: list[tuple[int, str, str, str | None]] = []
        for item in self.watcher.items:
            if item.get("type") != "Transition":
                continue
            after = msgspec.convert(item["after"], Activity)
            latest[str(after.key)] = after
            shown = pane_winners(latest.values()).get(pane)
            if shown is None or item["seq"] <= since:
                continue
            row = (int(item["seq"]), str(shown.key), shown.turn,
                   shown.attention.kind if shown.attention else None)
            if not out or out[-1][1:] != row[1:]:
                out.append(row)
        return out

    async def reasons(self, key: str, since: int = 0) -> list[str]:
        """The needs_input reasons session ``key`` published after transition ``since``,
        consecutive repeats folded, as of every transition the daemon has published by now."""
        await self.caught_up()
        out: list[str] = []
        for item in self.watcher.items:
            if item.get("type") != "Transition" or item["seq"] <= since:
                continue
            after = msgspec.convert(item["after"], Activity)
            attention = after.attention
            if str(after.key) != key or attention is None or attention.kind != "needs_input":
                continue
            if not out or out[-1] != attention.reason:
                out.append(attention.reason)
        return out

    async def wait_reason(self, pane: str, reason: str) -> None:
        """Until ``pane``'s ``@paneward_reason`` option shows ``reason`` (redacted, as tmux
        options are by default: the tool and the command's program)."""
        shown = shown_reason(reason, full_text=False)
        seen: list[str | None] = [None]

        def check() -> bool:
            seen[0] = self.option(pane, "@paneward_reason")
            return seen[0] == shown

        try:
            await poll_until(lambda: anyio.to_thread.run_sync(check),
                             f"{pane}: reason {reason!r}", within=STEP_S, interval=0.02)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the option reads {seen[0]!r}, not {shown!r}") from None

    @property
    def seq(self) -> int:
        seqs = self.watcher.seqs
        return seqs[-1] if seqs else 0


def key_text(key: dict[str, str]) -> str:
    """A session key as JSON gives it, written as ``harness:session_id``."""
    return f"{key['harness']}:{key['session_id']}"


@asynccontextmanager
async def paneward(tmux: AgentTmuxServer, tmp: Path, home: Path) -> AsyncIterator[Panes]:
    """``paneward run --tmux`` with discovery on, for the agents under ``home``."""
    state = tmp / "state"
    env = daemon_env(state, HOME=str(home), CODEX_HOME=str(home / ".codex"),
                     CLAUDE_CONFIG_DIR=str(home / ".claude"))
    async with (
        DaemonProcess(
            state, discovery=True, env=env, extra_args=["--tmux", "-L", tmux.name]
        ) as daemon,
        watching(daemon) as watcher,
    ):
        try:
            yield Panes(tmux, daemon, watcher)
        except BaseException:
            await explain(tmux, daemon, watcher)
            raise


async def explain(tmux: AgentTmuxServer, daemon: DaemonProcess, watcher: WatchProcess) -> None:
    """On failure, print what the daemon knew (pytest shows it with the failure)."""
    with anyio.CancelScope(shield=True):
        try:
            status = await daemon.status()
        except OSError as exc:
            print("no status:", exc)
            status = {}
        stats = status.get("statistics", {})
        print("panes:", json.dumps(status.get("panes"), indent=1))
        for a in status.get("activities", []):
            print("activity:", json.dumps(a))
        for name in ("codex_daemon", "codex_rollouts", "pane_mapper", "tmux"):
            print(name, json.dumps(stats.get(name)))
        for item in watcher.items:
            after = item.get("after", {})
            print("transition", item.get("seq"), item.get("cause"), after.get("key"),
                  after.get("pane"), after.get("turn"), after.get("attention"))
        print("daemon stderr:", daemon.stderr()[-3000:])
        ps = await anyio.run_process(["ps", "-eo", "pid,ppid,args"], check=False)
        print(ps.stdout.decode(errors="replace")[-4000:])
        for line in tmux.run("list-panes", "-a", "-F", "#{pane_id} #{pane_pid}").splitlines():
            pane = line.split()[0]
            text = [row for row in tmux.capture(pane).splitlines() if row.strip()]
            print(f"--- {line} ---", *text[-40:], sep="\n")


def install_hooks(harness: str, home: Path, state: Path) -> None:
    """``paneward install-hooks <harness>`` for the agents under ``home``."""
    env = {**daemon_env(state), "HOME": str(home), "CODEX_HOME": str(home / ".codex"),
           "CLAUDE_CONFIG_DIR": str(home / ".claude")}
    subprocess.run([os.fspath(PANEWARD), "install-hooks", harness], env=env, check=True,
                   capture_output=True, timeout=30)


def agent_env(panes: Panes, home: Path, tmp: Path, **extra: str) -> dict[str, str]:
    """The environment an agent runs in: its ``HOME``, the daemon's hook socket and state."""
    return base_env(panes.daemon.hook_socket) | {
        "HOME": str(home), "TMPDIR": str(tmp / "tmp"),
        "PANEWARD_STATE_DIR": str(panes.daemon.state_dir), **extra,
    }


async def type_keys(tmux: AgentTmuxServer, pane: str, text: str) -> None:
    """Type ``text`` and wait until it shows."""
    tmux.run("send-keys", "-t", pane, "-l", text)
    await tmux.wait_text(pane, text)


async def submit(panes: Panes, pane: str, text: str, *, started: set[str]) -> int:
    """Type ``text`` and press Enter until the pane's turn is one of ``started`` (Codex drops
    an Enter that comes right after typed text); return the transition mark before it."""
    mark = panes.seq
    await type_keys(panes.tmux, pane, text)
    for _ in range(10):
        panes.tmux.run("send-keys", "-t", pane, "Enter")
        try:
            await poll_until(lambda: panes.option(pane, "@paneward_turn") in started,
                             f"{pane}: a turn", within=2, interval=0.02)
        except AssertionError:
            continue
        return mark
    raise AssertionError(f"{pane}: {text!r} never started a turn")


async def press_until(panes: Panes, pane: str, key: str, turn: str, attention: str) -> None:
    """Press ``key`` every 2 s until the pane shows ``turn`` / ``attention``."""
    for _ in range(10):
        panes.tmux.run("send-keys", "-t", pane, key)
        with anyio.move_on_after(2):
            await panes.wait(pane, turn=turn, attention=attention)
            return
    raise AssertionError(f"{pane}: {key!r} never led to {turn}/{attention}")
