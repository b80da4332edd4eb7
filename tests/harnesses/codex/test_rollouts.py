"""Codex rollout discovery: pure tail/ownership core, then real processes and files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from actors.harnesses.codex.rollouts import (
    CodexRolloutDiscovery,
    Owned,
    OwnershipSample,
    OwnershipState,
    Released,
    RolloutOwner,
    RolloutTail,
    build_sample,
    codex_processes,
    parse_boundary_line,
    parse_session_meta,
    parse_timestamp_ms,
    reconcile_ownership,
    root_of,
    thread_id_from_path,
)
from actors.sources import procfs
from messages import (
    LifecycleBoundary,
    MessageError,
    RolloutOwned,
    RolloutReleased,
    SessionKey,
    revalidate,
)
from tests import support
from tests.support.polling import poll_until
from tests.support.sinks import ListSink

FIXTURES = support.FIXTURES / "codex"
THREAD = "01a229ab-bacd-7422-95f3-108794d72fbf"
CHILD = "01a229ff-0000-7000-8000-000000000002"
MiB = 1 << 20


def ms(y: int, mo: int, d: int, h: int, mi: int, sec: int, milli: int) -> int:
    return int(datetime(y, mo, d, h, mi, sec, tzinfo=UTC).timestamp()) * 1000 + milli


def record(kind: str, turn: str, ts: str = "2026-11-29T23:37:34.856Z") -> bytes:
    return (
        json.dumps(
            {
                "timestamp": ts,
                "ordinal": 1,
                "type": "event_msg",
                "payload": {"type": kind, "turn_id": turn},
            },
            separators=(",", ":"),
        ).encode()
        + b"\n"
    )


def meta(thread: str, parent: str | None = None) -> bytes:
    payload: dict[str, object] = {"id": thread, "cli_version": "0.171.0", "source": "cli"}
    if parent is not None:
        payload["source"] = {"subagent": {"thread_spawn": {"parent_thread_id": parent}}}
    return json.dumps({"timestamp": "2026-11-29T23:37:34.855Z", "type": "session_meta",
                       "payload": payload}).encode() + b"\n"


def padding(n: int) -> bytes:
    """``n`` bytes of valid non-boundary lines (each ~4 KiB)."""
    line = b'{"type":"response_item","payload":{"text":"' + b"x" * 4000 + b'"}}\n'
    reps, rest = divmod(n, len(line))
    tail = b'{"type":"x","p":"' + b"y" * max(0, rest - 19) + b'"}\n' if rest >= 19 else b"\n" * rest
    return line * reps + tail


class MemFile:
    """A byte buffer with a counting read function, for the sans-IO tail."""

    def __init__(self, data: bytes = b"") -> None:
        self.data = bytearray(data)
        self.reads = 0

    def read(self, offset: int, length: int) -> bytes:
        self.reads += 1
        return bytes(self.data[offset : offset + length])

    def feed(self, tail: RolloutTail) -> list[tuple[str, str | None]]:
        return [(r.boundary, r.turn_id) for r in tail.update(len(self.data), self.read)]


# ----------------------------------------------------------------------------- pure parsing


def test_parse_boundary_line_accepts_only_event_msg_boundaries() -> None:
    rec = parse_boundary_line(record("task_complete", "t1"))
    assert rec is not None
    expected_ms = ms(2026, 11, 29, 23, 37, 34, 856)
    assert (rec.boundary, rec.turn_id, rec.at_ms) == ("task_complete", "t1", expected_ms)
    not_event = b'{"type":"response_item","payload":{"type":"task_started"}}'
    assert parse_boundary_line(not_event) is None
    assert parse_boundary_line(b'{"type":"event_msg","payload":{"type":"token_count"}}') is None
    assert parse_boundary_line(b"\xff\xfe garbage") is None
    assert parse_boundary_line(b'{"type":"event_msg","payload":[1]}') is None


def test_parse_timestamp_ms() -> None:
    assert parse_timestamp_ms("1970-01-01T00:00:01.5Z") == 1500
    assert parse_timestamp_ms("1970-01-01T00:00:01") == 1000
    assert parse_timestamp_ms("1970-01-01T05:30:00+05:30") == 0
    assert parse_timestamp_ms("yesterday") is None
    assert parse_timestamp_ms(None) is None


def test_session_meta_and_lineage() -> None:
    m = parse_session_meta((FIXTURES / "rollout-tui.jsonl").read_bytes()[: 256 << 10])
    assert m is not None and (m.thread_id, m.parent_id, m.cli_version) == (THREAD, None, "0.171.0")
    child = parse_session_meta(meta(CHILD, THREAD))
    assert child is not None and child.parent_id == THREAD
    legacy = json.dumps({"type": "session_meta", "payload": {"id": "c", "parent_thread_id": "p"}})
    legacy_meta = parse_session_meta(legacy.encode() + b"\n")
    assert legacy_meta is not None and legacy_meta.parent_id == "p"
    assert parse_session_meta(meta(CHILD)[:-1]) is None  # first line incomplete
    assert parse_session_meta(record("task_started", "t")) is None
    assert root_of("c", {"c": "b", "b": "a", "a": None}) == "a"
    assert root_of("c", {"c": "b", "b": "c"}) == "b"  # cycle-safe
    assert root_of("x", {}) == "x"
    name = f"/s/2026/11/29/rollout-2026-11-29T23-37-30-{THREAD}.jsonl"
    assert thread_id_from_path(name) == THREAD
    assert thread_id_from_path("/s/rollout-x.jsonl") is None


# ----------------------------------------------------------------------------- RolloutTail


def test_discovery_emits_only_the_latest_boundary_then_every_new_one_in_order() -> None:
    f = MemFile(meta(THREAD) + record("task_started", "a") + record("task_complete", "a")
                + record("task_started", "b"))
    tail = RolloutTail()
    assert f.feed(tail) == [("task_started", "b")]
    assert f.feed(tail) == []  # nothing new
    f.data += record("turn_aborted", "b") + record("task_started", "c")
    f.data += record("task_complete", "c")
    assert f.feed(tail) == [("turn_aborted", "b"), ("task_started", "c"), ("task_complete", "c")]


def test_partial_last_line_is_read_once_complete() -> None:
    line = record("task_started", "a")
    f = MemFile(meta(THREAD) + line[:20])
    tail = RolloutTail()
    assert f.feed(tail) == []
    f.data += line[20:-1]
    assert f.feed(tail) == []
    f.data += b"\n"
    assert f.feed(tail) == [("task_started", "a")]


def test_backward_scan_ignores_the_first_partial_line_of_a_window() -> None:
    # A boundary whose line starts before the window floor must not be parsed from its tail.
    window = 4096
    fake = b'{"type":"event_msg","payload":{"type":"task_started","turn_id":"torn"}}\n'
    body = b'{"pad":"' + b"z" * (window - 20) + b'",' + fake[1:]
    tail = RolloutTail(window=window, overlap=256, max_windows=1)
    assert MemFile(body).feed(tail) == []
    # Across two windows the straddling line is seen whole thanks to the overlap.
    data = record("task_complete", "whole") + padding(window - 300) + b"\n"
    assert MemFile(data).feed(RolloutTail(window=window, overlap=1024, max_windows=2)) == [
        ("task_complete", "whole")
    ]


def test_200mb_rollout_last_boundary_16mb_back_reads_at_most_2mib(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    with path.open("wb") as out:
        out.write(meta(THREAD) + record("task_started", "old"))
        # 184 MiB of sparse "padding": a hole is zeros, then one newline, cheap to make.
        out.seek(184 * MiB - 1, os.SEEK_CUR)
        out.write(b"\n")
        out.write(record("task_started", "last"))
        out.write(padding(16 * MiB))
    size = path.stat().st_size
    assert size >= 200 * MiB
    tail = RolloutTail()
    with path.open("rb") as fh:
        fd = fh.fileno()
        found = tail.update(size, lambda off, n: os.pread(fd, n, off))
        # Beyond two windows the turn is honestly unknown: nothing is claimed.
        assert found == []
        assert tail.statistics().bytes_read <= 2 * MiB
        assert tail.offset == size
        with path.open("ab") as app:
            app.write(record("task_complete", "last"))
        found = tail.update(path.stat().st_size, lambda off, n: os.pread(fd, n, off))
    assert [(r.boundary, r.turn_id) for r in found] == [("task_complete", "last")]
    assert tail.statistics().bytes_read <= 2 * MiB + 200


def test_boundary_within_the_second_window_is_found() -> None:
    f = MemFile(meta(THREAD) + record("task_started", "x") + padding(int(1.5 * MiB)))
    tail = RolloutTail()
    assert f.feed(tail) == [("task_started", "x")]
    assert tail.statistics().bytes_read <= 2 * MiB


def test_six_mib_line_between_boundaries_is_followed_incrementally() -> None:
    f = MemFile(meta(THREAD) + record("task_started", "a"))
    tail = RolloutTail()
    assert f.feed(tail) == [("task_started", "a")]
    giant = b'{"type":"response_item","payload":"' + b"g" * (6 * MiB) + b'"}\n'
    for i in range(0, len(giant), 700_000):  # appended in pieces, as a writer would
        f.data += giant[i : i + 700_000]
        assert f.feed(tail) == []
    f.data += record("task_complete", "a")
    assert f.feed(tail) == [("task_complete", "a")]
    stats = tail.statistics()
    assert stats.giant_lines == 1 and stats.invalid_lines == 0


def test_truncation_and_replacement_reset_the_cursor() -> None:
    f = MemFile(meta(THREAD) + record("task_started", "a") + record("task_complete", "a"))
    tail = RolloutTail()
    assert f.feed(tail) == [("task_complete", "a")]
    f.data = bytearray(meta(THREAD) + record("task_started", "z"))  # shorter: truncated
    assert f.feed(tail) == [("task_started", "z")]
    assert tail.statistics().resets == 1
    # Another file identity at the same path (replaced): rediscovered, latest boundary only.
    found = tail.update(len(f.data), f.read, identity=(1, 1))
    assert [(r.boundary, r.turn_id) for r in found] == [("task_started", "z")]
    assert tail.update(len(f.data), f.read, identity=(1, 1)) == []  # same identity: no reset
    f.data += record("task_complete", "z")
    found = tail.update(len(f.data), f.read, identity=(1, 2))
    assert [(r.boundary, r.turn_id) for r in found] == [("task_complete", "z")]
    assert tail.statistics().resets == 3


def test_garbage_invalid_utf8_and_blank_lines_are_skipped_and_counted() -> None:
    f = MemFile(meta(THREAD))
    tail = RolloutTail()
    f.feed(tail)
    f.data += b"\x00\x01\xff\xfe binary\n" + b'{"type":"event_msg","payload":"\xff"}\n' + b"\n"
    f.data += b"{not json\n" + record("task_started", "ok")
    assert f.feed(tail) == [("task_started", "ok")]
    assert tail.statistics().invalid_lines == 3


def test_binary_garbage_without_newlines_never_grows_memory() -> None:
    f = MemFile(meta(THREAD))
    tail = RolloutTail(max_line=64 << 10)
    f.feed(tail)
    f.data += os.urandom(3 * MiB).replace(b"\n", b"\x00")
    assert f.feed(tail) == []
    assert len(tail._buf) == 0  # discarding, not buffering
    f.data += b"\n" + record("task_complete", "after")
    assert f.feed(tail) == [("task_complete", "after")]
    assert tail.statistics().giant_lines == 1


def test_real_tui_rollout_replayed_line_by_line_yields_its_exact_sequence() -> None:
    lines = (FIXTURES / "rollout-tui.jsonl").read_bytes().splitlines(keepends=True)
    expected = []
    for line in lines:
        rec = json.loads(line)
        if rec["type"] == "event_msg" and rec["payload"]["type"] in {
            "task_started", "task_complete", "turn_aborted"
        }:
            expected.append((rec["payload"]["type"], rec["payload"]["turn_id"]))
    assert len(expected) == 10 and ("turn_aborted", expected[7][1]) == expected[7]
    f = MemFile()
    tail = RolloutTail()
    assert f.feed(tail) == []  # discovered empty (the file exists before the first write)
    got: list[tuple[str, str | None]] = []
    for line in lines:
        f.data += line
        got += f.feed(tail)
    assert got == expected
    assert tail.statistics().invalid_lines == 0


# ----------------------------------------------------------------------------- ownership


A, B = RolloutOwner(100, "11"), RolloutOwner(200, "22")


def sample(
    holders: dict[str, tuple[RolloutOwner, ...]],
    uncertain: frozenset[RolloutOwner] = frozenset(),
) -> OwnershipSample:
    return OwnershipSample(holders, uncertain)


def test_reconcile_new_owner_then_two_misses_release() -> None:
    st, owned, released = reconcile_ownership(OwnershipState(), sample({"/r1": (A,)}))
    assert owned == [Owned("/r1", A)] and released == []
    st, owned, released = reconcile_ownership(st, sample({}))
    assert owned == [] and released == [] and st.owners == {"/r1": A} and st.misses == {"/r1": 1}
    st, owned, released = reconcile_ownership(st, sample({}))
    assert released == [Released("/r1", A)] and st.owners == {} and st.misses == {}


def test_reconcile_reappearance_clears_the_miss_count() -> None:
    st, _, _ = reconcile_ownership(OwnershipState(), sample({"/r": (A,)}))
    st, _, _ = reconcile_ownership(st, sample({}))
    st, owned, _ = reconcile_ownership(st, sample({"/r": (A,)}))
    assert owned == [] and st.misses == {}
    st, _, released = reconcile_ownership(st, sample({}))
    assert released == []


def test_reconcile_owner_change_and_stable_owner_among_several() -> None:
    st, _, _ = reconcile_ownership(OwnershipState(), sample({"/r": (B,)}))
    st, owned, _ = reconcile_ownership(st, sample({"/r": (A, B)}))
    assert owned == [] and st.owners["/r"] == B  # the current holder keeps it
    st, owned, _ = reconcile_ownership(st, sample({"/r": (A,)}))
    assert owned == [Owned("/r", A, B)]


def test_reconcile_unreadable_owner_is_never_a_miss() -> None:
    st, _, _ = reconcile_ownership(OwnershipState(), sample({"/r": (A,)}))
    for _ in range(5):
        st, owned, released = reconcile_ownership(st, sample({}, frozenset({A})))
        assert owned == [] and released == [] and st.owners == {"/r": A}
    st, _, released = reconcile_ownership(st, sample({}))
    assert released == []
    st, _, released = reconcile_ownership(st, sample({}))
    assert released == [Released("/r", A)]


def test_build_sample_filters_comm_root_and_suffix() -> None:
    root = "/h/sessions"
    table = [
        procfs.ProcessInfo(pid=1, ppid=0, comm="codex", start_token="5"),
        procfs.ProcessInfo(pid=2, ppid=1, comm="node", start_token="6"),
        procfs.ProcessInfo(pid=3, ppid=1, comm="codex-x", start_token="7"),
        procfs.ProcessInfo(pid=4, ppid=1, comm="codex", start_token="8"),
    ]
    fds = {
        1: [f"{root}/2026/rollout-a.jsonl", f"{root}/x.jsonl", "/other/rollout-b.jsonl",
            f"{root}/2026/rollout-c.jsonl (deleted)", f"{root}-evil/rollout-d.jsonl"],
        2: [f"{root}/2026/rollout-n.jsonl"],
        3: [f"{root}/2026/rollout-n.jsonl"],
        4: None,
    }
    s = build_sample(table, lambda pid: fds[pid], root)
    assert s.holders == {f"{root}/2026/rollout-a.jsonl": (RolloutOwner(1, "5"),)}
    assert s.uncertain == frozenset({RolloutOwner(4, "8")})


# ----------------------------------------------------------------------------- real processes


M = TypeVar("M")



async def wait_until(condition: Callable[[], bool]) -> None:
    """The condition is another task's side effect (tests.support.polling; callers bound it)."""
    await poll_until(condition, within=3600, interval=0.002)


FAKE_CODEX = FIXTURES / "fake_codex.py"


@pytest.fixture
def spawn() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)
        for stream in (p.stdin, p.stdout):
            if stream is not None:
                stream.close()


def hold(procs: list[subprocess.Popen[bytes]], comm: str, *files: Path
         ) -> subprocess.Popen[bytes]:
    p = subprocess.Popen(
        [sys.executable, str(FAKE_CODEX), comm, *map(str, files)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    procs.append(p)
    assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    return p


def make_rollout(home: Path, thread: str, body: bytes) -> Path:
    day = home / "sessions" / "2026" / "11" / "29"
    day.mkdir(parents=True, exist_ok=True)
    path = day / f"rollout-2026-11-29T23-37-30-{thread}.jsonl"
    path.write_bytes(body)
    return path


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


@pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="renaming via /proc/self/comm needs Linux")
async def test_renamed_codex_process_owns_rollout_boundaries_and_retires_on_second_miss(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    with anyio.fail_after(30):
        rollout = make_rollout(tmp_path, THREAD, meta(THREAD) + record("task_started", "t0"))
        decoy = make_rollout(tmp_path, CHILD, meta(CHILD) + record("task_started", "n"))
        owner = hold(spawn, "codex", rollout)
        hold(spawn, "notcodex", decoy)  # same fds, wrong comm: never an owner
        actor = CodexRolloutDiscovery(tmp_path, watch=False)
        sink = ListSink()
        await actor.sample_now(sink)
        key = SessionKey("codex", THREAD)
        token = procfs.start_token(owner.pid)
        assert token is not None
        assert [(type(m).__name__, getattr(m, "key", None)) for m in sink.items] == [
            ("RolloutOwned", key), ("LifecycleBoundary", key)
        ]
        owned = sink.items[0]
        assert isinstance(owned, RolloutOwned)
        assert (owned.pid, owned.start_token, owned.root_key, owned.version) == (
            owner.pid, token, None, "0.171.0"
        )
        first = sink.items[1]
        assert isinstance(first, LifecycleBoundary) and first.turn_id == "t0"
        sink.items.clear()
        append(rollout, record("task_complete", "t0") + record("task_started", "t1"))
        append(rollout, record("turn_aborted", "t1", "2026-11-29T23:40:00.000Z"))
        await actor.refresh_now(sink)
        got = [(m.boundary, m.turn_id) for m in sink.items if isinstance(m, LifecycleBoundary)]
        assert got == [("task_complete", "t0"), ("task_started", "t1"), ("turn_aborted", "t1")]
        last = sink.items[-1]
        assert isinstance(last, LifecycleBoundary) and last.at_ms == ms(2026, 11, 29, 23, 40, 0, 0)
        sink.items.clear()
        await actor.sample_now(sink)
        assert sink.items == []  # nothing changed: nothing sent
        owner.kill()
        owner.wait(timeout=10)
        await actor.sample_now(sink)
        assert sink.of(RolloutReleased) == []  # first miss: still owned
        assert actor.statistics().owned_rollouts == 1
        await actor.sample_now(sink)
        released = sink.of(RolloutReleased)
        assert len(released) == 1
        assert isinstance(released[0], RolloutReleased)
        assert (released[0].key, released[0].pid) == (key, owner.pid)
        assert actor.statistics().owned_rollouts == 0


@pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="needs Linux /proc")
async def test_child_thread_carries_root_key_and_owner_change_is_reported(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    with anyio.fail_after(30):
        parent = make_rollout(tmp_path, THREAD, meta(THREAD))
        child = make_rollout(tmp_path, CHILD, meta(CHILD, THREAD) + record("task_started", "c1"))
        daemon = hold(spawn, "codex", parent, child)  # one daemon holding both threads
        actor = CodexRolloutDiscovery(tmp_path, watch=False)
        sink = ListSink()
        await actor.sample_now(sink)
        by_key = {m.key.session_id: m for m in sink.of(RolloutOwned)}
        assert by_key[CHILD].root_key == SessionKey("codex", THREAD)
        assert by_key[THREAD].root_key is None
        boundary = sink.of(LifecycleBoundary)
        assert len(boundary) == 1 and boundary[0].root_key == SessionKey("codex", THREAD)
        # A second codex process picks the child up (resume) and the first lets go.
        sink.items.clear()
        newcomer = hold(spawn, "codex", child)
        daemon.kill()
        daemon.wait(timeout=10)
        await actor.sample_now(sink)
        owned = sink.of(RolloutOwned)
        assert len(owned) == 1 and owned[0].pid == newcomer.pid
        assert sink.of(RolloutReleased) == []  # parent: first miss only


@pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="needs Linux /proc")
async def test_vanished_file_and_bad_records_are_counted_never_fatal(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    with anyio.fail_after(30):
        rollout = make_rollout(tmp_path, THREAD, meta(THREAD))
        hold(spawn, "codex", rollout)
        actor = CodexRolloutDiscovery(tmp_path, watch=False)
        sink = ListSink()
        await actor.sample_now(sink)
        append(rollout, b"\xff\xfe\n" + record("task_started", "a", "1970-01-01T00:00:00Z"))
        append(rollout, record("task_started", "b", "not a time"))
        await actor.refresh_now(sink)
        stats = actor.statistics()
        assert stats.invalid_lines == 1 and stats.rejected == 1 and stats.bad_timestamps == 1
        assert [m.turn_id for m in sink.of(LifecycleBoundary)] == ["b"]
        rollout.unlink()  # the holder still has it open; the path is gone
        await actor.refresh_now(sink)
        assert actor.statistics().vanished_files == 1
        await actor.sample_now(sink)
        await actor.sample_now(sink)
        # The fd now points at "... (deleted)": no longer a rollout, released after two misses.
        assert len(sink.of(RolloutReleased)) == 1


async def test_unreadable_fd_table_never_marks_a_live_owner_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # FAKE, because we run as root: a permission-denied /proc/<pid>/fd cannot be produced
    # here, so the fd reader's answer is replaced (None = EACCES). The file is real.
    import actors.harnesses.codex.rollouts.reads as mod

    rollout = make_rollout(tmp_path, THREAD, meta(THREAD))
    me = procfs.ProcessInfo(pid=os.getpid(), ppid=1, comm="codex",
                            start_token=procfs.start_token(os.getpid()) or "0")
    readable = True

    def fds(pid: int) -> list[str] | None:
        return [str(rollout)] if readable else None

    monkeypatch.setattr(mod, "fd_targets", fds)
    with anyio.fail_after(10):
        actor = CodexRolloutDiscovery(tmp_path, watch=False, process_table=lambda: [me])
        sink = ListSink()
        await actor.sample_now(sink)
        assert len(sink.of(RolloutOwned)) == 1
        readable = False
        for _ in range(4):
            await actor.sample_now(sink)
        assert sink.of(RolloutReleased) == []
        assert actor.statistics().unreadable_processes == 4
        readable = True
        await actor.sample_now(sink)
        assert len(sink.of(RolloutOwned)) == 1  # same owner again: nothing new sent


async def test_failed_process_scan_proves_nothing(tmp_path: Path) -> None:
    def broken() -> list[procfs.ProcessInfo]:
        raise PermissionError("/proc")

    with anyio.fail_after(10):
        actor = CodexRolloutDiscovery(tmp_path, watch=False, process_table=broken)
        sink = ListSink()
        await actor.sample_now(sink)
        assert sink.items == [] and actor.statistics().sample_errors == 1


@pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="needs Linux /proc")
def test_codex_processes_finds_exactly_the_renamed_children(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    a = hold(spawn, "codex")
    b = hold(spawn, "codexy")
    found = {p.pid: p for p in codex_processes()}
    assert a.pid in found and b.pid not in found
    assert found[a.pid].start_token == procfs.start_token(a.pid)
    assert found[a.pid].ppid == os.getpid()


@pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="needs Linux /proc")
@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "poll"])
async def test_run_delivers_appended_boundaries_via_notifications_or_poll(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]], watch: bool
) -> None:
    rollout = make_rollout(tmp_path, THREAD, meta(THREAD))
    hold(spawn, "codex", rollout)
    # A long sample interval: only notifications (or the poll) can deliver in time.
    actor = CodexRolloutDiscovery(tmp_path, watch=watch, sample_interval=3600)
    sink = ListSink()
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(actor.run, sink)
            await wait_until(lambda: bool(sink.of(RolloutOwned)))
            if watch:
                # The inotify watch starts asynchronously: append harmless lines until a
                # notification-driven refresh proves it is live (bounded by fail_after).
                base = actor.statistics().refreshes
                while actor.statistics().refreshes == base:
                    append(rollout, b'{"type":"noop"}\n')
                    with anyio.move_on_after(0.05):
                        await wait_until(lambda: actor.statistics().refreshes != base)
            for i in range(5):
                append(rollout, record("task_started", f"w{i}") + record("task_complete", f"w{i}"))
                want = 2 * (i + 1)
                await wait_until(lambda: len(sink.of(LifecycleBoundary)) >= want)  # noqa: B023
            tg.cancel_scope.cancel()
    turns = [m.turn_id for m in sink.of(LifecycleBoundary)]
    assert turns == [f"w{i}" for i in range(5) for _ in (0, 1)]


@pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="needs Linux /proc")
async def test_notifications_decide_when_ownership_is_sampled(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    """With inotify, ownership is sampled when the tree says it may have changed: a rollout
    created by its owner, the owner closing it (its exit). An append to an owned rollout reads
    that rollout and samples nothing; with no safety sample in the test's time, only these
    notifications can deliver."""
    actor = CodexRolloutDiscovery(tmp_path, sample_interval=0.01, idle_sample_interval=3600)
    sink = ListSink()
    key = SessionKey("codex", THREAD)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(actor.run, sink)
            # The sessions root does not exist yet: it is waited for, then watched and sampled.
            await wait_until(lambda: actor.statistics().samples >= 1)
            day = tmp_path / "sessions" / "2026" / "11" / "29"
            day.mkdir(parents=True)
            rollout = day / f"rollout-2026-11-29T23-37-30-{THREAD}.jsonl"
            # Codex creates its rollout and keeps it open for appending.
            owner = hold(spawn, "codex", rollout)
            with rollout.open("ab", buffering=0) as writer:
                writer.write(meta(THREAD))
                await wait_until(lambda: bool(sink.of(RolloutOwned)))
                samples = actor.statistics().samples
                for i in range(3):
                    writer.write(record("task_started", f"t{i}") + record("task_complete", f"t{i}"))
                    want = 2 * (i + 1)
                    await wait_until(lambda: len(sink.of(LifecycleBoundary)) >= want)  # noqa: B023
                assert actor.statistics().samples == samples  # appends read, nothing sampled
            owner.kill()  # its exit closes the rollout: sampled, missed twice, released
            await wait_until(lambda: bool(sink.of(RolloutReleased)))
            tg.cancel_scope.cancel()
    [owned] = sink.of(RolloutOwned)
    assert (owned.key, owned.pid) == (key, owner.pid)
    assert [m.turn_id for m in sink.of(LifecycleBoundary)] == ["t0", "t0", "t1", "t1", "t2", "t2"]
    [released] = sink.of(RolloutReleased)
    assert (released.key, released.pid) == (key, owner.pid)
    assert actor.statistics().watch_errors == 0


def test_sink_rejections_are_message_errors() -> None:
    # The sink contract the actor relies on: invalid messages raise MessageError.
    with pytest.raises(MessageError):
        revalidate(LifecycleBoundary(key=SessionKey("codex", THREAD), boundary="task_started",
                                     at_ms=0, observed_at_ms=0))
