"""The real Codex 0.171.0 and Claude Code 2.1.332 in tmux panes, with ``paneward run --tmux``.

What a user sees: the badges (pane options) of panes running the real CLIs against the loopback
mocks (tests/support/mock_apis.py), with the daemon's discovery on. Nothing is injected.

- Codex in its default (daemon) mode, without and with paneward's hooks: the shared
  app-server daemon runs every thread; the pane is bound to its thread by the daemon's MCP
  connection to the TUI's own listener (actors/harnesses/codex/daemon.py). A second pane on
  another thread shows its own state; ``codex resume <id>`` in a third pane shows that thread.
- ``paneward wrap -- codex`` with hooks: the pane never leaves working during a turn.
- Claude with a background subagent that keeps working after ``Stop``.

Each pane's option is checked before a deadline; what the pane showed in between comes from the
daemon's lossless transition stream (``paneward watch``), through the same pane-winner rule the
badges use (:func:`actors.core.reducer.pane_winners`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec
import psutil
import pytest

from actors.core.clock import now_ms
from actors.core.redact import shown_reason
from actors.core.reducer import pane_winners
from actors.core.status_table import format_table
from messages import Activity
from tests.support.daemon import PANEWARD, Daemon, Watcher, daemon_env, watching
from tests.support.mock_apis import MockServer
from tests.support.polling import poll_until
from tests.support.wrap import WRAP, Tmux, base_env
from tests.test_real_clis import API_KEY, CODEX_CONFIG, _agent, _stop_codex_leftovers

#: Codex's marker of the selected line in its dialogs.
SELECTED = "\N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK}"
#: How long a CLI may take for one step (the first Codex start installs its daemon: ~8 s).
STEP_S = 60.0
#: The reason of the mock's WRITE call (``exec_command`` ``echo hi > hi.txt``), as Codex's
#: ``PermissionRequest`` hook gives it; the daemon's status names it from the rollout.
WRITE_REASON = "permission: Bash: echo hi > hi.txt"


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    server = Tmux(tmp_path)
    try:
        # A keep-alive session, so the server exists before paneward connects to it.
        server.start(["sh", "-c", "exec sleep 3600"], {"PATH": "/usr/bin:/bin"})
        yield server
    finally:
        server.kill()




class Panes:
    """The daemon, its transition stream, and the panes' options."""

    def __init__(self, tmux: Tmux, daemon: Daemon, watcher: Watcher) -> None:
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
        return next(a for a in activities if str(a.key) == _key(view["key"]))

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


def _key(key: dict[str, str]) -> str:
    return f"{key['harness']}:{key['session_id']}"


@asynccontextmanager
async def paneward(tmux: Tmux, tmp: Path, home: Path) -> AsyncIterator[Panes]:
    """``paneward run --tmux`` with discovery on, for the agents under ``home``."""
    state = tmp / "state"
    env = daemon_env(state, HOME=str(home), CODEX_HOME=str(home / ".codex"),
                     CLAUDE_CONFIG_DIR=str(home / ".claude"))
    async with (
        Daemon(state, discovery=True, env=env, extra_args=["--tmux", "-L", tmux.name]) as daemon,
        watching(daemon) as watcher,
    ):
        try:
            yield Panes(tmux, daemon, watcher)
        except BaseException:
            await _explain(tmux, daemon, watcher)
            raise


async def _explain(tmux: Tmux, daemon: Daemon, watcher: Watcher) -> None:
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


def _install_hooks(harness: str, home: Path, state: Path) -> None:
    env = {**daemon_env(state), "HOME": str(home), "CODEX_HOME": str(home / ".codex"),
           "CLAUDE_CONFIG_DIR": str(home / ".claude")}
    subprocess.run([os.fspath(PANEWARD), "install-hooks", harness], env=env, check=True,
                   capture_output=True, timeout=30)


def _codex_home(tmp: Path, openai: MockServer) -> tuple[Path, Path]:
    home, work = tmp / "home", tmp / "work"
    for d in (home / ".codex", work, tmp / "tmp"):
        d.mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text(CODEX_CONFIG.format(url=openai.url, cwd=work))
    return home, work


def _agent_env(panes: Panes, home: Path, tmp: Path, **extra: str) -> dict[str, str]:
    return base_env(panes.daemon.hook_socket) | {
        "HOME": str(home), "TMPDIR": str(tmp / "tmp"),
        "PANEWARD_STATE_DIR": str(panes.daemon.state_dir), **extra,
    }


async def _type(tmux: Tmux, pane: str, text: str) -> None:
    tmux.run("send-keys", "-t", pane, "-l", text)
    await tmux.wait_text(pane, text)


async def _submit(panes: Panes, pane: str, text: str, *, started: set[str]) -> int:
    """Type ``text`` and press Enter until the pane's turn is one of ``started`` (Codex drops
    an Enter that comes right after typed text); return the transition mark before it."""
    mark = panes.seq
    await _type(panes.tmux, pane, text)
    for _ in range(10):
        panes.tmux.run("send-keys", "-t", pane, "Enter")
        try:
            await poll_until(lambda: panes.option(pane, "@paneward_turn") in started,
                             f"{pane}: a turn", within=2, interval=0.02)
        except AssertionError:
            continue
        return mark
    raise AssertionError(f"{pane}: {text!r} never started a turn")


async def _press_until(panes: Panes, pane: str, key: str, turn: str, attention: str) -> None:
    for _ in range(10):
        panes.tmux.run("send-keys", "-t", pane, key)
        with anyio.move_on_after(2):
            await panes.wait(pane, turn=turn, attention=attention)
            return
    raise AssertionError(f"{pane}: {key!r} never led to {turn}/{attention}")


async def _trust_hooks(tmux: Tmux, pane: str) -> None:
    """Codex asks once to trust hooks it has not seen (then persists the trust in
    ``config.toml``): "Trust all and continue", as a user would."""
    await tmux.wait_text(pane, "Hooks need review")
    for _ in range(20):  # the dialog takes keys only once it is ready: move until it moved
        tmux.run("send-keys", "-t", pane, "Down")
        with anyio.move_on_after(1):
            await tmux.wait_text(pane, f"{SELECTED} 2. Trust all and continue")
            break
    else:
        raise AssertionError("the hook trust dialog never took a key")
    tmux.run("send-keys", "-t", pane, "Enter")

    async def closed() -> bool:
        return "Hooks need review" not in await anyio.to_thread.run_sync(tmux.capture, pane)

    await poll_until(closed, "the hook trust dialog to close", within=STEP_S, interval=0.05)
    await tmux.wait_text(pane, "Ask Codex to do anything")


def _codex_processes(home: Path) -> list[int]:
    """Pids of the processes whose command line names ``home`` (a Codex daemon copied there)."""
    marker = str(home).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def _tui_rows(panes: Panes) -> list[str]:
    """The rows of ``paneward status --all`` that are a Codex TUI's own session."""
    activities = msgspec.convert((await panes.daemon.status())["activities"], list[Activity])
    table = format_table(activities, now_ms(), show_all=True)
    return [row for row in table.splitlines() if " tui-" in row]


def _tui_pid(tmux: Tmux, pane: str) -> int:
    """The Codex TUI process running in ``pane`` (the native ``codex`` below its launcher)."""
    root = psutil.Process(int(tmux.pane_value(pane, "#{pane_pid}")))
    tuis = [p.pid for p in [root, *root.children(recursive=True)]
            if p.name() == "codex" and "app-server" not in p.cmdline()]
    assert len(tuis) == 1, tuis
    return tuis[0]


def _thread_at_exit(screen: str) -> str:
    """The thread id Codex itself prints when its TUI quits (the ground truth)."""
    found = re.search(r"codex resume ([0-9a-f-]{36})", screen)
    assert found is not None, screen
    return found.group(1)


async def _quit_codex(tmux: Tmux, pane: str) -> str:
    await _type(tmux, pane, "/quit")
    tmux.run("send-keys", "-t", pane, "Enter")
    await tmux.wait_dead(pane)
    return _thread_at_exit(tmux.capture(pane))


async def test_codex_daemon_mode_without_hooks_binds_each_pane_to_its_thread(
    tmp_path: Path, tmux: Tmux, openai: MockServer
) -> None:
    codex = _agent("codex")
    home, work = _codex_home(tmp_path, openai)
    try:
        async with paneward(tmux, tmp_path, home) as panes:
            env = _agent_env(panes, home, tmp_path, MOCK_OPENAI_API_KEY="dummy")
            with anyio.fail_after(600):
                # No Codex daemon yet: paneward looks for one and never starts one.
                async def looked() -> bool:
                    return int((await panes.daemon.counters())["codex_daemon"]
                               ["connect_failures"]) >= 1

                await poll_until(looked, "a first look for the Codex daemon", within=STEP_S)
                assert not _codex_processes(home)
                # Pane A: no -c override, so the TUI hands its thread to the shared daemon.
                a = panes.tmux.start([str(codex)], env, width=160, height=50, cwd=work)
                await tmux.wait_text(a, "Ask Codex to do anything")
                await panes.wait(a, turn="idle", what="pane A bound to its thread (idle)")
                thread_a = (await panes.shown(a)).key
                assert thread_a.harness == "codex" and not thread_a.session_id.startswith("tui-")

                # The TUI's own session, which the pane showed until the thread was known, gave
                # way to it: forgotten, it has no row of its own, even in `status --all`.
                async def no_tui_rows() -> bool:
                    return not await _tui_rows(panes)

                await poll_until(no_tui_rows, "no row of the TUI's own session", within=STEP_S)

                # The approval dialog: needs_input from the daemon's own status.
                mark = await _submit(panes, a, "please WRITE a file",
                                     started={"working", "needs_input"})
                await panes.wait(a, turn="needs_input", attention="needs_input")
                # The reason names the command, as the hook would (the rollout's pending call),
                # and it is the only reason this wait ever had.
                await panes.wait_reason(a, WRITE_REASON)
                shown = await panes.shown(a)
                assert shown.attention is not None and shown.attention.reason == WRITE_REASON
                assert shown.evidence.source == "codex_daemon"
                assert await panes.reasons(str(thread_a), mark) == [WRITE_REASON]
                counters = (await panes.daemon.counters())["codex_daemon"]
                assert (counters["named_waits"], counters["unnamed_waits"]) == (1, 0)
                await tmux.wait_text(a, "Would you like to run")
                # approve -> working -> idle + turn_done
                approved = panes.seq
                await _press_until(panes, a, "y", "idle", "turn_done")
                assert (work / "hi.txt").read_text() == "hi\n"
                turns = [row[2] for row in await panes.history(a, approved)]
                whole = await panes.history(a, mark)
                assert turns[:1] == ["working"] and turns[-1] == "idle", whole

                # A stalled turn is working; Esc makes it idle without turn_done.
                openai.stalled.clear()
                esc_mark = await _submit(panes, a, "be SLOW", started={"working"})
                assert await anyio.to_thread.run_sync(openai.stalled.wait, 30)
                await panes.wait(a, turn="working")
                tmux.run("send-keys", "-t", a, "Escape")
                await panes.wait(a, turn="idle", attention="")
                assert "turn_done" not in [row[3] for row in await panes.history(a, esc_mark)]
                tmux.run("send-keys", "-t", a, "-N", "20", "BSpace")

                # Pane B: a second TUI, another thread, its own state.
                b = panes.tmux.start([str(codex)], env, width=160, height=50, cwd=work)
                await tmux.wait_text(b, "Ask Codex to do anything")
                await panes.wait(b, turn="idle", what="pane B bound to its thread")
                thread_b = (await panes.shown(b)).key
                assert thread_b != thread_a
                b_mark = await _submit(panes, b, "hello from pane two",
                                       started={"working", "idle"})
                await panes.wait(b, turn="idle", attention="turn_done")
                assert {row[1] for row in await panes.history(b, b_mark)} == {str(thread_b)}
                assert panes.option(a, "@paneward_attention") == ""  # A did not take it on

                # Pane A quits; Codex names the thread it showed: the one paneward bound.
                a_tui = _tui_pid(panes.tmux, a)
                assert await _quit_codex(tmux, a) == thread_a.session_id
                await poll_until(lambda: anyio.to_thread.run_sync(
                    lambda: panes.option(a, "@paneward_badge") == "■ exited"),
                    "pane A: exited", within=STEP_S, interval=0.02)
                # Pane C: `codex resume <id>` shows that thread.
                c = panes.tmux.start([str(codex), "resume", thread_a.session_id], env,
                                     width=160, height=50, cwd=work)
                await tmux.wait_text(c, "Ask Codex to do anything")
                await panes.wait(c, turn="idle", what="pane C bound to the resumed thread")
                assert (await panes.shown(c)).key == thread_a
                await _submit(panes, c, "hello again", started={"working", "idle"})
                await panes.wait(c, turn="idle", attention="turn_done")
                view = await panes.view(c)
                assert view is not None and view["note"] is None

                # The daemon stops: its threads end; the TUI in pane B is alive (reconnecting)
                # but nothing proves a thread for it any more, and status says why. (Pane C's
                # command line still names its thread, which has ended.)
                await anyio.run_process([str(codex), "app-server", "daemon", "stop"], env=env)
                await panes.wait(b, turn="unknown", what="pane B without its daemon")
                view = await panes.view(b)
                assert view is not None and "thread not bound" in (view["note"] or "")

                async def c_ended() -> bool:
                    return (await panes.shown(c)).presence == "persisted"

                await poll_until(c_ended, "pane C's thread ended", within=STEP_S)
                # A new TUI starts a new daemon; paneward reconnects, and the TUIs of panes B
                # and C, which reconnect too and reload their threads, are bound to them again.
                d = panes.tmux.start([str(codex)], env, width=160, height=50, cwd=work)
                await tmux.wait_text(d, "Ask Codex to do anything")
                await panes.wait(d, turn="idle", what="pane D bound through the new daemon")
                await panes.wait(b, turn="idle", attention="turn_done", what="pane B bound again")
                assert (await panes.shown(b)).key == thread_b
                assert (await panes.shown(c)).key == thread_a
                assert (await panes.shown(c)).presence == "running"
                assert int((await panes.daemon.counters())["codex_daemon"]["connects"]) == 2
                # The only TUI of its own in the table is pane A's, whose TUI quit: the pane
                # shows it ended (the row is the badge's).
                rows = [row.split() for row in await _tui_rows(panes)]
                assert [(row[0], row[3]) for row in rows] == [(a, "persisted")], rows
                assert rows[0][2].startswith(f"tui-{a_tui}-")

                # Pane D's TUI is killed: the thread lives on in the daemon, and the pane says
                # its agent is gone (the TUI's own session, ended) rather than nothing.
                os.kill(_tui_pid(panes.tmux, d), signal.SIGKILL)

                def exited() -> bool:
                    return panes.option(d, "@paneward_badge") == "■ exited"

                await poll_until(lambda: anyio.to_thread.run_sync(exited),
                                 "pane D: exited", within=STEP_S, interval=0.02)
                shown = await panes.shown(d)
                assert shown.key.session_id.startswith("tui-") and shown.presence == "persisted"
                assert sorted(row.split()[0] for row in await _tui_rows(panes)) == sorted([a, d])
    finally:
        _stop_codex_leftovers(home)


async def test_codex_daemon_mode_with_hooks_and_under_the_wrapper(
    tmp_path: Path, tmux: Tmux, openai: MockServer
) -> None:
    codex = _agent("codex")
    home, work = _codex_home(tmp_path, openai)
    try:
        async with paneward(tmux, tmp_path, home) as panes:
            _install_hooks("codex", home, panes.daemon.state_dir)
            env = _agent_env(panes, home, tmp_path, MOCK_OPENAI_API_KEY="dummy")
            with anyio.fail_after(600):
                a = panes.tmux.start([str(codex)], env, width=160, height=50, cwd=work)
                await _trust_hooks(tmux, a)
                await panes.wait(a, turn="idle", what="pane A bound to its thread (idle)")
                mark = await _submit(panes, a, "please WRITE a file",
                                     started={"working", "needs_input"})
                await panes.wait(a, turn="needs_input", attention="needs_input")
                # The hook's PermissionRequest and the daemon's status (the rollout's pending
                # call) name the same tool and command: whichever came first, one reason.
                await panes.wait_reason(a, WRITE_REASON)
                shown = await panes.shown(a)
                assert shown.attention is not None and shown.attention.reason == WRITE_REASON
                await tmux.wait_text(a, "Would you like to run")
                assert await panes.reasons(str(shown.key), mark) == [WRITE_REASON]
                counters = (await panes.daemon.counters())["codex_daemon"]
                assert (counters["named_waits"], counters["unnamed_waits"]) == (1, 0)
                await _press_until(panes, a, "y", "idle", "turn_done")

                # Under the wrapper, hooks and the daemon bind the same pane to the thread as
                # well: during a turn the pane never leaves working.
                w = panes.tmux.start([*WRAP, "--", str(codex)], env, width=160, height=50,
                                     cwd=work)
                await tmux.wait_text(w, "Ask Codex to do anything")
                await panes.wait(w, turn="idle", what="the wrapped pane idle")
                openai.stalled.clear()
                mark = await _submit(panes, w, "be SLOW", started={"working"})
                assert await anyio.to_thread.run_sync(openai.stalled.wait, 30)

                async def both_bound() -> bool:
                    view = await panes.view(w)
                    return view is not None and len(view["hidden"]) >= 1

                # The wrapper's session and the thread (hooks, daemon, rollout) share the pane.
                await poll_until(both_bound, "two sessions on the wrapped pane", within=STEP_S)
                during = await panes.history(w, mark)
                openai.release.set()  # the stalled answer completes the turn
                await panes.wait(w, turn="idle", attention="turn_done")
                rows = await panes.history(w, mark)
                # From the moment the thread proves the turn (its hooks or the daemon say
                # working) to the turn's end, the pane shows working, whichever of its two
                # sessions wins; then idle with turn_done. Before that moment the pane shows
                # what Codex's own OSC 7501 says: at a turn's start Codex has been seen to emit
                # working, idle, working within milliseconds, and that idle is its proof.
                # The thread's session is the one on the pane that is not the wrapper's own
                # (``pty-...``): the last row may show either, as both end idle with turn_done.
                thread = next(
                    _key(item["after"]["key"]) for item in reversed(panes.watcher.items)
                    if item.get("type") == "Transition" and item["after"]["pane"] == w
                    and not item["after"]["key"]["session_id"].startswith("pty-")
                )
                proven = min(
                    item["seq"] for item in panes.watcher.items
                    if item.get("type") == "Transition" and item["seq"] > mark
                    and _key(item["after"]["key"]) == thread and item["after"]["turn"] == "working"
                )
                seen = [[row for row in rows if row[0] <= proven][-1]]
                seen += [row for row in rows if row[0] > proven]
                end = next(i for i, row in enumerate(seen) if row[2] != "working")
                assert end >= 1 and seen[end][2:] == ("idle", "turn_done"), (thread, proven, rows)
                assert during and during[-1][2] == "working", (during, rows)
    finally:
        _stop_codex_leftovers(home)


async def test_claude_background_subagent_keeps_the_pane_working_after_stop(
    tmp_path: Path, tmux: Tmux, anthropic: MockServer
) -> None:
    claude = _agent("claude")
    home, work = tmp_path / "home", tmp_path / "work"
    for d in (home, work, tmp_path / "tmp"):
        d.mkdir()
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True,
        "lastOnboardingVersion": "2.1.332",
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
        "projects": {str(work): {"hasTrustDialogAccepted": True, "allowedTools": []}},
    }))
    async with paneward(tmux, tmp_path, home) as panes:
        _install_hooks("claude-code", home, panes.daemon.state_dir)
        env = _agent_env(
            panes, home, tmp_path, CLAUDE_CODE_TMPDIR=str(tmp_path / "tmp"),
            ANTHROPIC_BASE_URL=anthropic.url, ANTHROPIC_API_KEY=API_KEY, DISABLE_AUTOUPDATER="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
        )
        with anyio.fail_after(300):
            pane = tmux.start([str(claude), "--permission-mode", "manual"], env, width=160,
                              height=50, cwd=work)
            await tmux.wait_text(pane, "manual")
            await panes.wait(pane, turn="idle", what="the Claude pane idle")
            mark = await _submit(panes, pane, "start a background AGENT please",
                                 started={"working"})
            assert await anyio.to_thread.run_sync(anthropic.subagent_stalled.wait, 30)
            # The turn ends (its Stop lists the agent as running in the background) while the
            # agent works: the pane shows working, with one background item.
            await tmux.wait_text(pane, "Waiting for 1 background agent to finish")

            async def stopped() -> bool:
                shown = await panes.shown(pane)
                return shown.evidence.native_state == "Stop"

            await poll_until(stopped, "the turn's Stop", within=STEP_S)
            shown = await panes.shown(pane)
            assert (shown.turn, shown.attention, shown.subagents) == ("working", None, 1)
            assert panes.option(pane, "@paneward_turn") == "working"
            during = await panes.history(pane, mark)
            anthropic.subagent_release.set()
            # The agent reports, Claude runs its <task-notification> turn: turn_done after.
            await panes.wait(pane, turn="idle", attention="turn_done")
            assert all(row[2] == "working" for row in during), during
            first_done = next(
                row[0] for row in await panes.history(pane, mark) if row[3] == "turn_done")
            assert first_done > during[-1][0]
