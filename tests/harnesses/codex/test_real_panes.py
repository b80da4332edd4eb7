"""The real Codex 0.171.0 in tmux panes, with ``paneward run --tmux`` (discovery on, nothing
injected): the badges (pane options) of panes running it against the loopback OpenAI mock
(tests/support/mock_apis.py).

- In its default (daemon) mode, without and with paneward's hooks: the shared app-server daemon
  runs every thread; the pane is bound to its thread by the daemon's MCP connection to the TUI's
  own listener (actors/harnesses/codex/daemon.py). A second pane on another thread shows its own
  state; ``codex resume <id>`` in a third pane shows that thread.
- ``paneward wrap -- codex`` with hooks: the pane never leaves working during a turn.

Each test copies Codex's daemon into its own ``HOME`` (tests/support/real_panes.py reads the
panes back).
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import anyio
import msgspec
import psutil
import pytest

from actors.core.clock import now_ms
from actors.core.views.status_table import format_table
from messages import Activity
from tests.support.agents import agent, codex_home, stop_codex_leftovers
from tests.support.mock_apis import MockServer
from tests.support.polling import poll_until
from tests.support.real_panes import (
    STEP_S,
    Panes,
    agent_env,
    install_hooks,
    keepalive_tmux,
    key_text,
    paneward,
    press_until,
    submit,
    type_keys,
)
from tests.support.wrap import WRAP, AgentTmuxServer

#: Codex's marker of the selected line in its dialogs.
SELECTED = "\N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK}"


#: The reason of the mock's WRITE call (``exec_command`` ``echo hi > hi.txt``), as Codex's
#: ``PermissionRequest`` hook gives it; the daemon's status names it from the rollout.
WRITE_REASON = "permission: Bash: echo hi > hi.txt"


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[AgentTmuxServer]:
    """The private tmux server, up before paneward connects to it."""
    yield from keepalive_tmux(tmp_path)


async def _trust_hooks(tmux: AgentTmuxServer, pane: str) -> None:
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


async def _on_its_thread(panes: Panes, pane: str, what: str) -> None:
    """Until ``pane`` shows a thread, not its TUI's own session (whose turn Codex's own records
    in tmux's output give from the start: ``idle`` alone does not say the thread is bound)."""

    async def bound() -> bool:
        view = await panes.view(pane)
        return view is not None and ":tui-" not in key_text(view["key"])

    await poll_until(bound, what, within=STEP_S)


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


def _tui_pid(tmux: AgentTmuxServer, pane: str) -> int:
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


async def _quit_codex(tmux: AgentTmuxServer, pane: str) -> str:
    await type_keys(tmux, pane, "/quit")
    tmux.run("send-keys", "-t", pane, "Enter")
    await tmux.wait_dead(pane)
    return _thread_at_exit(tmux.capture(pane))


async def test_codex_daemon_mode_without_hooks_binds_each_pane_to_its_thread(
    tmp_path: Path, tmux: AgentTmuxServer, openai: MockServer
) -> None:
    codex = agent("codex")
    home, work = codex_home(tmp_path, openai.url)
    try:
        async with paneward(tmux, tmp_path, home) as panes:
            env = agent_env(panes, home, tmp_path, MOCK_OPENAI_API_KEY="dummy")
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
                await _on_its_thread(panes, a, "pane A bound to its thread (idle)")
                await panes.wait(a, turn="idle", what="pane A bound to its thread (idle)")
                thread_a = (await panes.shown(a)).key
                assert thread_a.harness == "codex" and not thread_a.session_id.startswith("tui-")

                # The TUI's own session, which the pane showed until the thread was known, gave
                # way to it: forgotten, it has no row of its own, even in `status --all`.
                async def no_tui_rows() -> bool:
                    return not await _tui_rows(panes)

                await poll_until(no_tui_rows, "no row of the TUI's own session", within=STEP_S)

                # The approval dialog: needs_input from the daemon's own status.
                mark = await submit(panes, a, "please WRITE a file",
                                     started={"working", "needs_input"})
                await panes.wait(a, turn="needs_input", attention="needs_input")
                # The reason names the command, as the hook would (the rollout's pending call),
                # and it is the only reason this wait ever had.
                await panes.wait_reason(a, WRITE_REASON)
                shown = await panes.shown(a)
                assert shown.attention is not None and shown.attention.reason == WRITE_REASON
                # Proved by the daemon's status and by Codex's own `blocked` record in tmux's
                # output, whichever came last; the daemon named it (the counters below).
                assert shown.evidence.source in {"codex_daemon", "tmux_output"}
                # Codex's own `blocked` record (tmux's output) may say `permission` a moment
                # before the daemon names the command; the named reason is the last.
                reasons = await panes.reasons(str(thread_a), mark)
                assert reasons[-1] == WRITE_REASON and set(reasons) <= {"permission",
                                                                        WRITE_REASON}, reasons
                counters = (await panes.daemon.counters())["codex_daemon"]
                assert (counters["named_waits"], counters["unnamed_waits"]) == (1, 0)
                await tmux.wait_text(a, "Would you like to run")
                # approve -> working -> idle + turn_done
                approved = panes.seq
                await press_until(panes, a, "y", "idle", "turn_done")
                assert (work / "hi.txt").read_text() == "hi\n"
                turns = [row[2] for row in await panes.history(a, approved)]
                whole = await panes.history(a, mark)
                assert turns[:1] == ["working"] and turns[-1] == "idle", whole

                # A stalled turn is working; Esc makes it idle without turn_done.
                openai.stalled.clear()
                esc_mark = await submit(panes, a, "be SLOW", started={"working"})
                assert await anyio.to_thread.run_sync(openai.stalled.wait, 30)
                await panes.wait(a, turn="working")
                tmux.run("send-keys", "-t", a, "Escape")
                await panes.wait(a, turn="idle", attention="")
                assert "turn_done" not in [row[3] for row in await panes.history(a, esc_mark)]
                tmux.run("send-keys", "-t", a, "-N", "20", "BSpace")

                # Pane B: a second TUI, another thread, its own state.
                b = panes.tmux.start([str(codex)], env, width=160, height=50, cwd=work)
                await tmux.wait_text(b, "Ask Codex to do anything")
                await _on_its_thread(panes, b, "pane B bound to its thread")
                await panes.wait(b, turn="idle", what="pane B bound to its thread")
                thread_b = (await panes.shown(b)).key
                assert thread_b != thread_a
                b_mark = await submit(panes, b, "hello from pane two",
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
                await _on_its_thread(panes, c, "pane C bound to the resumed thread")
                await panes.wait(c, turn="idle", what="pane C bound to the resumed thread")
                assert (await panes.shown(c)).key == thread_a
                await submit(panes, c, "hello again", started={"working", "idle"})
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
                await _on_its_thread(panes, d, "pane D bound through the new daemon")
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
        stop_codex_leftovers(home)


async def test_codex_without_the_daemon_shows_its_thread_and_no_session_of_the_tui(
    tmp_path: Path, tmux: AgentTmuxServer, openai: MockServer
) -> None:
    """``codex --no-daemon`` (in-process: the TUI holds its thread's rollout), hooks off: the
    pane shows the TUI's own session until the rollout names the thread, then the thread. The
    TUI's own session, which took the first records from tmux's output (its first ``working``
    among them), gives way to the thread the same process holds: no row of it stays, in
    ``status --all``, and the quit shows the thread exited, never ``failed: exited while
    working``."""
    codex = agent("codex")
    home, work = codex_home(tmp_path, openai.url)
    try:
        async with paneward(tmux, tmp_path, home) as panes:
            env = agent_env(panes, home, tmp_path, MOCK_OPENAI_API_KEY="dummy")
            with anyio.fail_after(400):
                a = panes.tmux.start([str(codex), "--no-daemon"], env, width=160, height=50,
                                     cwd=work)
                await tmux.wait_text(a, "Ask Codex to do anything")

                async def on_the_tui() -> bool:
                    # Before the first prompt no rollout exists: the pane mapper's walk binds
                    # the pane to the TUI process itself (at the latest its periodic rescan).
                    view = await panes.view(a)
                    return view is not None and ":tui-" in key_text(view["key"])

                await poll_until(on_the_tui, "pane A on the TUI's own session", within=STEP_S)
                await submit(panes, a, "hello", started={"working", "idle"})
                # The turn's records reach the TUI's own session first (turn_done too); the
                # rollout, written at this first prompt, then names the thread.
                await _on_its_thread(panes, a, "pane A on its thread")
                await panes.wait(a, turn="idle", attention="turn_done")
                thread = (await panes.shown(a)).key
                assert not thread.session_id.startswith("tui-"), thread

                async def no_tui_rows() -> bool:
                    return not await _tui_rows(panes)

                await poll_until(no_tui_rows, "no row of the TUI's own session", within=STEP_S)
                mark = panes.seq
                assert await _quit_codex(tmux, a) == thread.session_id

                def exited() -> bool:
                    # Gone, with the finished turn nobody looked at still to see.
                    return panes.option(a, "@paneward_badge") == "■ exited · done"

                await poll_until(lambda: anyio.to_thread.run_sync(exited),
                                 "pane A: exited", within=STEP_S, interval=0.02)
                assert await _tui_rows(panes) == []
                assert [row for row in await panes.history(a, mark)
                        if row[1] != str(thread)] == []
                activities = msgspec.convert((await panes.daemon.status())["activities"],
                                             list[Activity])
                assert [str(act.key) for act in activities
                        if act.attention is not None and act.attention.kind == "failed"] == []
    finally:
        stop_codex_leftovers(home)


async def test_codex_daemon_mode_with_hooks_and_under_the_wrapper(
    tmp_path: Path, tmux: AgentTmuxServer, openai: MockServer
) -> None:
    codex = agent("codex")
    home, work = codex_home(tmp_path, openai.url)
    try:
        async with paneward(tmux, tmp_path, home) as panes:
            install_hooks("codex", home, panes.daemon.state_dir)
            env = agent_env(panes, home, tmp_path, MOCK_OPENAI_API_KEY="dummy")
            with anyio.fail_after(600):
                a = panes.tmux.start([str(codex)], env, width=160, height=50, cwd=work)
                await _trust_hooks(tmux, a)
                await _on_its_thread(panes, a, "pane A bound to its thread (idle)")
                await panes.wait(a, turn="idle", what="pane A bound to its thread (idle)")
                mark = await submit(panes, a, "please WRITE a file",
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
                await press_until(panes, a, "y", "idle", "turn_done")

                # Under the wrapper, hooks and the daemon bind the same pane to the thread as
                # well: during a turn the pane never leaves working.
                w = panes.tmux.start([*WRAP, "--", str(codex)], env, width=160, height=50,
                                     cwd=work)
                await tmux.wait_text(w, "Ask Codex to do anything")
                await panes.wait(w, turn="idle", what="the wrapped pane idle")
                openai.stalled.clear()
                mark = await submit(panes, w, "be SLOW", started={"working"})
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
                    key_text(item["after"]["key"]) for item in reversed(panes.watcher.items)
                    if item.get("type") == "Transition" and item["after"]["pane"] == w
                    and not item["after"]["key"]["session_id"].startswith("pty-")
                )
                proven = min(
                    item["seq"] for item in panes.watcher.items
                    if item.get("type") == "Transition" and item["seq"] > mark
                    and key_text(item["after"]["key"]) == thread
                    and item["after"]["turn"] == "working"
                )
                seen = [[row for row in rows if row[0] <= proven][-1]]
                seen += [row for row in rows if row[0] > proven]
                end = next(i for i, row in enumerate(seen) if row[2] != "working")
                assert end >= 1 and seen[end][2:] == ("idle", "turn_done"), (thread, proven, rows)
                assert during and during[-1][2] == "working", (during, rows)
    finally:
        stop_codex_leftovers(home)
