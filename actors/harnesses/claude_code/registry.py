"""Claude Code registry discovery: ``<CLAUDE_CONFIG_DIR or ~/.claude>/sessions/<pid>.json``.

Every live Claude Code process (interactive and ``-p``) rewrites its
``sessions/<pid>.json`` on each status edge (tests/fixtures/claude_registry/).
This module turns those files into evidence:

- :func:`parse_record` (pure) validates one file's bytes (docs/design.md §5): malformed JSON,
  invalid UTF-8, a non-object, wrong field types or a ``pid`` that is not the file's
  name are rejected with a :class:`RecordError` naming the reason; ``parkedJobId``
  marks a record whose session was parked into a background job (that job writes
  its own record). The first write has no ``status`` (``status=None``, turn unknown).
- :class:`RegistryTracker` (pure) compares what the directory holds now (parsed
  records plus a liveness probe of each pid) with what it last emitted, and says
  which messages to send: ``RegistryStatus`` for a record whose pid is alive with a
  matching ``procStart`` (only when it changed), ``RegistryRemoved(pid_alive=...)``
  when the file is deleted or its owner is found dead or replaced, and
  ``RegistryRemoved(rotated=True, pid_alive=True)`` for the old key when the same
  process switches ``sessionId`` in place (``/clear``, ``/resume``), followed by
  ``RegistryStatus`` for the new key.
- :class:`ClaudeRegistryWatcher` (the actor) re-reads, in a worker thread, the files an
  inotify notification names (:mod:`actors.sources.fswatch`: on the event loop, no thread
  and no timer while nothing changes), and rescans every file every ``liveness_interval``
  seconds, 60 by default (a SIGKILLed Claude leaves its file behind and no file event says
  so; its session already ended within milliseconds through the pid watcher's pidfd, so this
  rescan only tidies the registry's own view), or, in ``mode="poll"``, on a stat-only poll
  every ``poll_interval`` seconds (the fallback where notifications are unavailable).

``at_ms`` of a ``RegistryStatus`` is ``statusUpdatedAt``, falling back to
``updatedAt``, ``startedAt`` and the file's mtime. A record counts only while its pid runs
as this user and its comm starts with ``claude`` (Claude Code's process name, ``claude`` or
``claude.exe``): a file naming any other live process -- pid 1, another user's -- with its real
start time proves nothing (counted as ``not_ours`` / ``not_claude``). Records of Claude 2.1.112
carry no ``procStart``: the pid's current start token stands in.

Files are opened ``O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC`` and checked with ``fstat``
(:func:`actors.sources.files.open_evidence`): a FIFO, link or device put in a record's place
is skipped and counted (``not_regular``), never read (a FIFO would block the scan forever).

Messages are sent to the sink (the supervisor), which routes them by ``key`` to the
session actor; ``pid_alive`` is the owner's liveness when the removal was seen.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec

import messages
from actors.core.clock import now_ms
from actors.harnesses.claude_code import paths
from actors.runtime.mailbox import EvidenceSink
from actors.sources import fswatch, procfs
from actors.sources.files import NotRegularFile, open_evidence
from messages.common import MAX_ID_LEN, MAX_TEXT_LEN

__all__ = [
    "ClaudeRegistryWatcher",
    "EvidenceSink",
    "FileObservation",
    "RecordError",
    "RegistryRecord",
    "RegistryStatistics",
    "RegistryTracker",
    "parse_record",
    "registry_dir",
    "scan_directory",
]

MAX_FILE_BYTES = 256 * 1024  # real records are ~700 bytes; anything huge is not Claude's
_MIN_MS = 946_684_800_000
_MAX_MS = 4_102_444_800_000
_MAX_WORD = 64

RejectReason = Literal[
    "too_large",
    "invalid_utf8",
    "malformed_json",
    "not_object",
    "bad_field",
    "pid_mismatch",
]


def registry_dir() -> Path:
    """``<CLAUDE_CONFIG_DIR or ~/.claude>/sessions`` (read from the environment now)."""
    return paths.sessions_dir()


# ---------------------------------------------------------------- parsing (pure)


class RecordError(ValueError):
    """A registry file that is not a usable record; ``reason`` is a stable word."""

    def __init__(self, reason: RejectReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: RejectReason = reason


class RegistryRecord(msgspec.Struct, frozen=True):
    """The fields of one ``sessions/<pid>.json`` that paneward uses."""

    pid: int
    session_id: str
    proc_start: str | None
    status: str | None
    waiting_for: str | None
    version: str | None
    at_ms: int
    parked: bool


def _opt_str(obj: Mapping[str, Any], name: str, max_len: int) -> str | None:
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RecordError("bad_field", f"{name} is {type(value).__name__}, not a string")
    if len(value) > max_len:
        raise RecordError("bad_field", f"{name} is longer than {max_len} characters")
    return value


def _opt_ms(obj: Mapping[str, Any], name: str) -> int | None:
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError("bad_field", f"{name} is {type(value).__name__}, not integer ms")
    if not _MIN_MS <= value <= _MAX_MS:
        raise RecordError("bad_field", f"{name}={value} is not an epoch-ms time")
    return value


def parse_record(data: bytes, file_pid: int, mtime_ms: int) -> RegistryRecord:
    """Validate the bytes of ``sessions/<file_pid>.json``.

    Pure. ``mtime_ms`` is the file's mtime, the last fallback for ``at_ms``.

    :raises RecordError: with ``reason`` one of ``too_large``, ``invalid_utf8``,
        ``malformed_json``, ``not_object``, ``bad_field``, ``pid_mismatch``.
    """
    if len(data) > MAX_FILE_BYTES:
        raise RecordError("too_large", f"{len(data)} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError("invalid_utf8", str(exc)) from None
    try:
        obj = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise RecordError("malformed_json", str(exc)) from None
    if not isinstance(obj, dict):
        raise RecordError("not_object", f"top level is {type(obj).__name__}")
    pid = obj.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 1 <= pid <= 2**31 - 1:
        raise RecordError("bad_field", f"pid is {pid!r}")
    if pid != file_pid:
        raise RecordError("pid_mismatch", f"pid {pid} in {file_pid}.json")
    session_id = obj.get("sessionId")
    if not isinstance(session_id, str) or not 1 <= len(session_id) <= MAX_ID_LEN:
        raise RecordError("bad_field", f"sessionId is {session_id!r:.80}")
    proc_start = obj.get("procStart")
    if isinstance(proc_start, int) and not isinstance(proc_start, bool):
        proc_start = str(proc_start)
    elif proc_start is not None and not isinstance(proc_start, str):
        raise RecordError("bad_field", f"procStart is {type(proc_start).__name__}")
    status = _opt_str(obj, "status", _MAX_WORD)
    waiting_for = _opt_str(obj, "waitingFor", MAX_TEXT_LEN)
    version = _opt_str(obj, "version", _MAX_WORD)
    at_ms = None
    for name in ("statusUpdatedAt", "updatedAt", "startedAt"):
        at_ms = _opt_ms(obj, name)
        if at_ms is not None:
            break
    if at_ms is None:
        at_ms = min(max(mtime_ms, _MIN_MS), _MAX_MS)
    return RegistryRecord(
        pid=pid,
        session_id=session_id,
        proc_start=proc_start,
        status=status,
        waiting_for=waiting_for,
        version=version,
        at_ms=at_ms,
        parked=obj.get("parkedJobId") is not None,
    )


# ---------------------------------------------------------------- tracking (pure)


class FileObservation(msgspec.Struct, frozen=True):
    """What one scan saw for ``sessions/<pid>.json``.

    ``identity`` changes whenever the file does (inode, size, mtime); ``parsed`` is
    the record or why it was rejected; ``token`` is the pid's current start token
    (``None``: gone or a zombie); ``comm`` its process name and ``uid`` the user it runs as
    (``None``: unknown).
    """

    identity: tuple[int, int, int]
    parsed: RegistryRecord | RecordError
    token: str | None
    comm: str | None = None
    uid: int | None = None


class _Emitted(msgspec.Struct, frozen=True):
    key: messages.SessionKey
    pid: int
    token: str
    status: str | None
    waiting_for: str | None
    version: str | None
    at_ms: int


class RegistryStatistics(msgspec.Struct, kw_only=True):
    """Counters of the registry watcher (monotonic; rejections counted once per file version).

    One record the watcher keeps and ``statistics()`` copies (``tracked``, a size, filled in
    then). Its :class:`RegistryTracker` counts ``rotations`` and the rejections (a field per
    reason, :data:`_REJECT_COUNTERS`) in it, and :func:`scan_directory` counts ``files_read``,
    ``vanished``, ``unreadable`` and ``not_regular`` (a FIFO, link or device in a record's
    place: never opened for reading).
    """

    scans: int = 0
    files_read: int = 0
    tracked: int = 0
    status_sent: int = 0
    removed_sent: int = 0
    rotations: int = 0
    too_large: int = 0
    invalid_utf8: int = 0
    malformed_json: int = 0
    not_object: int = 0
    bad_field: int = 0
    pid_mismatch: int = 0
    parked: int = 0
    dead_pid: int = 0
    proc_start_mismatch: int = 0
    not_ours: int = 0
    not_claude: int = 0
    vanished: int = 0
    unreadable: int = 0
    not_regular: int = 0
    sink_rejected: int = 0
    watch_failures: int = 0


#: The reasons a file's record is not emitted, each a counter of :class:`RegistryStatistics`.
_REJECT_COUNTERS = (
    "too_large",
    "invalid_utf8",
    "malformed_json",
    "not_object",
    "bad_field",
    "pid_mismatch",
    "parked",
    "dead_pid",
    "proc_start_mismatch",
    "not_ours",
    "not_claude",
)


class RegistryTracker:
    """Pure diff of registry scans into evidence messages (no I/O, no clock).

    Fed by :class:`ClaudeRegistryWatcher` with each scan's observations; counts into
    ``stats`` (the watcher's record, or one of its own).
    """

    def __init__(self, stats: RegistryStatistics | None = None, *, uid: int | None = None) -> None:
        #: The user whose processes may own records (default: ours).
        self.uid = os.getuid() if uid is None else uid
        self._emitted: dict[int, _Emitted] = {}
        # file pid -> identity whose rejection was already counted (count once per version)
        self._counted: dict[int, tuple[tuple[int, int, int], str]] = {}
        self.stats = RegistryStatistics() if stats is None else stats

    @property
    def counts(self) -> dict[str, int]:
        """Rejections by reason so far (a copy)."""
        return {reason: getattr(self.stats, reason) for reason in _REJECT_COUNTERS}

    @property
    def rotations(self) -> int:
        """In-place ``sessionId`` switches seen (``/clear``, ``/resume``)."""
        return self.stats.rotations

    @property
    def emitted(self) -> Collection[int]:
        """File pids with an emitted record (a live view, not a copy)."""
        return self._emitted.keys()

    @property
    def emitted_pids(self) -> list[int]:
        """File pids with an emitted record: a scan must probe these even if the file is gone."""
        return sorted(self._emitted)

    def _reject(self, file_pid: int, obs: FileObservation, reason: str) -> None:
        if self._counted.get(file_pid) != (obs.identity, reason):
            self._counted[file_pid] = (obs.identity, reason)
            setattr(self.stats, reason, getattr(self.stats, reason) + 1)

    def apply(
        self,
        files: Mapping[int, FileObservation],
        gone_tokens: Mapping[int, str | None],
        now_ms: int,
        *,
        only: Iterable[int] | None = None,
    ) -> list[messages.RegistryStatus | messages.RegistryRemoved]:
        """Messages for one scan.

        ``files`` is every ``<pid>.json`` present, or with ``only`` (the file pids a
        notification named) those of them present: a pid of ``only`` missing from ``files``
        was deleted, and the other files are not looked at (a change costs work for the file
        that changed). ``gone_tokens`` is the probed token of each emitted pid whose file is
        no longer present.
        """
        out: list[messages.RegistryStatus | messages.RegistryRemoved] = []
        for file_pid in sorted(files):
            out.extend(self._apply_file(file_pid, files[file_pid], now_ms))
        scope = set(self._emitted) if only is None else {p for p in only if p in self._emitted}
        for file_pid in sorted(scope - files.keys()):
            prev = self._emitted.pop(file_pid)
            self._counted.pop(file_pid, None)
            alive = gone_tokens.get(file_pid) == prev.token
            out.append(self._removed(prev, now_ms, pid_alive=alive, rotated=False))
        counted = set(self._counted) if only is None else {p for p in only if p in self._counted}
        for file_pid in counted - files.keys():
            del self._counted[file_pid]
        return out

    def _apply_file(
        self, file_pid: int, obs: FileObservation, now_ms: int
    ) -> list[messages.RegistryStatus | messages.RegistryRemoved]:
        prev = self._emitted.get(file_pid)
        record = obs.parsed
        if isinstance(record, RecordError):
            self._reject(file_pid, obs, record.reason)
            # A torn or garbled rewrite says nothing about the session; its owner's
            # death still does.
            if prev is not None and obs.token != prev.token:
                del self._emitted[file_pid]
                return [self._removed(prev, now_ms, pid_alive=False, rotated=False)]
            return []
        if record.parked:
            self._reject(file_pid, obs, "parked")
            if prev is None:
                return []
            # The window handed the session to a background job: this pid no longer
            # owns that key (like a rotation), whether or not it lives on.
            del self._emitted[file_pid]
            alive = obs.token == prev.token
            return [self._removed(prev, now_ms, pid_alive=alive, rotated=alive)]
        token = obs.token
        if token is None:
            live = False
            self._reject(file_pid, obs, "dead_pid")
        elif obs.uid != self.uid:
            # Any live pid with its real start time would pass the checks below (pid 1,
            # another user's shell): only our own user's processes can be our Claude.
            live = False
            self._reject(file_pid, obs, "not_ours")
        elif not (obs.comm or "").startswith("claude"):
            live = False
            self._reject(file_pid, obs, "not_claude")
        elif record.proc_start is None:
            # Claude 2.1.112 wrote no procStart: the process name is the guard (above).
            live = True
        else:
            live = record.proc_start == token
            if not live:
                self._reject(file_pid, obs, "proc_start_mismatch")
        if not live or token is None:
            if prev is None:
                return []
            del self._emitted[file_pid]
            return [self._removed(prev, now_ms, pid_alive=token == prev.token, rotated=False)]
        self._counted.pop(file_pid, None)
        new = _Emitted(
            key=messages.SessionKey("claude-code", record.session_id),
            pid=record.pid,
            token=token,
            status=record.status,
            waiting_for=record.waiting_for,
            version=record.version,
            at_ms=record.at_ms,
        )
        if new == prev:
            return []
        out: list[messages.RegistryStatus | messages.RegistryRemoved] = []
        if prev is not None and prev.key != new.key:
            if prev.token == new.token:
                # /clear or /resume: same process, new sessionId in the same file.
                self.stats.rotations += 1
                out.append(self._removed(prev, now_ms, pid_alive=True, rotated=True))
            else:
                out.append(self._removed(prev, now_ms, pid_alive=False, rotated=False))
        elif prev is not None and prev.token != new.token:
            # Same session id, new incarnation under the same pid: the old one died.
            out.append(self._removed(prev, now_ms, pid_alive=False, rotated=False))
        self._emitted[file_pid] = new
        out.append(
            messages.RegistryStatus(
                key=new.key,
                pid=new.pid,
                start_token=new.token,
                status=new.status,
                at_ms=new.at_ms,
                observed_at_ms=now_ms,
                waiting_for=new.waiting_for,
                version=new.version,
            )
        )
        return out

    @staticmethod
    def _removed(
        prev: _Emitted, now_ms: int, *, pid_alive: bool, rotated: bool
    ) -> messages.RegistryRemoved:
        return messages.RegistryRemoved(
            key=prev.key,
            pid=prev.pid,
            at_ms=now_ms,
            observed_at_ms=now_ms,
            pid_alive=pid_alive,
            rotated=rotated,
        )


# ---------------------------------------------------------------- scanning (blocking)


class _Cached(msgspec.Struct, frozen=True):
    identity: tuple[int, int, int]
    parsed: RegistryRecord | RecordError


def _file_pid(name: str) -> int | None:
    stem, dot, ext = name.partition(".")
    if dot != "." or ext != "json" or not stem.isdigit() or stem.startswith("0"):
        return None
    pid = int(stem)
    return pid if pid <= 2**31 - 1 else None


def scan_directory(
    directory: Path,
    cache: dict[int, _Cached],
    force: Iterable[str],
    extra_pids: Collection[int],
    counters: RegistryStatistics,
    only: Iterable[str] | None = None,
    owners: dict[int, tuple[str, int | None, str | None]] | None = None,
) -> tuple[dict[int, FileObservation], dict[int, str | None]]:
    """Blocking (worker thread): stat every ``<pid>.json`` (or only the names in ``only``),
    re-read changed or ``force``d ones, probe their pids (and, once per incarnation, its uid
    and comm: ``owners``, a cache updated in place). Updates ``cache`` in place, and
    ``files_read`` / ``vanished`` / ``unreadable`` / ``not_regular`` in ``counters``.

    Returns the observations and the probed tokens of ``extra_pids`` whose files are
    gone (with ``only``: of those among the names looked at). A file that vanishes between
    listing and reading is omitted (as deleted).
    """
    forced = set(force)
    owners = {} if owners is None else owners
    files: dict[int, FileObservation] = {}
    if only is None:
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            names = []
    else:
        names = sorted(set(only))
    for name in names:
        file_pid = _file_pid(name)
        if file_pid is None:
            continue
        path = directory / name
        try:
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                counters.not_regular += 1
                cache.pop(file_pid, None)
                continue
            identity = (st.st_ino, st.st_size, st.st_mtime_ns)
            cached = cache.get(file_pid)
            if cached is None or cached.identity != identity or name in forced:
                # Never blocks, never follows: the name may have been swapped since lstat.
                fd, st = open_evidence(path)
                try:
                    data = _read_fd(fd, MAX_FILE_BYTES + 1)
                finally:
                    os.close(fd)
                identity = (st.st_ino, st.st_size, st.st_mtime_ns)
                counters.files_read += 1
                try:
                    parsed: RegistryRecord | RecordError = parse_record(
                        data, file_pid, st.st_mtime_ns // 1_000_000
                    )
                except RecordError as exc:
                    parsed = exc
                cached = _Cached(identity=identity, parsed=parsed)
                cache[file_pid] = cached
        except NotRegularFile:
            counters.not_regular += 1
            cache.pop(file_pid, None)
            continue
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ESTALE):
                if only is None:  # listed, then gone (with ``only``: a deletion, not a race)
                    counters.vanished += 1
            else:
                counters.unreadable += 1
            cache.pop(file_pid, None)
            continue
        token = procfs.probe(file_pid)
        comm = uid = None
        if token is not None and isinstance(cached.parsed, RegistryRecord):
            owner = owners.get(file_pid)
            if owner is None or owner[0] != token:
                # Read once per process incarnation (pid + start token), not per scan.
                owner = (token, procfs.read_uid(file_pid), procfs.read_comm(file_pid))
                owners[file_pid] = owner
            _, uid, comm = owner
        files[file_pid] = FileObservation(
            identity=cached.identity, parsed=cached.parsed, token=token, comm=comm, uid=uid
        )
    if only is None:
        looked = set(cache) | set(owners)
        wanted = set(extra_pids)
    else:
        looked = {pid for pid in map(_file_pid, names) if pid is not None}
        wanted = {pid for pid in looked if pid in extra_pids}
    for file_pid in looked - set(files):
        cache.pop(file_pid, None)
        owners.pop(file_pid, None)
    gone = {pid: procfs.probe(pid) for pid in wanted if pid not in files}
    return files, gone


def _read_fd(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


# ---------------------------------------------------------------- the actor

#: What a registry change looks like to inotify: a record renamed into place or closed after
#: writing, a record deleted or renamed away.
_WATCH_MASK = fswatch.CLOSE_WRITE | fswatch.MOVED_TO | fswatch.DELETE | fswatch.MOVED_FROM


class ClaudeRegistryWatcher:
    """Actor: watches Claude Code's ``sessions/`` and sends registry evidence to the sink.

    ``mode="watch"`` (default, Linux): inotify on the event loop (:mod:`actors.sources.fswatch`);
    each notification re-reads only the files it names, and a rescan of every file runs every
    ``liveness_interval`` s (60 by default: a SIGKILLed Claude leaves its file behind and no
    file event says so; its session ended within milliseconds through the pid watcher's pidfd,
    so this rescan only tidies the registry's own view). While ``sessions/`` does not exist,
    inotify on its nearest existing ancestor says when it appears. ``mode="poll"`` (and
    wherever inotify is unavailable): a stat-only poll every ``poll_interval`` s. If
    notifications fail at runtime the watcher falls back to polling (counted in
    ``watch_failures``).
    """

    def __init__(
        self,
        directory: Path | None = None,
        *,
        mode: Literal["watch", "poll"] = "watch",
        poll_interval: float = 0.25,
        liveness_interval: float = 60.0,
    ) -> None:
        if poll_interval <= 0 or liveness_interval <= 0:
            raise ValueError("poll_interval and liveness_interval must be positive")
        if mode not in ("watch", "poll"):
            raise ValueError(f"mode must be 'watch' or 'poll', got {mode!r}")
        self._dir = registry_dir() if directory is None else directory
        self._mode = mode
        self._poll_interval = poll_interval
        self._liveness_interval = liveness_interval
        self._stats = RegistryStatistics()
        self._tracker = RegistryTracker(self._stats)
        self._cache: dict[int, _Cached] = {}
        self._owners: dict[int, tuple[str, int | None, str | None]] = {}
        self._scan_done: anyio.Event | None = None

    @property
    def directory(self) -> Path:
        return self._dir

    def statistics(self) -> RegistryStatistics:
        """A point-in-time copy of the counters (see :class:`RegistryStatistics`)."""
        return msgspec.structs.replace(self._stats, tracked=len(self._tracker.emitted_pids))

    async def wait_scans(self, count: int) -> None:
        """Wait until at least ``count`` scans have completed (tests, benchmarks)."""
        while self._stats.scans < count:
            if self._scan_done is None:
                self._scan_done = anyio.Event()
            await self._scan_done.wait()

    async def run(self, sink: EvidenceSink) -> None:
        """Scan now, then on every change until cancelled."""
        if self._mode == "poll" or not fswatch.AVAILABLE:
            await self._poll(sink)
            return
        try:
            while True:
                if not await anyio.to_thread.run_sync(self._dir.is_dir):
                    await self.scan(sink)  # what was emitted from a vanished directory ends
                    # Claude has not created sessions/ yet: inotify says when it does.
                    await fswatch.wait_for_directory(self._dir)
                await self._watch(sink)
        except OSError:
            # Notifications do not work here (inotify limits, unsupported fs).
            self._stats.watch_failures += 1
            await self._poll(sink)

    async def _poll(self, sink: EvidenceSink) -> None:
        while True:
            await self.scan(sink)
            await anyio.sleep(self._poll_interval)

    async def _watch(self, sink: EvidenceSink) -> None:
        """Follow the directory until it goes away (returns) or inotify fails (raises)."""
        with fswatch.Inotify() as notify:
            # Watch first, then scan: a change made in between is both scanned and notified.
            if not await anyio.to_thread.run_sync(notify.add, self._dir, _WATCH_MASK):
                return  # gone again
            await self.scan(sink)
            while True:
                events: list[fswatch.FsEvent] | None = None
                with anyio.move_on_after(self._liveness_interval):
                    events = await notify.wait()
                if events is None or any(e.mask & fswatch.Q_OVERFLOW for e in events):
                    await self.scan(sink)  # the liveness rescan, or notifications were lost
                    continue
                names = {e.name for e in events if _file_pid(e.name) is not None}
                if names:
                    await self.scan(sink, force=names, only=names)
                if any(e.mask & fswatch.IGNORED for e in events):
                    return  # the directory itself was removed or moved away

    async def scan(
        self,
        sink: EvidenceSink,
        force: Iterable[str] = (),
        *,
        only: Iterable[str] | None = None,
    ) -> None:
        """One scan (of every file, or of the names in ``only``) and the messages it implies,
        decided in the same worker-thread hop.

        The tracker is touched only here, and scans never overlap (this actor awaits
        each one), so deciding off the loop is safe; a scan then costs the loop one
        wake-up and the sends it implies, nothing per file.
        """
        forced = tuple(force)
        names = None if only is None else tuple(only)

        def scan_and_decide() -> list[messages.RegistryStatus | messages.RegistryRemoved]:
            files, gone = scan_directory(
                self._dir, self._cache, forced, self._tracker.emitted, self._stats, names,
                self._owners,
            )
            pids = None if names is None else [p for p in map(_file_pid, names) if p]
            return self._tracker.apply(files, gone, now_ms(), only=pids)

        decided = await anyio.to_thread.run_sync(scan_and_decide)
        for message in decided:
            try:
                sink.inject_nowait(message)
            except messages.MessageError:
                self._stats.sink_rejected += 1
                continue
            if isinstance(message, messages.RegistryStatus):
                self._stats.status_sent += 1
            else:
                self._stats.removed_sent += 1
        self._stats.scans += 1
        if self._scan_done is not None:
            self._scan_done.set()
            self._scan_done = None
