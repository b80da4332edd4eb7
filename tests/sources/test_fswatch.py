"""inotify on the event loop (actors.sources.fswatch): real directories, real writes."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import anyio

from actors.sources import fswatch
from actors.sources.fswatch import (
    APPEARS,
    CREATE,
    FsEvent,
    Inotify,
    wait_for_directory,
    watch_nearest,
)

MASK = (
    fswatch.CREATE
    | fswatch.MODIFY
    | fswatch.CLOSE_WRITE
    | fswatch.DELETE
    | fswatch.MOVED_FROM
    | fswatch.MOVED_TO
)


async def collect(notify: Inotify, until: int, names: set[str]) -> list[FsEvent]:
    """Events until one for a name in ``names`` carries a bit of ``until``."""
    seen: list[FsEvent] = []
    while True:
        batch = await notify.wait()
        seen.extend(batch)
        if any(e.mask & until and e.name in names for e in batch):
            return seen


def test_available_on_linux() -> None:
    assert fswatch.AVAILABLE  # this project's machines are Linux: the fallback is not the norm


async def test_write_rename_and_delete_are_reported_with_their_paths(tmp_path: Path) -> None:
    with anyio.fail_after(10), Inotify() as notify:
        assert notify.add(tmp_path, MASK)
        assert notify.watched == [str(tmp_path)]
        (tmp_path / "a.json").write_text("{}")
        events = await collect(notify, fswatch.CLOSE_WRITE, {"a.json"})
        assert next(e.mask & fswatch.CREATE for e in events if e.name == "a.json")
        assert all(e.path == str(tmp_path / e.name) for e in events)
        (tmp_path / ".tmp").write_text("{}")
        os.rename(tmp_path / ".tmp", tmp_path / "b.json")
        events = await collect(notify, fswatch.MOVED_TO, {"b.json"})
        assert any(e.mask & fswatch.MOVED_FROM and e.name == ".tmp" for e in events)
        (tmp_path / "a.json").unlink()
        events = await collect(notify, fswatch.DELETE, {"a.json"})
        (tmp_path / "sub").mkdir()
        events = await collect(notify, fswatch.CREATE, {"sub"})
        assert [e.is_dir for e in events if e.name == "sub"] == [True]


async def test_reads_are_not_changes(tmp_path: Path) -> None:
    """What a reader does (open, read, close) never wakes a watcher of writes: discovery's own
    reads of the files it watches must not feed back into it."""
    target = tmp_path / "rollout.jsonl"
    target.write_text("x\n")
    with anyio.fail_after(10), Inotify() as notify:
        notify.add(tmp_path, MASK)
        for _ in range(3):
            target.read_bytes()
        (tmp_path / "marker").write_text("")  # the first event that must come
        events = await collect(notify, fswatch.CLOSE_WRITE, {"marker"})
    assert {e.name for e in events} == {"marker"}


async def test_a_removed_directory_ends_its_watch(tmp_path: Path) -> None:
    watched = tmp_path / "sessions"
    watched.mkdir()
    with anyio.fail_after(10), Inotify() as notify:
        assert notify.add(watched, MASK)
        shutil.rmtree(watched)
        events: list[FsEvent] = []
        while not any(e.mask & fswatch.IGNORED for e in events):
            events.extend(await notify.wait())
        assert FsEvent(str(watched), fswatch.IGNORED) in events
        assert notify.watched == []
        assert not notify.add(watched, MASK)  # no directory: nothing to watch


async def test_wait_for_directory_follows_nested_creation(tmp_path: Path) -> None:
    target = tmp_path / "home" / ".claude" / "sessions"
    async with anyio.create_task_group() as tg:
        done = anyio.Event()

        async def waiter() -> None:
            await wait_for_directory(target)
            done.set()

        with anyio.fail_after(10):
            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            (tmp_path / "home").mkdir()
            await anyio.wait_all_tasks_blocked()
            assert not done.is_set()
            (tmp_path / "home" / ".claude").mkdir()
            (tmp_path / "home" / ".claude" / "sessions").write_text("a file, not a directory")
            await anyio.wait_all_tasks_blocked()
            assert not done.is_set()
            (tmp_path / "home" / ".claude" / "sessions").unlink()
            target.mkdir()
            await done.wait()


async def test_a_missing_directory_is_watched_through_its_nearest_existing_ancestor(
    tmp_path: Path,
) -> None:
    target = tmp_path / "codex-home" / "app-server-control"
    with Inotify() as notify, anyio.fail_after(10):
        assert watch_nearest(notify, target, CREATE) == tmp_path
        assert notify.watched == [str(tmp_path)]
        (tmp_path / "codex-home").mkdir()
        events = await notify.wait()  # the next component's creation: one event
        assert [(e.path, e.is_dir) for e in events] == [(str(tmp_path / "codex-home"), True)]
        assert watch_nearest(notify, target, CREATE) == tmp_path / "codex-home"
        target.mkdir()
        events = await notify.wait()
        assert events[0].path == str(target) and events[0].mask & APPEARS
        # once it exists, the directory itself is watched for what the caller asked
        assert watch_nearest(notify, target, CREATE) == target
        (target / "sock").touch()
        assert [e.path for e in await notify.wait()] == [str(target / "sock")]


async def test_wait_for_an_existing_directory_returns_at_once(tmp_path: Path) -> None:
    with anyio.fail_after(10):
        await wait_for_directory(tmp_path)


def test_only_directories_are_watched(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with Inotify() as notify:
        assert not notify.add(tmp_path / "file", MASK)
        assert not notify.add(tmp_path / "missing", MASK)
        assert notify.watched == []


def test_close_returns_before_the_kernel_releases_the_descriptor(tmp_path: Path) -> None:
    """The kernel releases an inotify descriptor only after an SRCU grace period (13-16 ms
    here), and sources close theirs on the event loop: ``close`` hands the descriptor to the
    closer thread and returns. The real descriptor's close is held back here, standing for
    that grace period, until the test lets it go."""
    notify = Inotify()
    assert notify.add(tmp_path, MASK)
    descriptor = notify._fd
    caller = threading.get_ident()
    release, released = threading.Event(), threading.Event()
    closed_by: list[int] = []
    real_close = descriptor.close

    def held_close() -> None:
        closed_by.append(threading.get_ident())
        if threading.get_ident() != caller:
            release.wait(10)
        real_close()
        released.set()

    descriptor.close = held_close
    notify.close()
    assert notify.watched == []
    assert not released.is_set()  # returned while the release is still held
    notify.close()  # closing again hands nothing over twice
    release.set()
    assert released.wait(10)
    assert descriptor.closed
    assert closed_by == [closed_by[0]] and closed_by[0] != caller
