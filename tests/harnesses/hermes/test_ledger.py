"""Hermes ledger discovery: pure join/liveness/emission rules, real SQLite ledgers and processes."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from actors.harnesses.hermes.ledger import (
    FireRow,
    FireView,
    HermesLedgerDiscovery,
    ProcessProbe,
    Sent,
    match_session,
    owner_alive,
    plan_emissions,
    probe_process,
    wall,
)
from actors.sources import procfs
from messages import LedgerFire, SessionKey
from tests import support

FIXTURES = support.FIXTURES / "hermes"
SNAPSHOTS = ("1-before-restart", "2-after-restart", "3-after-second-restart")
from tests.support.polling import poll_until  # noqa: E402
from tests.support.sinks import ListSink  # noqa: E402

MAPS = ("map-1-before-restart", "map-2-after-restart", "map-3-holder-killed")


def by_session(sink: ListSink) -> dict[str, LedgerFire]:
    return {m.key.session_id: m for m in sink.of(LedgerFire)}


def fire(status: str = "running", **kw: object) -> FireRow:
    base: dict[str, object] = {
        "id": "f1", "job_id": "job", "status": status, "pid": 10, "process_started_at": 77,
        "claimed_at": "2026-11-30T05:32:11.857189+05:30",
        "started_at": "2026-11-30T05:32:11.921804+05:30", "finished_at": None,
    }
    base.update(kw)
    return FireRow(**base)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- pure


def test_wall_clock_suffix() -> None:
    assert wall("2026-11-30T05:32:11.92+05:30") == "20261130_053211"
    assert wall("2026-11-30") is None and wall(None) is None and wall("garbage-garbage-xx") is None


def test_match_session_takes_the_smallest_suffix_inside_the_window() -> None:
    ids = ["cron_job_20261130_053210", "cron_job_20261130_053212", "cron_job_20261130_053409",
           "cron_other_20261130_053212", "cron_job_20261130_05321x", "web_20261130_053212"]
    assert match_session(fire(), ids) == "cron_job_20261130_053212"  # open-ended while running
    done = fire("completed", finished_at="2026-11-30T05:32:11.99+05:30")
    assert match_session(done, ids) is None  # finished before any later mint
    assert match_session(fire("claimed", started_at=None), ids) is None


def test_owner_alive_needs_exists_not_zombie_and_same_start_token() -> None:
    live = ProcessProbe(True, False, "77")
    assert owner_alive(fire(), live)
    assert owner_alive(fire("claimed"), live)
    assert not owner_alive(fire(), ProcessProbe(False))
    assert not owner_alive(fire(), ProcessProbe(True, True, "77"))  # zombie
    assert not owner_alive(fire(), ProcessProbe(True, False, "78"))  # pid reused
    assert not owner_alive(fire(process_started_at=None), live)  # cannot be proved
    assert not owner_alive(fire("completed"), live)
    assert not owner_alive(fire(pid=None), live)


def view(session: str = "cron_job_x", status: str = "running", pid: int | None = 10,
         alive: bool = True, at: int | None = 1000) -> FireView:
    return FireView("f1", session, status, pid, alive, at)


def test_plan_emissions_only_on_change_with_monotonic_times() -> None:
    memory, out = plan_emissions({}, [view()], 5000)
    assert out == [("f1", Sent("cron_job_x", "running", 10, True, 1000))]
    memory, out = plan_emissions(memory, [view()], 6000)
    assert out == []  # a repeat observation sends nothing
    memory, out = plan_emissions(memory, [view(alive=False)], 7000)
    assert out == [("f1", Sent("cron_job_x", "running", 10, False, 7000))]  # seen at 7000
    memory, out = plan_emissions(memory, [view(status="unknown", alive=False, at=6500)], 8000)
    assert out == [("f1", Sent("cron_job_x", "unknown", 10, False, 7000))]  # never backwards
    memory, out = plan_emissions(memory, [view(status="unknown", pid=11, alive=False, at=6500)],
                                 9000)
    assert out == [("f1", Sent("cron_job_x", "unknown", 11, False, 9000))]  # pid re-read
    memory, out = plan_emissions(memory, [], 9500)
    assert memory == {} and out == []  # pruned from the ledger: forgotten


def test_plan_emissions_supersedes_the_fallback_key() -> None:
    memory, _ = plan_emissions({}, [view(session="exec_f1", at=1000)], 2000)
    memory, out = plan_emissions(memory, [view(session="cron_job_x", at=1000)], 3000)
    assert out == [
        ("f1", Sent("exec_f1", "superseded", 10, False, 3000)),
        ("f1", Sent("cron_job_x", "running", 10, True, 1000)),
    ]


# ----------------------------------------------------------------------------- real ledgers


def executions_schema() -> str:
    text = (FIXTURES / "schema.sql").read_text()
    create = re.search(r"CREATE TABLE executions \(.*?\);", text, re.S)
    assert create is not None
    indexes = re.findall(r"CREATE INDEX idx_executions_\w+ ON executions\([^;]*\);", text)
    assert len(indexes) == 2
    return "\n".join([create.group(0), *indexes])


def sessions_schema() -> str:
    text = (FIXTURES / "schema.sql").read_text()
    create = re.search(r"CREATE TABLE sessions \(.*?\);", text, re.S)
    assert create is not None
    return create.group(0)


def make_home(root: Path) -> Path:
    (root / "cron").mkdir(parents=True)
    with sqlite3.connect(root / "cron" / "executions.db") as db:
        db.executescript(executions_schema())
    with sqlite3.connect(root / "state.db") as db:
        db.executescript(sessions_schema())
    return root


def add_fire(home: Path, fid: str, job: str, status: str, pid: int, started_at: int | None,
             start: str | None = "2026-11-30T05:32:16.029316+05:30",
             finish: str | None = None) -> None:
    with sqlite3.connect(home / "cron" / "executions.db") as db:
        db.execute(
            "INSERT INTO executions (id, job_id, source, process_id, pid, process_started_at,"
            " status, claimed_at, started_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (fid, job, "builtin", "p" * 32, pid, started_at, status,
             "2026-11-30T05:32:15.969855+05:30", start, finish),
        )


def add_session(home: Path, sid: str) -> None:
    with sqlite3.connect(home / "state.db") as db:
        db.execute("INSERT INTO sessions (id, source, started_at) VALUES (?, 'cron', 1.0)", (sid,))


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)


def sleeper(procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    procs.append(p)
    return p


def make_zombie(procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """A child that exited and is not reaped yet (the fixture reaps it at teardown)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    procs.append(p)
    deadline = time.monotonic() + 10
    while not probe_process(p.pid).zombie:
        assert time.monotonic() < deadline, "child never became a zombie"
        time.sleep(0.005)
    return p


@pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="start tokens as /proc field 22 need Linux")
async def test_three_mappings_with_real_processes(
    tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    home = make_home(tmp_path)
    live = sleeper(children)
    token = procfs.start_token(live.pid)
    assert token is not None
    dead = sleeper(children)
    dead.kill()
    dead.wait(timeout=10)
    zombie = make_zombie(children)
    zombie_token = probe_process(zombie.pid).start_token
    assert zombie_token is not None
    add_fire(home, "live", "a" * 12, "running", live.pid, int(token))
    add_session(home, f"cron_{'a' * 12}_20261130_053216")
    add_fire(home, "reused", "b" * 12, "running", live.pid, int(token) + 1)
    add_fire(home, "dead", "c" * 12, "claimed", dead.pid, 5, start=None)
    add_fire(home, "zombie", "d" * 12, "running", zombie.pid, int(zombie_token))
    add_fire(home, "done", "e" * 12, "completed", live.pid, int(token),
             finish="2026-11-30T05:33:00+05:30")
    add_fire(home, "failed", "f" * 12, "failed", dead.pid, 5,
             finish="2026-11-30T05:33:01+05:30")
    actor = HermesLedgerDiscovery(tmp_path)
    sink = ListSink()
    with anyio.fail_after(10):
        await actor.poll_now(sink)
    got = {k: (m.status, m.pid, m.pid_alive) for k, m in by_session(sink).items()}
    assert got == {
        f"cron_{'a' * 12}_20261130_053216": ("running", live.pid, True),
        "exec_reused": ("running", live.pid, False),
        "exec_dead": ("claimed", dead.pid, False),
        "exec_zombie": ("running", zombie.pid, False),
        "exec_done": ("completed", live.pid, False),
        "exec_failed": ("failed", dead.pid, False),
    }
    live_fire = by_session(sink)[f"cron_{'a' * 12}_20261130_053216"]
    # started_at 05:32:16.029316+05:30 is 00:02:16.029 UTC.
    utc = datetime(2026, 11, 30, 0, 2, 16, tzinfo=UTC)
    assert live_fire.at_ms == int(utc.timestamp()) * 1000 + 29
    sink.items.clear()
    with anyio.fail_after(10):
        await actor.poll_now(sink)
    assert sink.of(LedgerFire) == []  # nothing changed
    live.kill()
    live.wait(timeout=10)
    with anyio.fail_after(10):
        await actor.poll_now(sink)
    assert [(m.key.session_id, m.status, m.pid_alive) for m in sink.of(LedgerFire)] == [
        (f"cron_{'a' * 12}_20261130_053216", "running", False)
    ]


async def test_pid_is_reread_every_poll_and_session_arrival_supersedes_fallback(
    tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    home = make_home(tmp_path)
    worker = sleeper(children)
    token = procfs.start_token(worker.pid)
    assert token is not None
    add_fire(home, "f", "a" * 12, "running", 2**22 + 7, 1)  # a pid that is not running
    actor = HermesLedgerDiscovery(tmp_path)
    sink = ListSink()
    with anyio.fail_after(10):
        await actor.poll_now(sink)
        assert [(m.key.session_id, m.pid_alive) for m in sink.of(LedgerFire)] == [("exec_f", False)]
        # A worker takes the fire over (newer Hermes rewrites pid and start time) ...
        with sqlite3.connect(home / "cron" / "executions.db") as db:
            db.execute("UPDATE executions SET pid=?, process_started_at=?", (worker.pid, token))
        # ... and the agent's first turn mints the session row.
        add_session(home, f"cron_{'a' * 12}_20261130_053217")
        sink.items.clear()
        await actor.poll_now(sink)
    assert [(m.key.session_id, m.status, m.pid, m.pid_alive) for m in sink.of(LedgerFire)] == [
        ("exec_f", "superseded", 2**22 + 7, False),
        (f"cron_{'a' * 12}_20261130_053217", "running", worker.pid, True),
    ]
    assert actor.statistics().superseded == 1


# map-3 was taken after the holder (pid 3015) was killed and BEFORE Hermes' second restart,
# so it describes the ledger of snapshot 2 with that pid dead.
@pytest.mark.parametrize(
    ("snapshot", "mapping"),
    [(SNAPSHOTS[0], MAPS[0]), (SNAPSHOTS[1], MAPS[1]), (SNAPSHOTS[1], MAPS[2])],
)
async def test_real_fixture_ledgers_match_the_lab_mapper(
    tmp_path: Path, snapshot: str, mapping: str
) -> None:
    (tmp_path / "cron").mkdir()
    shutil.copy(FIXTURES / snapshot / "executions.db", tmp_path / "cron" / "executions.db")
    shutil.copy(FIXTURES / snapshot / "state.db", tmp_path / "state.db")
    # FAKE probe: the lab's pids (2268, 2554, 3015) lived on another machine; the map files
    # record the lab's verdict for each, which this probe replays with the ledger's tokens.
    expected = json.loads((FIXTURES / f"{mapping}.live.json").read_text())
    verdicts = {row["pid"]: row["owner"] for row in expected}
    with sqlite3.connect(tmp_path / "cron" / "executions.db") as db:
        tokens = dict(db.execute("SELECT pid, process_started_at FROM executions").fetchall())

    def probe(pid: int) -> ProcessProbe:
        if verdicts.get(pid) == "live":
            return ProcessProbe(True, False, str(tokens[pid]))
        return ProcessProbe(False)

    actor = HermesLedgerDiscovery(tmp_path, probe=probe)
    sink = ListSink()
    with anyio.fail_after(10):
        await actor.poll_now(sink)
    assert len(sink.of(LedgerFire)) == len(expected) == 8
    by_key = by_session(sink)
    for row in expected:
        session = row["session"]["session_id"] if row["session"] else f"exec_{row['fire']}"
        msg = by_key[session]
        assert (msg.status, msg.pid) == (row["ledger_status"], row["pid"])
        # The lab's tracker word: running/claimed = live owner, abandoned = dead owner.
        assert msg.pid_alive == (row["tracker_word"] in {"running", "claimed"})
        if row["tracker_word"] == "abandoned":
            assert msg.status in {"running", "claimed"} and not msg.pid_alive


async def test_real_fixture_after_second_restart_is_all_terminal_with_the_same_keys(
    tmp_path: Path,
) -> None:
    (tmp_path / "cron").mkdir()
    shutil.copy(FIXTURES / SNAPSHOTS[2] / "executions.db", tmp_path / "cron" / "executions.db")
    shutil.copy(FIXTURES / SNAPSHOTS[2] / "state.db", tmp_path / "state.db")
    expected = json.loads((FIXTURES / f"{MAPS[2]}.live.json").read_text())
    actor = HermesLedgerDiscovery(tmp_path, probe=lambda pid: ProcessProbe(False))
    sink = ListSink()
    with anyio.fail_after(10):
        await actor.poll_now(sink)
    keys = {r["session"]["session_id"] if r["session"] else f"exec_{r['fire']}" for r in expected}
    assert set(by_session(sink)) == keys
    statuses = sorted(m.status for m in sink.of(LedgerFire))
    assert statuses == ["completed", "completed", "failed", "failed"] + ["unknown"] * 4
    assert not any(m.pid_alive for m in sink.of(LedgerFire))


async def test_locked_missing_and_half_migrated_databases_are_counted_and_retried(
    tmp_path: Path,
) -> None:
    actor = HermesLedgerDiscovery(tmp_path)
    sink = ListSink()
    with anyio.fail_after(10):
        await actor.poll_now(sink)
        assert actor.statistics().db_missing == 1 and sink.items == []
        home = make_home(tmp_path)
        add_fire(home, "f", "a" * 12, "completed", 1, 1, finish="2026-11-30T05:40:00+05:30")
        holder = sqlite3.connect(home / "cron" / "executions.db", isolation_level=None)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            await actor.poll_now(sink)
            assert actor.statistics().db_locked == 1 and sink.items == []
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        await actor.poll_now(sink)
        fires = sink.of(LedgerFire)
        assert [(m.key.session_id, m.status) for m in fires] == [("exec_f", "completed")]
        with sqlite3.connect(home / "cron" / "executions.db") as db:
            db.execute("ALTER TABLE executions RENAME TO executions_old")
        sink.items.clear()
        await actor.poll_now(sink)
        assert actor.statistics().db_schema_errors == 1 and sink.items == []
        assert actor.statistics().fires_tracked == 1  # what we knew is kept
        (home / "cron" / "executions.db").write_bytes(b"not a database at all" * 100)
        await actor.poll_now(sink)
        assert actor.statistics().db_errors == 1 and sink.items == []


async def test_profiles_are_homes_too_and_bad_rows_are_counted(tmp_path: Path) -> None:
    root = make_home(tmp_path / "root")
    prof = make_home(root / "profiles" / "work")
    add_fire(prof, "p1", "a" * 12, "failed", 1, 1, finish="2026-11-30T05:40:00+05:30")
    with sqlite3.connect(root / "cron" / "executions.db") as db:
        # SQLite's type affinity lets a buggy writer store text in INTEGER columns.
        db.execute(
            "INSERT INTO executions (id, job_id, source, process_id, pid, status, claimed_at)"
            " VALUES ('', 'j', 's', 'p', 'abc', 'running', 'x')"
        )
        db.execute(
            "INSERT INTO executions (id, job_id, source, process_id, pid, status, claimed_at)"
            " VALUES ('odd', 'j', 's', 'p', 'abc', 'completed', 'not a time')"
        )
    actor = HermesLedgerDiscovery(root)
    sink = ListSink()
    with anyio.fail_after(10):
        await actor.poll_now(sink)
    assert sorted((m.key.session_id, m.status, m.pid) for m in sink.of(LedgerFire)) == [
        ("exec_odd", "completed", None),
        ("exec_p1", "failed", 1),
    ]
    stats = actor.statistics()
    assert stats.bad_rows == 1 and stats.bad_timestamps == 1 and stats.homes_polled == 2
    assert all(m.key.harness == "hermes" for m in sink.of(LedgerFire))
    assert SessionKey("hermes", "exec_p1") in {m.key for m in sink.of(LedgerFire)}


def test_probe_process_reads_our_own_start_token() -> None:
    me = probe_process(os.getpid())
    assert me.exists and not me.zombie and me.start_token == procfs.start_token(os.getpid())
    assert probe_process(2**22 + 11).exists is False


@pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="start tokens as /proc field 22 need Linux")
async def test_run_reads_the_ledger_when_it_changes_and_when_a_live_fire_exits(
    tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    """No periodic poll within the test (idle_poll_interval is an hour): the home appearing,
    a fire written, and the exit of that fire's pid (a pidfd) are what make it read."""
    root = tmp_path / "hermes"
    worker = sleeper(children)
    token = procfs.start_token(worker.pid)
    assert token is not None
    actor = HermesLedgerDiscovery(root, poll_interval=0.01, idle_poll_interval=3600)
    sink = ListSink()
    job = "a" * 12
    session = f"cron_{job}_20261130_053217"
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(actor.run, sink)
            await poll_until(lambda: actor.statistics().polls >= 1, within=3600, interval=0.002)
            assert actor.statistics().db_missing >= 1  # no home yet
            home = make_home(root)
            add_session(home, session)
            add_fire(home, "f", job, "running", worker.pid, int(token))
            await poll_until(lambda: session in by_session(sink), within=3600, interval=0.002)
            assert by_session(sink)[session].pid_alive
            polls = actor.statistics().polls
            worker.kill()
            await poll_until(
                lambda: not by_session(sink)[session].pid_alive, within=3600, interval=0.002
            )
            assert actor.statistics().polls > polls
            add_fire(home, "g", "b" * 12, "completed", 1, 1, finish="2026-11-30T05:40:00+05:30")
            await poll_until(lambda: "exec_g" in by_session(sink), within=3600, interval=0.002)
            tg.cancel_scope.cancel()
    assert actor.statistics().watch_errors == 0
