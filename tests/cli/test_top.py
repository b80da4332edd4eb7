"""``paneward top``: the pure model (``actors/core/views/top.py``: rows, order, filters, strips) on
plain data, then the Textual view driven as a user drives it -- its pilot pressing keys -- against a
real daemon (sessions injected through ``paneward inject``, their history read back from the
journal through the control socket) and a real private tmux server with a real attached client
to jump on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import msgspec
import pytest

import messages
from actors.cli.main import build_parser
from actors.core.views.top import (
    STRIP_CELLS,
    Filter,
    TopModel,
    parse_directories,
    short_path,
    strip_cells,
    strip_text,
)
from messages import Activity, Attention, Evidence, SessionKey, Snapshot, Transition
from tests.support.daemon import PANEWARD, DaemonProcess, daemon_env, poll_until, start_token
from tests.support.tmux import TmuxServer, attached_client

T = 1_800_000_000_000
MIN = 60_000


# ---------------------------------------------------------------------------- the strip


def test_a_cell_shows_the_most_urgent_state_it_held() -> None:
    # Four cells of 10 ms over [0, 40): idle, a 1 ms wait inside working, working, then gone.
    cells = strip_cells(
        "idle",
        [(12, "working"), (15, "needs_input"), (16, "working"), (29, "gone")],
        0, 40, cells=4,
    )
    assert cells == ("idle", "needs_input", "working", "gone")
    assert strip_text(cells) == "▁█▅·"


def test_a_change_before_the_window_sets_the_state_it_starts_in() -> None:
    assert strip_cells("absent", [(-5, "working"), (-1, "idle")], 0, 20, cells=2) == (
        "idle", "idle"
    )
    # A change at the window's end is not in it.
    assert strip_cells("idle", [(20, "needs_input")], 0, 20, cells=2) == ("idle", "idle")


def test_a_strip_needs_cells_and_a_window() -> None:
    with pytest.raises(ValueError, match="cells >= 1"):
        strip_cells("idle", [], 0, 10, cells=0)
    with pytest.raises(ValueError, match="a window"):
        strip_cells("idle", [], 10, 10)


# ---------------------------------------------------------------------------- the model


def _activity(
    sid: str,
    at_ms: int,
    *,
    turn: str = "idle",
    presence: str = "running",
    attention: str | None = None,
    since_ms: int | None = None,
    pane: str | None = None,
    reason: str = "test",
) -> Activity:
    return Activity(
        key=SessionKey("terminal", sid),
        presence=presence,  # type: ignore[arg-type]
        turn=turn,  # type: ignore[arg-type]
        evidence=Evidence(source="pty_status", at_ms=at_ms, observed_at_ms=at_ms),
        attention=None if attention is None else Attention(
            attention, reason, since_ms or at_ms  # type: ignore[arg-type]
        ),
        pane=pane,
    )


class _Stream:
    """Transitions numbered in order, each with its ``before``, as the hub publishes them."""

    def __init__(self) -> None:
        self.seq = 0
        self.current: dict[SessionKey, Activity] = {}
        self.items: list[Transition] = []

    def publish(self, after: Activity) -> Transition:
        self.seq += 1
        item = Transition(seq=self.seq, key=after.key, after=after, cause="test",
                          before=self.current.get(after.key))
        self.current[after.key] = after
        self.items.append(item)
        return item

    def snapshot(self) -> Snapshot:
        return Snapshot(seq=self.seq, activities=tuple(self.current.values()))


def test_replayed_history_draws_the_strip_and_the_snapshot_stays_the_state() -> None:
    """The stream's order: the snapshot, then the journal's window (seq up to the snapshot's:
    history only), then live transitions."""
    stream = _Stream()
    stream.publish(_activity("old", T - 3 * 60 * MIN))  # idle since long before the window
    stream.publish(_activity("a", T - 70 * MIN, turn="unknown"))
    history = [
        stream.publish(_activity("a", T - 49 * MIN, turn="working")),
        stream.publish(_activity("a", T - 29 * MIN, turn="needs_input", attention="needs_input")),
        stream.publish(_activity("a", T - 9 * MIN, attention="turn_done")),
        stream.publish(_activity("new", T - 25 * MIN, turn="working")),
    ]
    model = TopModel()
    model.snapshot(stream.snapshot())
    for item in history:  # the journal from the first row of the window
        model.transition(item, T)
    rows = {row.key.session_id: row for row in model.rows(T)}
    assert rows["a"].strip == "░" * 5 + "▅" * 10 + "█" * 11 + "▁" * 4
    assert rows["new"].strip == " " * 17 + "▅" * 13
    assert rows["old"].strip == "▁" * STRIP_CELLS
    assert rows["a"].state == "idle 9m" and rows["old"].state == "idle 3h"
    assert rows["a"].attention == "done 9m"

    # A replayed transition never takes the place of the snapshot's newer activity.
    model.transition(stream.items[0], T)
    assert model.rows(T)[0].key.session_id == "a"

    # Live: a new wait.
    model.transition(stream.publish(_activity("new", T - 1 * MIN, turn="needs_input",
                                              attention="needs_input")), T)
    assert [row.key.session_id for row in model.rows(T)] == ["new", "a", "old"]
    assert model.rows(T)[0].strip.endswith("█")


def test_the_attention_queue_comes_first_then_the_status_order() -> None:
    stream = _Stream()
    stream.publish(_activity("working", T - 5 * MIN, turn="working", pane="%1"))
    stream.publish(_activity("done-new", T - 2 * MIN, attention="turn_done", pane="%2"))
    stream.publish(_activity("done-old", T - 8 * MIN, attention="turn_done", pane="%3"))
    stream.publish(_activity("failed", T - 1 * MIN, attention="failed"))
    stream.publish(_activity("asks", T - 1 * MIN, turn="needs_input", attention="needs_input",
                             pane="%4"))
    # Bound to %2 too, with older evidence: %2 shows done-new, so this one's done is not queued.
    stream.publish(_activity("behind", T - 30 * MIN, attention="turn_done", pane="%2"))
    stream.publish(_activity("ended", T - 2 * 24 * 60 * MIN, presence="persisted"))
    model = TopModel()
    model.snapshot(stream.snapshot())
    rows = model.rows(T, locations={"%2": "main:0.1"}, directories={"%2": "/home/u/src/x"},
                      home="/home/u")
    assert [row.key.session_id for row in rows] == [
        "asks", "failed", "done-old", "done-new", "behind", "working"
    ]
    assert [row.queued for row in rows] == [True, True, True, True, False, False]
    by_id = {row.key.session_id: row for row in rows}
    assert by_id["done-new"].where == "main:0.1 (%2)"
    assert by_id["behind"].where == "(main:0.1 (%2))"  # the pane shows another session
    assert by_id["done-new"].directory == "~/src/x"
    assert by_id["failed"].where == "-" and by_id["failed"].directory == "-"
    # Ended more than a day ago: left out, as `paneward status` does, unless asked.
    assert "ended" in {row.key.session_id for row in model.rows(T, show_all=True)}
    assert model.rows(T, show_all=True)[-1].state == "ended 2d"


def test_filters_by_text_and_needs_you() -> None:
    stream = _Stream()
    stream.publish(_activity("alpha", T - MIN, turn="needs_input", attention="needs_input",
                             reason="permission: Bash: rm -rf build"))
    stream.publish(_activity("beta", T - MIN, turn="working", pane="%7"))
    model = TopModel()
    model.snapshot(stream.snapshot())

    def ids(view: Filter) -> list[str]:
        return [row.key.session_id for row in model.rows(T, view=view)]

    assert ids(Filter()) == ["alpha", "beta"]
    assert ids(Filter(needs_you=True)) == ["alpha"]
    assert ids(Filter("RM -RF")) == ["alpha"]  # the reason, case-insensitively
    assert ids(Filter("%7")) == ["beta"]  # the pane
    assert ids(Filter("working")) == ["beta"]  # the state
    assert ids(Filter("beta", needs_you=True)) == []


def test_payload_text_is_escaped_and_prune_keeps_the_strip() -> None:
    stream = _Stream()
    stream.publish(_activity("x\x1b[2J", T - 90 * MIN, reason="a\x07b", attention="failed"))
    model = TopModel()
    model.snapshot(stream.snapshot())
    model.transition(stream.publish(_activity("x\x1b[2J", T - 30 * MIN, turn="working",
                                              attention="failed", reason="a\x07b")), T)
    before = model.rows(T)[0]
    assert before.session == "x\\x1b[2J" and before.reason == "a\\ab"
    model.prune(T + 40 * MIN)  # the change at T-30m is now before the window: folded in
    assert model.rows(T + 40 * MIN)[0].strip == "▅" * STRIP_CELLS
    assert before.strip == "▁" * 15 + "▅" * 15


def test_a_forgotten_session_leaves_the_view() -> None:
    stream = _Stream()
    stream.publish(_activity("kept", T - 5 * MIN))
    stream.publish(_activity("gone", T - 50 * MIN, presence="persisted"))
    model = TopModel()
    model.snapshot(stream.snapshot())
    last = stream.publish(_activity("gone", T - 50 * MIN, presence="persisted"))
    model.transition(msgspec.structs.replace(last, cause="Forget"), T)
    assert [row.key.session_id for row in model.rows(T)] == ["kept"]

    # Replayed: forgotten, then started again by new evidence (in the snapshot): the row stays,
    # its strip from the new start only.
    stream = _Stream()
    first = stream.publish(_activity("again", T - 50 * MIN, turn="working"))
    ended = stream.publish(msgspec.structs.replace(first.after, presence="persisted"))
    forgot = msgspec.structs.replace(ended, cause="Forget")
    stream.current.clear()  # the session's actor starts from nothing
    new = stream.publish(_activity("again", T - 9 * MIN))
    model = TopModel()
    model.snapshot(stream.snapshot())
    for item in (first, forgot, new):
        model.transition(item, T)
    [row] = model.rows(T)
    assert row.strip == " " * 25 + "▁" * 5


def test_tmux_directories_and_short_paths() -> None:
    assert parse_directories("%1|/a|b\nbad\n%2|\n%3|/c\n") == {"%1": "/a|b", "%3": "/c"}
    assert short_path("/home/u", "/home/u") == "~"
    assert short_path("/home/user/x", "/home/u") == "/home/user/x"
    assert short_path("/" + "d" * 40, None, width=10) == "…" + "d" * 9
    assert short_path("/tmp/\x1b", None) == "/tmp/\\x1b"


# ---------------------------------------------------------------------------- the command


def test_top_without_textual_says_how_to_install_it(tmp_path: Path) -> None:
    """The extra missing (Textual made unimportable in a real process): a clear error, exit 1."""
    code = (
        "import sys; sys.modules['textual'] = None\n"
        "from actors.cli.main import main\n"
        "sys.exit(main(['top']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=daemon_env(tmp_path / "state"), check=False)
    assert done.returncode == 1
    assert "pip install 'paneward[top]'" in done.stderr


def test_top_without_a_daemon_says_how_to_start_one(tmp_path: Path) -> None:
    done = subprocess.run([os.fspath(PANEWARD), "top"], capture_output=True, text=True,
                          env=daemon_env(tmp_path / "state"), check=False)
    assert done.returncode == 2
    assert "no daemon" in done.stderr and "paneward run" in done.stderr


# ---------------------------------------------------------------------------- the view, live

async def _inject(daemon: DaemonProcess, message: messages.Inbound) -> None:
    done = await anyio.run_process(
        [os.fspath(PANEWARD), "inject", messages.encode(message).decode()],
        env=daemon.env, check=False,
    )
    assert done.returncode == 0, done.stderr.decode()


def _key(sid: str) -> SessionKey:
    return SessionKey("terminal", sid)


def _status(sid: str, state: str, at_ms: int, serial: int) -> messages.ProgramStatus:
    return messages.ProgramStatus(key=_key(sid), state=state,  # type: ignore[arg-type]
                                  at_ms=at_ms, observed_at_ms=at_ms, serial=serial)


def _spawned(sid: str, pid: int, at_ms: int, pane: str | None) -> messages.PtySpawned:
    return messages.PtySpawned(key=_key(sid), pid=pid, start_token=start_token(pid),
                               at_ms=at_ms, observed_at_ms=at_ms, pane=pane)


@pytest.mark.timeout(180)
async def test_top_shows_the_queue_and_the_last_hour_and_acts_on_keys(
    server: TmuxServer, tmp_path: Path
) -> None:
    """Four sessions injected into a real daemon before the view starts, their evidence dated
    over the last hours (the clock of the view is fixed at ``now``): the view reads their last
    hour from the journal through the control socket. Then keys: needs-you only, a text filter,
    a live wait moving a session up, acknowledge, and Enter jumping a real attached client."""
    from textual.widgets import DataTable  # the `top` extra (the `test` extra has it)

    from actors.cli.top import TopApp

    now = T + 10 * 24 * 60 * MIN  # any time: the view's clock is the test's
    state = tmp_path / "state"
    env = daemon_env(state)
    work_dir = tmp_path / "work" / "project"
    work_dir.mkdir(parents=True)
    panes = {}
    pids = {}
    for sid in ("top-a", "top-b", "top-c"):
        out = await server.arun("split-window", "-d", "-t", "main", "-c", os.fspath(work_dir),
                                "-P", "-F", "#{pane_id}|#{pane_pid}", "sleep 600")
        pane, _, pid = out.strip().partition("|")
        panes[sid], pids[sid] = pane, int(pid)
    await server.arun("select-layout", "-t", "main", "tiled")
    async with DaemonProcess(state, env=env) as daemon:
        # b: everything before the window (its strip is its state now, from the snapshot)
        await _inject(daemon, _spawned("top-b", pids["top-b"], now - 180 * MIN, panes["top-b"]))
        await _inject(daemon, _status("top-b", "working", now - 120 * MIN, 1))
        await _inject(daemon, _status("top-b", "done", now - 90 * MIN, 2))
        # a: spawned before the window, then a turn with a wait for the user in it
        await _inject(daemon, _spawned("top-a", pids["top-a"], now - 70 * MIN, panes["top-a"]))
        await _inject(daemon, _status("top-a", "working", now - 49 * MIN, 1))
        await _inject(daemon, _status("top-a", "blocked", now - 29 * MIN, 2))
        await _inject(daemon, _status("top-a", "working", now - 19 * MIN, 3))
        await _inject(daemon, _status("top-a", "done", now - 9 * MIN, 4))
        # c: started inside the window, working
        await _inject(daemon, _spawned("top-c", pids["top-c"], now - 39 * MIN, panes["top-c"]))
        await _inject(daemon, _status("top-c", "working", now - 37 * MIN, 1))
        # d: in no pane (this test's own process stands for its program), waiting for the user
        await _inject(daemon, _spawned("top-d", os.getpid(), now - 25 * MIN, None))
        await _inject(daemon, _status("top-d", "blocked", now - 15 * MIN, 1))

        async def settled() -> bool:
            status = await daemon.status()
            kinds = {a["key"]["session_id"]: (a["turn"], (a["attention"] or {}).get("kind"))
                     for a in status["activities"]}
            return kinds == {"top-a": ("idle", "turn_done"), "top-b": ("idle", "turn_done"),
                             "top-c": ("working", None),
                             "top-d": ("needs_input", "needs_input")}

        await poll_until(settled, "the four sessions' last evidence applied")

        async with attached_client(server, "main") as user:
            args: argparse.Namespace = build_parser("top").parse_args(
                ["top", "--socket", os.fspath(daemon.hook_socket), "-L", server.name,
                 "--client", user.name]
            )
            app = TopApp(args, clock=lambda: now)
            with anyio.fail_after(120):
                async with app.run_test(size=(220, 40)) as pilot:

                    def ids() -> list[str]:
                        return [row.key.session_id for row in app.rows]

                    async def rows_are(want: list[str]) -> None:
                        await poll_until(lambda: ids() == want, f"rows {want}, not {ids()}")

                    # The queue first (needs you, then the dones oldest first), then the rest.
                    await rows_are(["top-d", "top-b", "top-a", "top-c"])
                    await poll_until(lambda: all(r.where != r.pane for r in app.rows
                                                 if r.pane), "tmux's pane locations")
                    # The snapshot draws the rows; the journal's hour, read after it, the strips.
                    strips = {
                        # unknown, working from -49m, needs you -29m to -19m, working, idle -9m
                        "top-a": "░" * 5 + "▅" * 10 + "█" * 6 + "▅" * 5 + "▁" * 4,
                        "top-b": "▁" * STRIP_CELLS,  # idle since before the hour
                        "top-c": " " * 10 + "░" + "▅" * 19,  # new at -39m
                        "top-d": " " * 17 + "░" * 5 + "█" * 8,
                    }
                    await poll_until(lambda: {r.key.session_id: r.strip for r in app.rows}
                                     == strips, "the last hour's strips")
                    rows = {row.key.session_id: row for row in app.rows}
                    assert [rows[s].attention for s in ("top-d", "top-b", "top-a", "top-c")] == [
                        "needs you 15m", "done 1h", "done 9m", ""
                    ]
                    assert rows["top-c"].state == "working 37m"
                    assert rows["top-d"].where == "-"
                    location = (await server.arun(
                        "display-message", "-p", "-t", panes["top-a"],
                        "#{session_name}:#{window_index}.#{pane_index}")).strip()
                    assert rows["top-a"].where == f"{location} ({panes['top-a']})"
                    assert rows["top-a"].directory == short_path(
                        os.fspath(work_dir), os.environ.get("HOME"))
                    # What the table draws is what the rows say, in their order.
                    table = app.query_one(DataTable)
                    drawn = [str(table.get_row_at(i)[5]) for i in range(table.row_count)]
                    assert drawn == [app.rows[i].strip for i in range(4)]

                    # n: only the sessions that need you; n again: all.
                    await pilot.press("n")
                    await rows_are(["top-d"])
                    await pilot.press("n")
                    await rows_are(["top-d", "top-b", "top-a", "top-c"])
                    # /: a text filter (the "n" typed is text, not the key), Enter keeps it.
                    await pilot.press("slash", *"top-c", "enter")
                    await rows_are(["top-c"])
                    await pilot.press("escape")
                    await rows_are(["top-d", "top-b", "top-a", "top-c"])

                    # Live: c now waits for the user: it joins the queue after d (older).
                    await _inject(daemon, _status("top-c", "blocked", now - 5 * MIN, 2))
                    await rows_are(["top-d", "top-c", "top-b", "top-a"])
                    assert app.rows[1].strip.endswith("███")

                    # a on a needs-you row: nothing to acknowledge there.
                    await pilot.press("ctrl+home")
                    await pilot.press("a")
                    assert "answer it in its pane" in app.note
                    # a on a's done: acknowledged in the daemon, and a leaves the queue.
                    await pilot.press("down", "down", "down")
                    assert app.selected_row() is not None
                    assert app.selected_row().key == _key("top-a")  # type: ignore[union-attr]
                    await pilot.press("a")
                    await rows_are(["top-d", "top-c", "top-b", "top-a"])
                    await poll_until(lambda: app.rows[3].attention == "", "a acknowledged")
                    status = await daemon.status()
                    by_id = {a["key"]["session_id"]: a for a in status["activities"]}
                    assert by_id["top-a"]["attention"] is None

                    # Enter on c: the attached client goes to c's pane.
                    await pilot.press("ctrl+home", "down", "enter")

                    async def on(pane: str) -> bool:
                        out = await server.arun("list-clients", "-F",
                                                "#{client_name}|#{pane_id}")
                        return f"{user.name}|{pane}" in out.split()

                    await poll_until(lambda: on(panes["top-c"]), "the jump to c's pane")
                    # Enter on b's done: there, and acknowledged, as `paneward next` does.
                    await pilot.press("down", "enter")
                    await poll_until(lambda: on(panes["top-b"]), "the jump to b's pane")
                    await rows_are(["top-d", "top-c", "top-a", "top-b"])
                    status = await daemon.status()
                    by_id = {a["key"]["session_id"]: a for a in status["activities"]}
                    assert by_id["top-b"]["attention"] is None
                    await pilot.press("q")
            assert app.return_code == 0


@pytest.mark.timeout(120)
async def test_top_subscribes_again_when_the_daemon_restarts(
    server: TmuxServer, tmp_path: Path
) -> None:
    """The daemon stops under a running view: the view says so and keeps what it showed; a new
    daemon on the same state comes up: the view subscribes again and draws the restored
    session and what happens next."""
    from textual.widgets import DataTable

    from actors.cli.common import status_line
    from actors.cli.top import TopApp

    state = tmp_path / "state"
    env = daemon_env(state)
    now = T + 10 * 24 * 60 * MIN
    with anyio.fail_after(100):
        async with DaemonProcess(state, env=env) as daemon:
            await _inject(daemon, _spawned("top-r", os.getpid(), now - 20 * MIN, None))
            await _inject(daemon, _status("top-r", "working", now - 10 * MIN, 1))
            args = build_parser("top").parse_args(
                ["top", "--socket", os.fspath(daemon.hook_socket), "-L", server.name])
            # no fleet here: the view has no HOST column
            assert json.loads(status_line(args, b"hosts")) is None
            app = TopApp(args, clock=lambda: now)
            async with app.run_test(size=(200, 30)) as pilot:
                await poll_until(lambda: [r.state for r in app.rows] == ["working 10m"],
                                 "the session, working")
                labels = [str(c.label) for c in app.query_one(DataTable).columns.values()]
                assert "HOST" not in labels
                await daemon.stop()
                await poll_until(lambda: "went away" in app.note or "no daemon" in app.note,
                                 "the view to say the daemon is gone")
                assert [r.state for r in app.rows] == ["working 10m"]
                async with DaemonProcess(state, env=env) as again:
                    await poll_until(lambda: app.subscriptions == 2, "a second subscription")
                    await _inject(again, _status("top-r", "blocked", now - 5 * MIN, 2))
                    await poll_until(lambda: [r.attention for r in app.rows] == [
                        "needs you 5m"], "the wait after the restart")
                    assert app.rows[0].strip.endswith("█" * 3)
                    # The program fails: `a` acknowledges the failure in the daemon.
                    await _inject(again, messages.PtyExit(key=_key("top-r"), code=1,
                                                          at_ms=now - 2 * MIN,
                                                          observed_at_ms=now - 2 * MIN))
                    await poll_until(lambda: [r.attention for r in app.rows] == ["failed 2m"],
                                     "the failure")
                    assert app.rows[0].state == "ended 2m"
                    await pilot.press("a")
                    await poll_until(lambda: [r.attention for r in app.rows] == [""],
                                     "the failure acknowledged")
                    status = await again.status()
                    assert status["activities"][0]["attention"] is None
    # A timer or a worker may still fire while the view shuts down, its widgets gone: nothing
    # to draw, and nothing raised.
    app._tick()
    app.say("after the end")
    assert app.selected_row() is None
