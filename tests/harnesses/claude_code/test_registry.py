"""Claude Code registry discovery: parsing and diffing (pure), the actor on real files and
real processes (a child that renames itself to ``claude`` and writes its own record)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc
import pytest

import messages
from actors.harnesses.claude_code.registry import (
    ClaudeRegistryWatcher,
    FileObservation,
    RecordError,
    RegistryRecord,
    RegistryStatistics,
    RegistryTracker,
    parse_record,
    registry_dir,
    scan_directory,
)
from actors.sources import procfs
from tests import support
from tests.support.sinks import ListSink

FIXTURES = support.FIXTURES / "claude_registry"
FAKE_CLAUDE = FIXTURES / "fake_claude.py"
MTIME = 1_790_000_000_000

# ---------------------------------------------------------------- parse_record (pure)


def test_parses_real_waiting_record() -> None:
    data = (FIXTURES / "registry-waiting.json").read_bytes()
    rec = parse_record(data, 26995, MTIME)
    assert rec == RegistryRecord(
        pid=26995,
        session_id="d9db7ac4-b60a-4a14-ae51-321496e4fc8f",
        proc_start="154519",
        status="waiting",
        waiting_for="permission prompt",
        version="2.1.332",
        at_ms=1795995370848,
        parked=False,
    )


@pytest.mark.parametrize(("name", "status"), [("registry-idle", "idle"), ("registry-busy", "busy")])
def test_parses_real_status_records(name: str, status: str) -> None:
    obj = json.loads((FIXTURES / f"{name}.json").read_bytes())
    rec = parse_record((FIXTURES / f"{name}.json").read_bytes(), obj["pid"], MTIME)
    assert rec.status == status
    assert rec.waiting_for is None
    assert rec.at_ms == obj["statusUpdatedAt"]
    assert rec.proc_start == obj["procStart"]


def test_first_write_has_no_status_and_falls_back_to_started_at() -> None:
    line = (FIXTURES / "q2-rotation-sessions_watch.jsonl").read_text().splitlines()[0]
    content = json.loads(line)["content"]
    rec = parse_record(content.encode(), 7603, MTIME)
    assert rec.status is None
    assert rec.at_ms == 1795997149824  # startedAt: no statusUpdatedAt/updatedAt yet


def test_old_record_without_proc_start_or_times_uses_started_at() -> None:
    obj = json.loads((FIXTURES / "registry-2.1.112-transcribed.json").read_bytes())
    del obj["_note"]
    rec = parse_record(json.dumps(obj).encode(), 17720, MTIME)
    assert (rec.proc_start, rec.status, rec.version) == (None, None, None)
    assert rec.at_ms == 1795994776769
    del obj["startedAt"]
    assert parse_record(json.dumps(obj).encode(), 17720, MTIME).at_ms == MTIME


def test_parked_record_is_flagged() -> None:
    obj = json.loads((FIXTURES / "registry-idle.json").read_bytes())
    obj["parkedJobId"] = "cc2898f0"
    assert parse_record(json.dumps(obj).encode(), obj["pid"], MTIME).parked


def test_numeric_proc_start_is_read_as_its_decimal_string() -> None:
    data = b'{"pid": 5, "sessionId": "s", "procStart": 123}'
    assert parse_record(data, 5, MTIME).proc_start == "123"


@pytest.mark.parametrize(
    ("data", "reason", "detail"),
    [
        (b"\xff\xfe{}", "invalid_utf8", "can't decode"),
        (b'{"pid": 5, "sessionId": "s"', "malformed_json", "truncated"),
        (b"", "malformed_json", "truncated"),
        (b"[1, 2]", "not_object", "list"),
        (b'{"sessionId": "s"}', "bad_field", "pid is None"),
        (b'{"pid": "5", "sessionId": "s"}', "bad_field", "pid is '5'"),
        (b'{"pid": true, "sessionId": "s"}', "bad_field", "pid is True"),
        (b'{"pid": 6, "sessionId": "s"}', "pid_mismatch", "pid 6 in 5.json"),
        (b'{"pid": 5}', "bad_field", "sessionId"),
        (b'{"pid": 5, "sessionId": ""}', "bad_field", "sessionId"),
        (b'{"pid": 5, "sessionId": "s", "status": 3}', "bad_field", "status is int"),
        (b'{"pid": 5, "sessionId": "s", "procStart": []}', "bad_field", "procStart"),
        (b'{"pid": 5, "sessionId": "s", "statusUpdatedAt": 1795995370}', "bad_field", "epoch-ms"),
        (b'{"pid": 5, "sessionId": "s", "updatedAt": "x"}', "bad_field", "updatedAt is str"),
        (b'{"pid": 5, "sessionId": "s", "waitingFor": {}}', "bad_field", "waitingFor"),
        (b" " * (256 * 1024 + 1), "too_large", "bytes"),
    ],
)
def test_rejections_name_their_reason(data: bytes, reason: str, detail: str) -> None:
    with pytest.raises(RecordError, match=detail) as info:
        parse_record(data, 5, MTIME)
    assert info.value.reason == reason


# ---------------------------------------------------------------- RegistryTracker (pure)

KEY_A = messages.SessionKey("claude-code", "a")
KEY_B = messages.SessionKey("claude-code", "b")
NOW = 1_800_000_000_000


def rec(
    session: str = "a",
    status: str | None = "idle",
    *,
    pid: int = 7,
    proc_start: str | None = "100",
    at_ms: int = 1_799_000_000_000,
    parked: bool = False,
    waiting_for: str | None = None,
) -> RegistryRecord:
    return RegistryRecord(
        pid=pid,
        session_id=session,
        proc_start=proc_start,
        status=status,
        waiting_for=waiting_for,
        version="2.1.332",
        at_ms=at_ms,
        parked=parked,
    )


def obs(
    parsed: RegistryRecord | RecordError,
    token: str | None = "100",
    identity: tuple[int, int, int] = (1, 1, 1),
    comm: str | None = "claude",
    uid: int | None = None,
) -> FileObservation:
    """What a scan sees; by default the pid is a live ``claude`` process of ours."""
    return FileObservation(
        identity=identity, parsed=parsed, token=token, comm=comm,
        uid=os.getuid() if uid is None else uid,
    )


def status(m: object) -> tuple[str, str | None] | None:
    if isinstance(m, messages.RegistryStatus):
        return (m.key.session_id, m.status)
    return None


def test_tracker_emits_live_records_only_on_change() -> None:
    t = RegistryTracker()
    [m] = t.apply({7: obs(rec(status=None))}, {}, NOW)
    assert isinstance(m, messages.RegistryStatus)
    assert (m.key, m.pid, m.start_token, m.status, m.at_ms, m.observed_at_ms, m.version) == (
        KEY_A, 7, "100", None, 1_799_000_000_000, NOW, "2.1.332",
    )  # fmt: skip
    assert t.apply({7: obs(rec(status=None), identity=(2, 2, 2))}, {}, NOW + 1) == []
    [m] = t.apply({7: obs(rec(status="busy", at_ms=1_799_000_000_500))}, {}, NOW + 2)
    assert status(m) == ("a", "busy")
    [m] = t.apply({7: obs(rec(status="waiting", waiting_for="permission prompt"))}, {}, NOW + 3)
    assert isinstance(m, messages.RegistryStatus) and m.waiting_for == "permission prompt"
    [m] = t.apply({7: obs(rec(status="shell"))}, {}, NOW + 4)
    assert status(m) == ("a", "shell")


def test_tracker_dead_pid_is_never_emitted_and_counted_once() -> None:
    t = RegistryTracker()
    assert t.apply({7: obs(rec(), token=None)}, {}, NOW) == []
    assert t.apply({7: obs(rec(), token=None)}, {}, NOW) == []
    assert t.counts["dead_pid"] == 1
    # A new version of the file is a new rejection.
    assert t.apply({7: obs(rec(), token=None, identity=(9, 9, 9))}, {}, NOW) == []
    assert t.counts["dead_pid"] == 2


def test_tracker_proc_start_mismatch_is_ignored() -> None:
    t = RegistryTracker()
    assert t.apply({7: obs(rec(proc_start="100"), token="999")}, {}, NOW) == []
    assert t.counts["proc_start_mismatch"] == 1


def test_tracker_owner_found_dead_removes_with_pid_alive_false() -> None:
    t = RegistryTracker()
    t.apply({7: obs(rec())}, {}, NOW)
    [m] = t.apply({7: obs(rec(), token=None)}, {}, NOW + 5)
    assert m == messages.RegistryRemoved(
        key=KEY_A, pid=7, at_ms=NOW + 5, observed_at_ms=NOW + 5, pid_alive=False
    )
    assert t.emitted_pids == []
    assert t.apply({7: obs(rec(), token=None)}, {}, NOW + 6) == []


def test_tracker_recycled_pid_removes_with_pid_alive_false() -> None:
    t = RegistryTracker()
    t.apply({7: obs(rec())}, {}, NOW)
    [m] = t.apply({7: obs(rec(), token="555")}, {}, NOW)
    assert isinstance(m, messages.RegistryRemoved) and not m.pid_alive and not m.rotated


def test_tracker_deleted_file_removes_with_probed_liveness() -> None:
    t = RegistryTracker()
    t.apply({7: obs(rec()), 8: obs(rec("b", pid=8, proc_start="200"), token="200")}, {}, NOW)
    out = t.apply({}, {7: "100", 8: None}, NOW)
    assert [(m.key, m.pid_alive) for m in out if isinstance(m, messages.RegistryRemoved)] == [
        (KEY_A, True),
        (KEY_B, False),
    ]
    assert t.emitted_pids == []


def test_tracker_rotation_removes_old_key_then_announces_new() -> None:
    t = RegistryTracker()
    t.apply({7: obs(rec("a"))}, {}, NOW)
    removed, announced = t.apply({7: obs(rec("b"))}, {}, NOW)
    assert removed == messages.RegistryRemoved(
        key=KEY_A, pid=7, at_ms=NOW, observed_at_ms=NOW, pid_alive=True, rotated=True
    )
    assert status(announced) == ("b", "idle")
    assert t.rotations == 1


def test_tracker_new_incarnation_with_other_session_ends_old_as_dead() -> None:
    t = RegistryTracker()
    t.apply({7: obs(rec("a"))}, {}, NOW)
    removed, announced = t.apply({7: obs(rec("b", proc_start="300"), token="300")}, {}, NOW)
    assert isinstance(removed, messages.RegistryRemoved)
    assert (removed.key, removed.pid_alive, removed.rotated) == (KEY_A, False, False)
    assert status(announced) == ("b", "idle")


def test_tracker_parked_session_leaves_this_pid() -> None:
    t = RegistryTracker()
    assert t.apply({7: obs(rec(parked=True))}, {}, NOW) == []
    assert t.counts["parked"] == 1
    t2 = RegistryTracker()
    t2.apply({7: obs(rec())}, {}, NOW)
    [m] = t2.apply({7: obs(rec(parked=True))}, {}, NOW)
    assert isinstance(m, messages.RegistryRemoved) and m.pid_alive and m.rotated


def test_tracker_garbled_rewrite_keeps_session_while_owner_lives() -> None:
    t = RegistryTracker()
    t.apply({7: obs(rec())}, {}, NOW)
    bad = RecordError("malformed_json", "truncated")
    assert t.apply({7: obs(bad, identity=(3, 3, 3))}, {}, NOW) == []
    assert t.counts["malformed_json"] == 1
    [m] = t.apply({7: obs(bad, identity=(3, 3, 3), token=None)}, {}, NOW)
    assert isinstance(m, messages.RegistryRemoved) and not m.pid_alive
    assert t.counts["malformed_json"] == 1  # same file version: counted once


def test_tracker_record_without_proc_start_needs_a_claude_process() -> None:
    t = RegistryTracker()
    assert t.apply({7: obs(rec(proc_start=None), token="5", comm="bash")}, {}, NOW) == []
    assert t.counts["not_claude"] == 1
    [m] = t.apply(
        {7: obs(rec(proc_start=None), token="5", comm="claude", identity=(4, 4, 4))}, {}, NOW
    )
    assert isinstance(m, messages.RegistryStatus) and m.start_token == "5"


def test_replay_of_real_rotation_capture() -> None:
    """The q2 capture (``/clear``, ``/resume``, a second process on a live session,
    ``--continue``'s throwaway id, ``/exit``) replayed with every pid alive."""
    t = RegistryTracker()
    files: dict[int, FileObservation] = {}
    out: list[messages.RegistryStatus | messages.RegistryRemoved] = []
    tokens: dict[int, str] = {}
    for n, line in enumerate(
        (FIXTURES / "q2-rotation-sessions_watch.jsonl").read_text().splitlines()
    ):
        entry: dict[str, Any] = json.loads(line)
        pid = int(entry["file"].removesuffix(".json"))
        if entry.get("deleted"):
            files.pop(pid, None)
        else:
            parsed = parse_record(entry["content"].encode(), pid, MTIME)
            assert parsed.proc_start is not None
            tokens[pid] = parsed.proc_start
            files[pid] = obs(parsed, token=parsed.proc_start, identity=(n, 0, 0))
        out.extend(t.apply(files, {p: tokens[p] for p in t.emitted_pids if p not in files}, NOW))
    b5, c6 = "b5da2d7e-1d6e-4a2b-96d1-41f1536b1c12", "6031a733-bfa4-4a61-90cc-af496e026523"
    first = [(type(m).__name__, m.key.session_id[:8], m.pid) for m in out][:10]
    assert (
        first
        == [
            ("RegistryStatus", b5[:8], 7603),  # first write, no status
            ("RegistryStatus", b5[:8], 7603),  # idle
            ("RegistryStatus", b5[:8], 7603),  # busy
            ("RegistryStatus", b5[:8], 7603),  # idle
            ("RegistryRemoved", b5[:8], 7603),  # /clear
            ("RegistryStatus", c6[:8], 7603),
            ("RegistryStatus", c6[:8], 7603),
            ("RegistryStatus", c6[:8], 7603),
            ("RegistryStatus", c6[:8], 7603),  # /resume picker: waiting, dialog open
            ("RegistryRemoved", c6[:8], 7603),  # picked b5da
        ]
    )
    waits = [m for m in out if isinstance(m, messages.RegistryStatus) and m.status == "waiting"]
    assert [w.waiting_for for w in waits][:2] == ["dialog open", "permission prompt"]
    rotations = [m for m in out if isinstance(m, messages.RegistryRemoved) and m.rotated]
    # 7603: /clear and /resume; 8567: --continue's throwaway id replaced 0.1 s later.
    assert [(m.pid, m.key.session_id[:8]) for m in rotations][:3] == [
        (7603, b5[:8]), (7603, c6[:8]), (8567, "ee07430f"),
    ]  # fmt: skip
    assert all(m.pid_alive for m in rotations)
    exits = [m for m in out if isinstance(m, messages.RegistryRemoved) and not m.rotated]
    assert {m.pid for m in exits} >= {7603, 8264, 8356, 8567}
    assert all(m.pid_alive for m in exits)  # deleted while the (replayed) pid lived
    assert t.emitted_pids == []
    for m in out:
        messages.revalidate(m)


# ---------------------------------------------------------------- the actor, real files


class FakeClaude:
    def __init__(self, process: anyio.abc.Process, session: str) -> None:
        self.process = process
        self.pid = process.pid
        self.session = session
        self.buffer = b""

    async def send(self, command: str) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        await self.process.stdin.send(command.encode() + b"\n")
        await self.ack()

    async def ack(self) -> None:
        assert self.process.stdout is not None
        while b"\n" not in self.buffer:
            self.buffer += await self.process.stdout.receive()
        line, _, self.buffer = self.buffer.partition(b"\n")
        assert line == b"ok"


@asynccontextmanager
async def fake_claude(config: Path, session: str) -> AsyncIterator[FakeClaude]:
    process = await anyio.open_process(
        [sys.executable, str(FAKE_CLAUDE), str(config), session],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    async with process:
        child = FakeClaude(process, session)
        try:
            await child.ack()  # first write done
            yield child
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()


@asynccontextmanager
async def running(watcher: ClaudeRegistryWatcher, sink: ListSink) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run, sink)
        await watcher.wait_scans(1)
        yield
        tg.cancel_scope.cancel()


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path))
    (tmp_path / "sessions").mkdir()
    return tmp_path


Mode = Literal["watch", "poll"]
MODES: list[Mode] = ["watch", "poll"]


def make_watcher(mode: Mode, liveness_interval: float = 3600) -> ClaudeRegistryWatcher:
    # In watch mode an hour-long liveness rescan means every change below must have
    # come through a file-system notification; poll mode polls every 50 ms.
    return ClaudeRegistryWatcher(mode=mode, poll_interval=0.05, liveness_interval=liveness_interval)


def summary(m: messages.Inbound) -> tuple[object, ...]:
    if isinstance(m, messages.RegistryStatus):
        return ("status", m.key.session_id, m.status, m.waiting_for)
    if isinstance(m, messages.RegistryRemoved):
        return ("removed", m.key.session_id, m.pid_alive, m.rotated)
    raise AssertionError(m)


def test_registry_dir_follows_claude_config_dir(config: Path) -> None:
    assert registry_dir() == config / "sessions"
    assert ClaudeRegistryWatcher().directory == config / "sessions"


@pytest.mark.parametrize("mode", MODES)
async def test_status_edges_of_a_live_claude(config: Path, mode: Mode) -> None:
    sink = ListSink()
    watcher = make_watcher(mode)
    with anyio.fail_after(20):
        async with fake_claude(config, "s-1") as child, running(watcher, sink):
            token = procfs.start_token(child.pid)
            assert procfs.read_comm(child.pid) == "claude"
            [first] = await sink.wait_count(1)
            assert isinstance(first, messages.RegistryStatus)
            assert (first.key, first.pid, first.start_token, first.status, first.version) == (
                messages.SessionKey("claude-code", "s-1"), child.pid, token, None, "2.1.332",
            )  # fmt: skip
            await child.send("status idle")
            await sink.wait_count(2)
            await child.send("touch")  # identical record rewritten: no new message
            await child.send("status busy")
            await sink.wait_count(3)
            await child.send("waiting permission prompt")
            await sink.wait_count(4)
            await child.send("status shell")
            await sink.wait_count(5)
            await child.send("status idle")
            items = await sink.wait_count(6)
            record = json.loads((config / "sessions" / f"{child.pid}.json").read_bytes())
    assert [summary(m) for m in items] == [
        ("status", "s-1", None, None),
        ("status", "s-1", "idle", None),
        ("status", "s-1", "busy", None),
        ("status", "s-1", "waiting", "permission prompt"),
        ("status", "s-1", "shell", None),
        ("status", "s-1", "idle", None),
    ]
    last = items[-1]
    assert isinstance(last, messages.RegistryStatus)
    assert last.at_ms == record["statusUpdatedAt"]
    assert watcher.statistics().status_sent == 6
    assert watcher.statistics().watch_failures == 0


@pytest.mark.parametrize("mode", MODES)
async def test_sigkilled_claude_leaves_file_but_is_removed_as_dead(
    config: Path, mode: Mode
) -> None:
    sink = ListSink()
    # Nothing on disk changes when the owner is SIGKILLed: the liveness rescan finds it.
    watcher = make_watcher(mode, liveness_interval=0.1)
    with anyio.fail_after(20):
        async with fake_claude(config, "s-kill") as child, running(watcher, sink):
            await child.send("status busy")
            await sink.wait_count(2)
            child.process.send_signal(signal.SIGKILL)
            await child.process.wait()
            items = await sink.wait_count(3)
            assert (config / "sessions" / f"{child.pid}.json").exists()  # left behind
            stats = watcher.statistics()
    assert summary(items[2]) == ("removed", "s-kill", False, False)
    assert items[2].pid == child.pid  # type: ignore[union-attr]
    assert stats.tracked == 0 and stats.dead_pid == 1


@pytest.mark.parametrize("mode", MODES)
async def test_rotation_clear_then_resume(config: Path, mode: Mode) -> None:
    sink = ListSink()
    watcher = make_watcher(mode)
    with anyio.fail_after(20):
        async with fake_claude(config, "old") as child, running(watcher, sink):
            await child.send("status idle")
            await sink.wait_count(2)
            await child.send("rotate new")
            await sink.wait_count(4)
            await child.send("rotate old")
            items = await sink.wait_count(6)
    assert [summary(m) for m in items[2:]] == [
        ("removed", "old", True, True),
        ("status", "new", "idle", None),
        ("removed", "new", True, True),
        ("status", "old", "idle", None),
    ]
    assert watcher.statistics().rotations == 2


@pytest.mark.parametrize("mode", MODES)
async def test_deleted_file_and_parked_session(config: Path, mode: Mode) -> None:
    sink = ListSink()
    watcher = make_watcher(mode)
    with anyio.fail_after(20):
        async with (
            fake_claude(config, "del") as a,
            fake_claude(config, "park") as b,
            running(watcher, sink),
        ):
            await sink.wait_count(2)
            await a.send("delete")  # /exit: Claude deletes its file (still alive here)
            await b.send("park job1")
            items = await sink.wait_count(4)
            stats = watcher.statistics()
    assert sorted(summary(m) for m in items[2:]) == [
        ("removed", "del", True, False),
        ("removed", "park", True, True),
    ]
    assert stats.parked == 1 and stats.tracked == 0


@pytest.mark.parametrize("mode", MODES)
async def test_bad_files_are_skipped_and_counted(config: Path, mode: Mode) -> None:
    sessions = config / "sessions"
    with subprocess_sleeper(config / "bin") as sleeper:
        live_token = procfs.start_token(sleeper.pid)
        assert live_token is not None
        good = json.loads((FIXTURES / "registry-idle.json").read_bytes())
        mismatched = dict(good, pid=sleeper.pid, procStart=str(int(live_token) + 1))
        (sessions / f"{sleeper.pid}.json").write_text(json.dumps(mismatched))
        (sessions / "101.json").write_bytes(b'{"pid": 101, "sessionId": "x", "sta')
        (sessions / "102.json").write_bytes(b'{"pid": 102, "sessionId": "\xff"}')
        (sessions / "103.json").write_text(json.dumps(dict(good, pid=103, parkedJobId="j")))
        (sessions / "104.json").write_text("[]")
        (sessions / "105.json").symlink_to(sessions / "does-not-exist")  # never followed
        os.mkfifo(sessions / "107.json")  # never opened for reading (it would block)
        (sessions / "106.json").write_text(json.dumps(dict(good, pid=999_999_999)))
        (sessions / "notes.txt").write_text("ignored")
        stale = (FIXTURES / "stale-after-kill-9-14537.json").read_bytes()
        (sessions / "14537.json").write_bytes(stale)  # its pid is long gone (or another process)
        sink = ListSink()
        watcher = make_watcher(mode)
        with anyio.fail_after(20):
            async with fake_claude(config, "good") as child, running(watcher, sink):
                items = await sink.wait_count(1)
                stats = watcher.statistics()
    assert [summary(m) for m in items] == [("status", "good", None, None)]
    assert items[0].pid == child.pid  # type: ignore[union-attr]
    assert (stats.malformed_json, stats.invalid_utf8, stats.parked, stats.not_object) == (
        1, 1, 1, 1,
    )  # fmt: skip
    assert stats.pid_mismatch == 1
    assert stats.not_regular >= 2  # the symlink and the FIFO
    # The sleeper (named claude, wrong procStart) and 14537 (gone, or some other process).
    assert (
        stats.proc_start_mismatch + stats.dead_pid + stats.not_claude + stats.not_ours == 2
    )
    assert stats.proc_start_mismatch >= 1


async def test_directory_created_after_start_is_picked_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "config"))
    sink = ListSink()
    # No liveness rescan within the test: inotify on the nearest existing ancestor says when
    # the directories appear, and the watch is set before the new directory is scanned.
    watcher = make_watcher("watch")
    with anyio.fail_after(20):
        async with running(watcher, sink):
            (tmp_path / "config").mkdir()
            (tmp_path / "config" / "sessions").mkdir()
            async with fake_claude(tmp_path / "config", "late") as child:
                [m] = await sink.wait_count(1)
                assert m.pid == child.pid  # type: ignore[union-attr]
            # The directory goes (its sessions end with it), then comes back.
            shutil.rmtree(tmp_path / "config" / "sessions")
            [gone] = (await sink.wait_count(2))[1:]
            assert summary(gone) == ("removed", "late", False, False)
            (tmp_path / "config" / "sessions").mkdir()
            async with fake_claude(tmp_path / "config", "again") as child:
                items = await sink.wait_count(3)
                assert summary(items[2]) == ("status", "again", None, None)
    assert watcher.statistics().watch_failures == 0


async def test_a_rewrite_rereads_only_the_file_that_changed(config: Path) -> None:
    """Cost follows changes: with many records present, one status edge reads one file and
    probes one pid, whatever the number of sessions."""
    sessions = config / "sessions"
    sleepers = start_sleepers(20, config / "bin")  # named claude: only a claude owns a record
    try:
        good = json.loads((FIXTURES / "registry-idle.json").read_bytes())
        for n, proc in enumerate(sleepers):
            record = dict(good, pid=proc.pid, sessionId=f"other-{n}",
                          procStart=procfs.start_token(proc.pid))
            (sessions / f"{proc.pid}.json").write_text(json.dumps(record))
        sink = ListSink()
        watcher = make_watcher("watch")
        with anyio.fail_after(20):
            async with fake_claude(config, "edge") as child, running(watcher, sink):
                await sink.wait_count(21)
                before = watcher.statistics()
                assert before.files_read == 21 and before.tracked == 21
                await child.send("status busy")
                items = await sink.wait_count(22)
                after = watcher.statistics()
    finally:
        for proc in sleepers:
            proc.kill()
            proc.wait()
    assert summary(items[-1]) == ("status", "edge", "busy", None)
    assert after.files_read - before.files_read == 1
    assert after.scans - before.scans == 1
    assert after.vanished == before.vanished == 0


def test_bad_configuration_is_rejected() -> None:
    with pytest.raises(ValueError, match="positive"):
        ClaudeRegistryWatcher(poll_interval=0)
    with pytest.raises(ValueError, match="mode"):
        ClaudeRegistryWatcher(mode="inotify")  # type: ignore[arg-type]


def start_sleepers(count: int, bin_dir: Path | None = None) -> list[subprocess.Popen[bytes]]:
    """``count`` live ``sleep 60``; with ``bin_dir``, each with the comm ``claude`` (as
    :func:`subprocess_sleeper`)."""
    argv = ["sleep", "60"]
    if bin_dir is not None:
        bin_dir.mkdir(exist_ok=True)
        link = bin_dir / "claude"
        if not link.is_symlink():
            link.symlink_to(shutil.which("sleep") or "/bin/sleep")
        argv[0] = os.fspath(link)
    return [subprocess.Popen(argv) for _ in range(count)]


@contextmanager
def subprocess_sleeper(bin_dir: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """A live ``sleep 60``; with ``bin_dir``, started through a link named ``claude`` there, so
    its comm is ``claude`` (comm is the name of the path exec'd)."""
    argv = ["sleep", "60"]
    if bin_dir is not None:
        bin_dir.mkdir(exist_ok=True)
        link = bin_dir / "claude"
        link.symlink_to(shutil.which("sleep") or "/bin/sleep")
        argv[0] = os.fspath(link)
    proc = subprocess.Popen(argv)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------- hostile files and owners


def test_tracker_needs_a_claude_process_of_our_own_user() -> None:
    t = RegistryTracker()
    assert t.apply({7: obs(rec(), uid=os.getuid() + 1)}, {}, NOW) == []
    assert t.apply({8: obs(rec(pid=8), comm="bash")}, {}, NOW) == []
    assert (t.counts["not_ours"], t.counts["not_claude"]) == (1, 1)
    [m] = t.apply({9: obs(rec(pid=9), comm="claude.exe")}, {}, NOW)
    assert isinstance(m, messages.RegistryStatus)


def _registry_file(sessions: Path, pid: int, token: str) -> None:
    good = json.loads((FIXTURES / "registry-idle.json").read_bytes())
    (sessions / f"{pid}.json").write_text(json.dumps(dict(good, pid=pid, procStart=token)))


@pytest.mark.skipif(os.getuid() != 0, reason="another uid's process needs root (setpriv)")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) missing")
def test_records_naming_live_processes_that_are_not_our_claude_prove_nothing(
    tmp_path: Path,
) -> None:
    """A registry file naming any live pid with its real start time is not enough to be a
    running Claude: pid 1 (not claude), and a process named claude running as another user."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    link = tmp_path / "bin" / "claude"
    link.parent.mkdir()
    link.symlink_to(shutil.which("sleep") or "/bin/sleep")
    other = subprocess.Popen(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", os.fspath(link), "60"]
    )
    try:
        token_1 = procfs.start_token(1)
        assert token_1 is not None
        deadline = time.monotonic() + 10
        while procfs.read_comm(other.pid) != "claude":  # until setpriv has exec'd it
            assert time.monotonic() < deadline, "setpriv never ran the claude-named sleep"
            time.sleep(0.001)  # polling another process's /proc entry
        other_token = procfs.start_token(other.pid)
        assert other_token is not None
        assert procfs.read_uid(other.pid) == 65534
        _registry_file(sessions, 1, token_1)
        _registry_file(sessions, other.pid, other_token)
        stats = RegistryStatistics()
        tracker = RegistryTracker(stats)
        files, gone = scan_directory(sessions, {}, (), (), stats)
        assert tracker.apply(files, gone, NOW) == []
    finally:
        other.kill()
        other.wait()
    assert stats.not_ours == 1  # the other user's "claude"
    assert stats.not_claude + stats.not_ours == 2  # pid 1: not claude (or not ours)


def test_a_record_swapped_for_a_fifo_mid_scan_never_blocks_the_scan(tmp_path: Path) -> None:
    """Another thread keeps renaming a regular file and a FIFO over one record's name while
    scans run: a scan that lands between its stat and its open must not block on the FIFO
    (that would stop discovery, with no counter, and keep SIGTERM from ending the daemon)."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    good = (FIXTURES / "registry-idle.json").read_bytes()
    name = sessions / "4242.json"
    name.write_bytes(good)
    stop = threading.Event()

    def swap() -> None:
        n = 0
        while not stop.is_set():
            spare = sessions / f".swap-{n}"
            if n % 2:
                os.mkfifo(spare)
            else:
                spare.write_bytes(good)
            os.rename(spare, name)
            n += 1

    stats = RegistryStatistics()
    scans = threading.Event()

    def scan() -> None:
        cache: dict[int, Any] = {}
        done = 0
        # At least 3,000 scans, and until both kinds were met: on a loaded machine the
        # swapper may not run for a whole batch of scans (the GIL's switch interval).
        while not stop.is_set() and (done < 3000 or not (stats.files_read and
                                                          stats.not_regular)):
            scan_directory(sessions, cache, ("4242.json",), (), stats)
            done += 1
        scans.set()

    swapper = threading.Thread(target=swap, daemon=True)
    scanner = threading.Thread(target=scan, daemon=True)
    swapper.start()
    scanner.start()
    try:
        finished = scans.wait(60)
    finally:
        stop.set()
        swapper.join(10)
        # Release a scan stuck in open() on the FIFO, if one is (the old behaviour).
        with contextlib.suppress(OSError):
            os.close(os.open(name, os.O_WRONLY | os.O_NONBLOCK))
        scanner.join(10)
    assert finished, "a scan blocked on the FIFO"
    assert stats.not_regular > 0
    assert stats.files_read > 0
