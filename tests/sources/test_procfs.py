"""Process identity from /proc, checked against real processes (and psutil as a witness)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from actors.core.procstat import parse_stat
from actors.sources import procfs

pytestmark = pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="Linux /proc layout")

RENAME_AND_WAIT = (
    "import sys\n"
    "with open('/proc/self/comm', 'w') as f: f.write(sys.argv[1])\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n"
)


@contextmanager
def child(*args: str, comm: str = "claude") -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", RENAME_AND_WAIT, comm, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def test_parse_stat_splits_after_the_last_paren() -> None:
    fields = " ".join(str(n) for n in range(3, 53))  # field n holds n
    stat = parse_stat(f"42 (we(i)rd ) name) {fields}".encode())
    assert stat is not None
    assert stat.comm == "we(i)rd ) name"
    assert (stat.state, stat.ppid, stat.start_token) == ("3", 4, "22")


@pytest.mark.parametrize(
    "text", ["", "42 no parens 1 2 3", "42 (x) S 1 2", "42 (x) S x " + "1 " * 30]
)
def test_parse_stat_rejects_other_shapes(text: str) -> None:
    assert parse_stat(text.encode()) is None


def test_start_token_is_stat_field_22_and_matches_psutil_create_time() -> None:
    token = procfs.start_token(os.getpid())
    assert token is not None and token.isdigit()
    with open("/proc/stat") as f:
        btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    created = btime + int(token) / os.sysconf("SC_CLK_TCK")
    assert abs(created - psutil.Process().create_time()) < 0.02


def test_renamed_child_is_seen_with_its_comm_ppid_and_token() -> None:
    with child("--permission-mode", "manual", "", comm="cl (a) ude") as proc:
        assert procfs.read_comm(proc.pid) == "cl (a) ude"
        assert procfs.read_ppid(proc.pid) == os.getpid()
        assert procfs.read_cmdline(proc.pid) == [
            sys.executable, "-c", RENAME_AND_WAIT, "cl (a) ude", "--permission-mode", "manual", "",
        ]  # fmt: skip
        token = procfs.start_token(proc.pid)
        assert token is not None
        assert procfs.probe(proc.pid) == token
        assert procfs.is_alive(proc.pid)
        [info] = [p for p in procfs.scan_processes() if p.pid == proc.pid]
        assert info == procfs.ProcessInfo(
            pid=proc.pid, ppid=os.getpid(), comm="cl (a) ude", start_token=token
        )
        assert proc.pid in procfs.children_map()[os.getpid()]
        assert proc.pid in procfs.list_pids()


def test_open_paths_lists_files_the_process_holds(tmp_path: Path) -> None:
    held = tmp_path / "rollout-x.jsonl"
    held.write_text("")
    with held.open() as f:
        assert str(held) in procfs.open_paths(os.getpid())
        assert f.fileno() >= 0
    assert str(held) not in procfs.open_paths(os.getpid())


def test_zombie_is_alive_by_kill_but_gone_by_probe() -> None:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        proc.kill()
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
        assert procfs.is_alive(proc.pid)  # kill(pid, 0) succeeds on a zombie
        stat = procfs.read_stat(proc.pid)
        assert stat is not None and stat.state == "Z"
        assert procfs.probe(proc.pid) is None
    finally:
        proc.wait()


def test_gone_pid_answers_none_everywhere() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    pid = proc.pid
    assert not procfs.is_alive(pid)
    assert procfs.start_token(pid) is None
    assert procfs.probe(pid) is None
    assert procfs.read_comm(pid) is None
    assert procfs.read_cmdline(pid) is None
    assert procfs.read_ppid(pid) is None
    assert procfs.read_stat(pid) is None
    assert procfs.open_paths(pid) == []
    assert pid not in procfs.list_pids()


@pytest.mark.parametrize("pid", [0, -1])
def test_non_process_ids_are_never_alive(pid: int) -> None:
    assert not procfs.is_alive(pid)
    assert procfs.start_token(pid) is None
    assert procfs.read_comm(pid) is None
    assert procfs.read_cmdline(pid) is None
    assert procfs.read_ppid(pid) is None
    assert procfs.open_paths(pid) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become user nobody")
def test_eperm_counts_as_alive() -> None:
    # As user nobody, pid 1 (root's) cannot be signalled: kill(1, 0) fails with EPERM.
    # A forked child drops privileges and reports through a pipe (only the child
    # changes user; it runs nothing but the probe and os._exit).
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setresuid(65534, 65534, 65534)
            try:
                os.kill(1, 0)
                witness = "no-eperm"
            except PermissionError:
                witness = "eperm"
            os.write(write_end, f"{procfs.is_alive(1)} {witness}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        answer = os.read(read_end, 100).decode()
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    assert answer == "True eperm"


def test_psutil_fallback_gives_stable_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    # The non-Linux code path, exercised here by turning /proc parsing off.
    with child(comm="claude") as proc:
        monkeypatch.setattr(procfs, "HAVE_PROCFS", False)
        token = procfs.start_token(proc.pid)
        assert token is not None and token == procfs.start_token(proc.pid)
        assert procfs.probe(proc.pid) == token
        assert procfs.read_comm(proc.pid) == "claude"
        assert procfs.read_ppid(proc.pid) == os.getpid()
        assert procfs.read_cmdline(proc.pid) is not None
        infos = {p.pid: p for p in procfs.scan_processes()}
        assert infos[proc.pid].comm == "claude" and infos[proc.pid].start_token == token
        assert proc.pid in procfs.list_pids()
        assert proc.pid in procfs.children_map()[os.getpid()]
