"""Codex rollout discovery: who owns which thread, and the lifecycle records they append.

Facts this rests on (real rollouts in tests/fixtures/codex/):

- A Codex thread's rollout is ``<CODEX_HOME or ~/.codex>/sessions/YYYY/MM/DD/
  rollout-<YYYY-MM-DDTHH-MM-SS>-<thread-id>.jsonl``. The process that runs the
  thread keeps it open (``O_APPEND``) while the thread is loaded: ``codex exec``,
  the in-process TUI, or the shared ``app-server`` daemon that outlives the TUI and
  finishes turns in the background. All of them have comm exactly ``codex`` (the
  npm wrapper is ``node``). Ownership is therefore "comm ``codex`` + open fd",
  whoever holds it; the daemon is a first-class owner.
- Each line is ``{"timestamp","ordinal","type","payload"}``; the first is
  ``session_meta`` (``payload.id`` is the thread id; a child thread names its
  parent in ``payload.source.subagent.thread_spawn.parent_thread_id`` or
  ``payload.parent_thread_id``). Turn boundaries are ``event_msg`` records whose
  ``payload.type`` is ``task_started``, ``task_complete`` or ``turn_aborted``.
  Nothing here says a call waits for approval (the daemon's status does; the call it waits
  on is read from the tail by :mod:`actors.harnesses.codex.approvals`).

Functional core (no I/O, tested without an event loop):

- :class:`RolloutTail` — per-file cursor. First sight: a bounded backwards scan
  (1 MiB windows, 64 KiB overlap, at most ``max_windows`` windows, the first
  partial line of every window that does not start at offset 0 ignored) that
  yields only the LATEST boundary. Afterwards: incremental forward reads of the
  new bytes yielding EVERY boundary in order; lines longer than ``max_line`` are
  skipped (counted) without being buffered; truncation or replacement resets it.
- :func:`build_sample` + :func:`reconcile_ownership` — which process holds which
  rollout, and the two-consecutive-misses rule (a rollout missing from one sample
  stays owned; the second consecutive miss releases it; a process whose fd table
  could not be read is never counted as a miss).

Imperative shell: :class:`CodexRolloutDiscovery` follows the sessions tree through inotify
(:mod:`actors.sources.fswatch`; or a stat poll, selectable): an append to an owned rollout
reads that rollout, and ownership is sampled, at most once a second, when the tree says it may
have changed (plus a rare safety sample); every blocking read in ``anyio.to_thread``.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.to_thread
import msgspec
import psutil

from actors.core.clock import now_ms
from actors.harnesses.codex import paths
from actors.runtime.files import open_evidence
from actors.runtime.mailbox import EvidenceSink
from actors.sources import fswatch, procfs
from messages.codec import Inbound
from messages.common import SessionKey
from messages.errors import MessageError
from messages.evidence import Boundary, LifecycleBoundary, RolloutOwned, RolloutReleased

__all__ = [
    "DISCOVERY_MAX_WINDOWS",
    "HEADER_LIMIT_BYTES",
    "MAX_LINE_BYTES",
    "MISS_CONFIRMATIONS",
    "OVERLAP_BYTES",
    "SAMPLE_INTERVAL_S",
    "WINDOW_BYTES",
    "BoundaryRecord",
    "CodexDiscoveryStatistics",
    "CodexRolloutDiscovery",
    "EvidenceSink",
    "Owned",
    "Owner",
    "OwnershipSample",
    "OwnershipState",
    "Released",
    "RolloutMeta",
    "RolloutTail",
    "TailStatistics",
    "build_sample",
    "codex_processes",
    "is_rollout_path",
    "parse_boundary_line",
    "parse_session_meta",
    "parse_timestamp_ms",
    "reconcile_ownership",
    "root_of",
    "thread_id_from_path",
]

WINDOW_BYTES: Final = 1 << 20  # one backwards-scan window (seed: LIFECYCLE_SCAN_BYTES)
OVERLAP_BYTES: Final = 64 << 10  # windows overlap so a boundary line is never split
# First sight reads at most this many windows (2 MiB): never proportional to file size.
# A boundary further back than that is not found, and the turn honestly stays unknown.
DISCOVERY_MAX_WINDOWS: Final = 2
HEADER_LIMIT_BYTES: Final = 256 << 10  # session_meta must fit in the first 256 KiB
# Lines longer than this are skipped unbuffered. Boundary records are < 1 KiB except
# task_complete, whose last_agent_message is the final answer (rarely > 100 KiB).
MAX_LINE_BYTES: Final = 1 << 20
MISS_CONFIRMATIONS: Final = 2
SAMPLE_INTERVAL_S: Final = 1.0
# With notifications, ownership is sampled when the tree says it may have changed, and once
# in this long besides (what leaves no trace in the tree; lost notifications).
IDLE_SAMPLE_INTERVAL_S: Final = 30.0
POLL_INTERVAL_S: Final = 0.02

BOUNDARIES: Final[frozenset[str]] = frozenset({"task_started", "task_complete", "turn_aborted"})
# Candidate finder for the backwards scan; every hit is confirmed by parsing its whole line.
_BOUNDARY_RE: Final = re.compile(rb'"type"\s*:\s*"(?:task_started|task_complete|turn_aborted)"')
_THREAD_RE: Final = re.compile(
    r"rollout-.*-([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
    r"\.jsonl\Z"
)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MS: Final = timedelta(milliseconds=1)

ReadFn = Callable[[int, int], bytes]
"""``read(offset, length) -> bytes``; may return fewer bytes at end of file."""


# --------------------------------------------------------------------------- pure parsing


class _Envelope(msgspec.Struct):
    type: str
    timestamp: str | None = None
    payload: msgspec.Raw = msgspec.Raw(b"null")


class _EventPayload(msgspec.Struct):
    type: str
    turn_id: str | None = None


_ENVELOPE: Final = msgspec.json.Decoder(_Envelope)
_EVENT_PAYLOAD: Final = msgspec.json.Decoder(_EventPayload)
_ANY: Final = msgspec.json.Decoder()


class BoundaryRecord(msgspec.Struct, frozen=True):
    """One lifecycle boundary read from a rollout (``at_ms`` None: no usable timestamp)."""

    boundary: Boundary
    at_ms: int | None
    turn_id: str | None


class _Invalid(Exception):
    """A line that is not a JSON rollout record (garbage, bad UTF-8, wrong shape)."""


def parse_timestamp_ms(text: str | None) -> int | None:
    """``2026-11-29T23:37:34.856Z`` -> epoch milliseconds; naive times are UTC; bad -> None."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MS


def _parse_line(line: bytes) -> BoundaryRecord | None:
    """Parse one complete line; None if it is a valid record but no boundary.

    :raises _Invalid: the line is not a JSON object with a string ``type``.
    """
    try:
        envelope = _ENVELOPE.decode(line)
    except msgspec.DecodeError as exc:
        raise _Invalid(str(exc)) from None
    if envelope.type != "event_msg":
        return None
    try:
        payload = _EVENT_PAYLOAD.decode(envelope.payload)
    except msgspec.DecodeError as exc:
        raise _Invalid(str(exc)) from None
    if payload.type not in BOUNDARIES:
        return None
    boundary: Boundary = payload.type  # type: ignore[assignment]  # checked just above
    return BoundaryRecord(boundary, parse_timestamp_ms(envelope.timestamp), payload.turn_id)


def parse_boundary_line(line: bytes) -> BoundaryRecord | None:
    """The boundary a single rollout line records, or None (also for invalid lines)."""
    try:
        return _parse_line(line.rstrip(b"\r\n"))
    except _Invalid:
        return None


class RolloutMeta(msgspec.Struct, frozen=True):
    """What the ``session_meta`` header says: the thread, its parent, the CLI version."""

    thread_id: str
    parent_id: str | None = None
    cli_version: str | None = None


def _str_at(obj: object, *path: str) -> str | None:
    for name in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(name)
    return obj if isinstance(obj, str) and obj else None


def parse_session_meta(head: bytes) -> RolloutMeta | None:
    """Parse the first line of ``head`` (the first bytes of a rollout) as ``session_meta``.

    Returns None when the first line is incomplete, not JSON, not ``session_meta``
    or has no ``payload.id``.
    """
    newline = head.find(b"\n")
    if newline < 0:
        return None
    try:
        record: Any = _ANY.decode(head[:newline])
    except msgspec.DecodeError:
        return None
    if not isinstance(record, dict) or record.get("type") != "session_meta":
        return None
    payload = record.get("payload")
    thread_id = _str_at(payload, "id")
    if thread_id is None:
        return None
    parent = _str_at(payload, "source", "subagent", "thread_spawn", "parent_thread_id")
    if parent is None:
        parent = _str_at(payload, "parent_thread_id")
    return RolloutMeta(thread_id, parent, _str_at(payload, "cli_version"))


def thread_id_from_path(path: str) -> str | None:
    """The thread uuid at the end of a rollout file name, or None."""
    match = _THREAD_RE.search(os.path.basename(path))
    return match.group(1) if match else None


def is_rollout_path(path: str, sessions_root: str) -> bool:
    """Whether ``path`` (canonical) is a ``rollout-*.jsonl`` under ``sessions_root`` (canonical)."""
    return (
        path.startswith(sessions_root.rstrip(os.sep) + os.sep)
        and path.endswith(".jsonl")
        and os.path.basename(path).startswith("rollout-")
    )


def root_of(thread_id: str, parents: Mapping[str, str | None]) -> str:
    """Walk ``parents`` from ``thread_id`` to the oldest known ancestor (cycle-safe)."""
    seen = {thread_id}
    current = thread_id
    while True:
        parent = parents.get(current)
        if parent is None or parent in seen:
            return current
        seen.add(parent)
        current = parent


# --------------------------------------------------------------------------- the tail


class TailStatistics(msgspec.Struct, kw_only=True):
    """Counters of one :class:`RolloutTail` (all monotonic): one record it keeps, copied by
    ``statistics()``."""

    bytes_read: int = 0
    lines: int = 0
    invalid_lines: int = 0
    giant_lines: int = 0
    resets: int = 0
    boundaries: int = 0


class RolloutTail:
    """Sans-IO lifecycle reader for one rollout file.

    Feed it the current file size (and identity) plus a ``read(offset, length)``
    function with :meth:`update`; it returns the boundaries to publish. The first
    update (and the first after a truncation or replacement) is *discovery*: a
    bounded backwards scan returning at most the latest boundary, so a restarted
    observer learns the current turn state without replaying history. Later
    updates read only the new bytes and return every boundary in file order.
    """

    def __init__(
        self,
        *,
        window: int = WINDOW_BYTES,
        overlap: int = OVERLAP_BYTES,
        max_windows: int = DISCOVERY_MAX_WINDOWS,
        max_line: int = MAX_LINE_BYTES,
    ) -> None:
        if not 0 <= overlap < window or max_windows < 1 or max_line < 1:
            raise ValueError("need 0 <= overlap < window, max_windows >= 1, max_line >= 1")
        self._window = window
        self._overlap = overlap
        self._max_windows = max_windows
        self._max_line = max_line
        self._offset: int | None = None  # None: not discovered yet
        self._identity: object = None
        self._buf = bytearray()  # the incomplete last line (only while <= max_line)
        self._discarding = False  # inside a giant line: drop bytes up to its newline
        self._stats = TailStatistics()

    @property
    def offset(self) -> int | None:
        """Bytes consumed so far (the cursor), or None before discovery."""
        return self._offset

    def statistics(self) -> TailStatistics:
        """A point-in-time copy of the counters."""
        return msgspec.structs.replace(self._stats)

    def update(self, size: int, read: ReadFn, identity: object = None) -> list[BoundaryRecord]:
        """Advance to ``size`` bytes and return the boundaries to publish.

        ``identity`` (e.g. ``(st_dev, st_ino)``) detects a file replaced by another.
        """
        if self._offset is not None and (
            size < self._offset or (identity is not None and identity != self._identity)
        ):
            # Truncated or replaced: what we consumed is gone; learn the file afresh.
            self._stats.resets += 1
            self._offset = None
        self._identity = identity
        found = self._discover(size, read) if self._offset is None else self._forward(size, read)
        self._stats.boundaries += len(found)
        return found

    # -- discovery: bounded backwards scan

    def _discover(self, size: int, read: ReadFn) -> list[BoundaryRecord]:
        self._buf.clear()
        self._discarding = False
        if size <= 0:
            self._offset = 0
            return []
        end = size
        cursor: int | None = None  # where forward reading resumes: start of the last partial line
        for _ in range(self._max_windows):
            start = max(0, end - self._window)
            data = read(start, end - start)
            self._stats.bytes_read += len(data)
            end = start + len(data)  # the file may have shrunk under us
            last_nl = data.rfind(b"\n")
            if cursor is None:
                if last_nl < 0:
                    # No newline in the last window: one line in progress. At offset 0 it
                    # is short and will be read whole later; otherwise it is giant.
                    cursor = start if start == 0 else end
                    self._discarding = start > 0
                    return self._finish_discovery(cursor, [])
                cursor = start + last_nl + 1
            if last_nl >= 0:
                # A window not starting at the file floor begins mid-record (maybe mid
                # UTF-8 sequence): ignore everything up to its first newline.
                lo = data.find(b"\n") + 1 if start > 0 else 0
                if lo <= last_nl:
                    record = self._latest_in(data, lo, last_nl + 1)
                    if record is not None:
                        return self._finish_discovery(cursor, [record])
            if start == 0:
                break
            end = start + self._overlap
        return self._finish_discovery(size if cursor is None else cursor, [])

    def _finish_discovery(self, cursor: int, found: list[BoundaryRecord]) -> list[BoundaryRecord]:
        self._offset = cursor
        return found

    def _latest_in(self, data: bytes, lo: int, hi: int) -> BoundaryRecord | None:
        """The last valid boundary among the complete lines of ``data[lo:hi]``."""
        hits = list(_BOUNDARY_RE.finditer(data, lo, hi))
        tried: set[int] = set()
        for hit in reversed(hits):
            line_start = max(lo, data.rfind(b"\n", lo, hit.start()) + 1)
            if line_start in tried:
                continue
            tried.add(line_start)
            line_end = data.find(b"\n", hit.end(), hi)
            if line_end < 0:
                continue
            try:
                record = _parse_line(data[line_start:line_end])
            except _Invalid:
                continue
            if record is not None:
                return record
        return None

    # -- incremental forward reads

    def _forward(self, size: int, read: ReadFn) -> list[BoundaryRecord]:
        assert self._offset is not None
        out: list[BoundaryRecord] = []
        position = self._offset
        while position < size:
            chunk = read(position, min(self._window, size - position))
            if not chunk:
                break  # shrank between stat and read: the next update sees the truncation
            self._stats.bytes_read += len(chunk)
            self._consume(chunk, out)
            position += len(chunk)
        self._offset = position
        return out

    def _consume(self, chunk: bytes, out: list[BoundaryRecord]) -> None:
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                rest = len(chunk) - start
                if self._discarding:
                    pass
                elif len(self._buf) + rest > self._max_line:
                    self._buf.clear()
                    self._discarding = True
                else:
                    self._buf += chunk[start:]
                return
            if self._discarding or len(self._buf) + (newline - start) > self._max_line:
                self._stats.giant_lines += 1
                self._discarding = False
                self._buf.clear()
            else:
                if self._buf:
                    self._buf += chunk[start:newline]
                    line = bytes(self._buf)
                    self._buf.clear()
                else:
                    line = chunk[start:newline]
                self._take(line, out)
            start = newline + 1

    def _take(self, line: bytes, out: list[BoundaryRecord]) -> None:
        line = line.rstrip(b"\r")
        if not line.strip():
            return
        self._stats.lines += 1
        try:
            record = _parse_line(line)
        except _Invalid:
            self._stats.invalid_lines += 1
            return
        if record is not None:
            out.append(record)


# --------------------------------------------------------------------------- ownership


class Owner(msgspec.Struct, frozen=True, order=True):
    """One process incarnation: pid plus start token."""

    pid: int
    start_token: str


class OwnershipSample(msgspec.Struct, frozen=True):
    """One sample: which ``codex`` processes hold which rollouts.

    ``uncertain`` lists ``codex`` processes whose fd table could not be read
    (permission denied): their rollouts can be neither confirmed nor missed.
    """

    holders: dict[str, tuple[Owner, ...]]
    uncertain: frozenset[Owner] = frozenset()


@dataclass(frozen=True)
class OwnershipState:
    """Owned rollouts (path -> owner) and consecutive-miss counts of owned paths."""

    owners: Mapping[str, Owner] = field(default_factory=dict)
    misses: Mapping[str, int] = field(default_factory=dict)


class Owned(msgspec.Struct, frozen=True):
    """``path`` became owned by ``owner`` (``previous`` is set when the owner changed)."""

    path: str
    owner: Owner
    previous: Owner | None = None


class Released(msgspec.Struct, frozen=True):
    """``path`` was missed in ``MISS_CONFIRMATIONS`` consecutive samples; ``owner`` held it."""

    path: str
    owner: Owner


def build_sample(
    processes: Iterable[procfs.ProcessInfo],
    fd_targets: Callable[[int], list[str] | None],
    sessions_root: str,
) -> OwnershipSample:
    """Build a sample from a process table; ``fd_targets(pid)`` is None when unreadable.

    Only processes whose comm is exactly ``codex`` are asked for their fds, and
    only targets that are ``rollout-*.jsonl`` under ``sessions_root`` count.
    """
    holders: dict[str, list[Owner]] = {}
    uncertain: set[Owner] = set()
    for info in processes:
        if info.comm != "codex":
            continue
        owner = Owner(info.pid, info.start_token)
        targets = fd_targets(info.pid)
        if targets is None:
            uncertain.add(owner)
            continue
        for target in targets:
            if is_rollout_path(target, sessions_root):
                bucket = holders.setdefault(target, [])
                if owner not in bucket:
                    bucket.append(owner)
    return OwnershipSample(
        {path: tuple(sorted(owners)) for path, owners in holders.items()}, frozenset(uncertain)
    )


def reconcile_ownership(
    previous: OwnershipState, sample: OwnershipSample, *, confirmations: int = MISS_CONFIRMATIONS
) -> tuple[OwnershipState, list[Owned], list[Released]]:
    """Apply one sample: new/changed owners, misses, releases (pure; outputs sorted by path).

    A held rollout clears its miss count and keeps its owner while that owner
    still holds it (otherwise the lowest pid among the holders takes over). A
    rollout owned before and missing from the sample is kept with its miss count
    raised, and released at ``confirmations`` consecutive misses, unless its owner
    is ``uncertain`` (unreadable fds prove nothing: the count is left as it was).
    """
    owners: dict[str, Owner] = {}
    misses: dict[str, int] = {}
    owned: list[Owned] = []
    released: list[Released] = []
    for path in sorted(set(previous.owners) | set(sample.holders)):
        before = previous.owners.get(path)
        holders = sample.holders.get(path)
        if holders:
            if before is not None and before in holders:
                owners[path] = before
            else:
                owners[path] = holders[0]
                owned.append(Owned(path, holders[0], before))
            continue
        assert before is not None
        count = previous.misses.get(path, 0)
        if before in sample.uncertain:
            owners[path] = before
            if count:
                misses[path] = count
            continue
        count += 1
        if count >= confirmations:
            released.append(Released(path, before))
        else:
            owners[path] = before
            misses[path] = count
    return OwnershipState(owners, misses), owned, released


# --------------------------------------------------------------------------- blocking I/O


def _fd_targets(pid: int) -> list[str] | None:
    """Open-file targets of ``pid``: [] if it is gone, None if we may not look (blocking).

    ``procfs.open_paths`` answers [] for both, which would let an unreadable fd
    table look like "holds nothing" and retire a live owner; so this reads it here.
    """
    if procfs.HAVE_PROCFS:
        fd_dir = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except PermissionError:
            return None
        except OSError:
            return []  # ENOENT/ESRCH: exited during the scan
        targets: list[str] = []
        for name in names:
            try:
                targets.append(os.readlink(f"{fd_dir}/{name}"))
            except OSError:
                continue  # closed during the scan
        return targets
    try:
        return [f.path for f in psutil.Process(pid).open_files()]
    except psutil.AccessDenied:
        return None
    except (psutil.Error, OSError):
        return []


def codex_processes() -> list[procfs.ProcessInfo]:
    """Every process whose comm is exactly ``codex``, with its start token (blocking).

    On Linux this reads ``/proc/<pid>/comm`` (a few bytes) for every pid and the
    ``stat`` line only of the ``codex`` ones: the whole-table ``procfs.scan_processes``
    parses every stat line, which costs about twice as much for the same answer.
    Elsewhere it filters ``procfs.scan_processes``.
    """
    if not procfs.HAVE_PROCFS:
        return [p for p in procfs.scan_processes() if p.comm == "codex"]
    out: list[procfs.ProcessInfo] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/comm", "rb") as f:
                if f.read() != b"codex\n":
                    continue
        except OSError:
            continue  # exited during the scan (or not ours to read: then not provable)
        stat = procfs.read_stat(int(name))
        if stat is not None:
            out.append(procfs.ProcessInfo(int(name), stat.ppid, stat.comm, stat.start_token))
    return out


@dataclass
class _Tracked:
    """Everything known about one owned rollout (touched only under the actor's lock)."""

    path: str
    key: SessionKey
    owner: Owner
    root_key: SessionKey | None
    version: str | None
    tail: RolloutTail


@dataclass
class _TailResult:
    path: str
    records: list[BoundaryRecord] = field(default_factory=list)
    vanished: bool = False
    unreadable: bool = False


def _refresh_tail(tracked: _Tracked) -> _TailResult:
    """Stat and read one rollout's new bytes (blocking; worker thread)."""
    result = _TailResult(tracked.path)
    try:
        # Never blocks (a FIFO swapped in opens at once and is refused), never follows a link.
        fd, st = open_evidence(tracked.path)
    except FileNotFoundError:
        result.vanished = True
        return result
    except OSError:
        result.unreadable = True
        return result
    try:

        def read(offset: int, length: int) -> bytes:
            return os.pread(fd, length, offset)

        result.records = tracked.tail.update(st.st_size, read, (st.st_dev, st.st_ino))
    except OSError:
        result.unreadable = True
    finally:
        os.close(fd)
    return result


def _read_head(path: str) -> bytes | None:
    try:
        fd, _ = open_evidence(path)
    except OSError:
        return None
    try:
        return os.pread(fd, HEADER_LIMIT_BYTES, 0)
    except OSError:
        return None
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- the actor


class CodexDiscoveryStatistics(msgspec.Struct, kw_only=True):
    """Counters of :class:`CodexRolloutDiscovery` (monotonic except ``owned_rollouts``, a
    size filled in by ``statistics()``): one record it keeps, copied by ``statistics()``."""

    samples: int = 0
    sample_errors: int = 0
    unreadable_processes: int = 0
    owned_rollouts: int = 0
    owned_emitted: int = 0
    released_emitted: int = 0
    boundaries_emitted: int = 0
    refreshes: int = 0
    bytes_read: int = 0
    invalid_lines: int = 0
    giant_lines: int = 0
    resets: int = 0
    vanished_files: int = 0
    unreadable_files: int = 0
    meta_unresolved: int = 0
    bad_timestamps: int = 0
    rejected: int = 0
    watch_errors: int = 0


class CodexRolloutDiscovery:
    """Discovery actor for Codex threads; sends RolloutOwned/Released and LifecycleBoundary.

    Sends to the sink (the supervisor routes by ``key``, or by ``root_key`` for
    child threads): :class:`~messages.RolloutOwned` when a rollout becomes owned
    or changes owner, :class:`~messages.RolloutReleased` at the second
    consecutive missed sample, :class:`~messages.LifecycleBoundary` for the latest
    boundary at first sight and for every boundary appended afterwards.

    ``run`` follows the sessions tree through inotify (``watch=True``, Linux: see
    :meth:`_notified`) or samples ownership every ``sample_interval`` seconds and polls the
    owned rollouts' sizes every ``poll_interval`` seconds. Tests drive it deterministically with
    :meth:`sample_now` and :meth:`refresh_now` instead.
    """

    def __init__(
        self,
        codex_home: str | os.PathLike[str] | None = None,
        *,
        sample_interval: float = SAMPLE_INTERVAL_S,
        idle_sample_interval: float = IDLE_SAMPLE_INTERVAL_S,
        watch: bool = True,
        poll_interval: float = POLL_INTERVAL_S,
        clock: Callable[[], int] = now_ms,
        process_table: Callable[[], list[procfs.ProcessInfo]] = codex_processes,
    ) -> None:
        home = Path(codex_home) if codex_home is not None else paths.home()
        self._sessions_root = os.path.realpath(home / "sessions")
        self._sample_interval = sample_interval
        self._watch = watch
        self._poll_interval = poll_interval
        self._clock = clock
        self._process_table = process_table
        self._idle_sample_interval = idle_sample_interval
        self._wanted = anyio.Event()  # set when a notification asks for a sample
        self._full = False  # ... and for every tail to be re-read with it
        self._lock = anyio.Lock(fast_acquire=True)
        self._state = OwnershipState()
        self._tracked: dict[str, _Tracked] = {}
        self._parents: dict[str, str | None] = {}  # thread -> parent, from session_meta
        self._stats = CodexDiscoveryStatistics()

    @property
    def sessions_root(self) -> str:
        """The canonical ``sessions`` directory whose rollouts count."""
        return self._sessions_root

    def statistics(self) -> CodexDiscoveryStatistics:
        """A point-in-time copy of the counters (see :class:`CodexDiscoveryStatistics`)."""
        return msgspec.structs.replace(self._stats, owned_rollouts=len(self._tracked))

    # -- driving

    async def run(self, sink: EvidenceSink) -> None:
        """Sample ownership and follow owned rollouts until cancelled."""
        if self._watch and fswatch.AVAILABLE:
            try:
                await self._notified(sink)
                return
            except OSError:
                # inotify refused (watch or instance limits): sample and poll instead.
                self._stats.watch_errors += 1
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._sample_loop, sink)
            tg.start_soon(self._poll_loop, sink)

    async def _sample_loop(self, sink: EvidenceSink) -> None:
        # The wait between samples happens in the worker thread, just before the sample: an
        # idle tick then wakes the event loop once (when the sample is back) instead of
        # twice (the timer, then the worker). Every wake-up from idle costs the loop thread
        # 0.1-0.25 ms of CPU on this kind of VM: most of an idle tick.
        stop = threading.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_set_when_cancelled, stop)
            ticks = 0
            while True:
                after = self._sample_interval if ticks else 0.0
                await self.sample_now(sink, refresh_all=True, after=after, stop=stop)
                ticks += 1

    async def _poll_loop(self, sink: EvidenceSink) -> None:
        while True:
            await anyio.sleep(self._poll_interval)
            await self.refresh_now(sink)

    async def _notified(self, sink: EvidenceSink) -> None:
        """Event-driven mode: inotify on the sessions tree says when to read and when to sample.

        - a tracked rollout modified: read what was appended to it (that file only);
        - a rollout created, or an untracked one written (a thread resumed by a new process),
          or a tracked one closed after writing or removed (its owner let go of it or exited):
          sample ownership, at most once per ``sample_interval``; while a released-looking
          rollout waits for its second miss, the next sample follows ``sample_interval`` later;
        - nothing at all: one safety sample (with every tail re-read) every
          ``idle_sample_interval`` s, for what leaves no trace in the tree (a thread loaded
          without a write) and in case notifications were lost; a queue overflow does the same
          at once.

        :raises OSError: inotify could not be set up (the caller falls back to polling).
        """
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._sample_on_demand, sink)
            while True:
                # A fresh Codex home has no sessions/ yet: inotify says when it appears.
                await fswatch.wait_for_directory(self._sessions_root)
                with fswatch.Inotify() as notify:
                    await anyio.to_thread.run_sync(_watch_tree, notify, self._sessions_root)
                    self._wanted.set()  # sample what appeared before the watch began
                    while await self._on_events(sink, notify, await notify.wait()):
                        pass

    async def _on_events(
        self, sink: EvidenceSink, notify: fswatch.Inotify, events: list[fswatch.FsEvent]
    ) -> bool:
        """Act on one batch of notifications; False when the sessions root itself went."""
        gone = False
        touched: set[str] = set()
        sample = full = False
        for event in events:
            if event.mask & fswatch.Q_OVERFLOW:
                sample = full = True
            elif event.is_dir:
                if event.mask & (fswatch.CREATE | fswatch.MOVED_TO):
                    # A new day directory: watch it, and sample for what it already holds.
                    await anyio.to_thread.run_sync(_watch_tree, notify, event.path)
                    sample = True
            elif event.mask & fswatch.IGNORED:
                gone = gone or event.path == self._sessions_root
            elif not is_rollout_path(event.path, self._sessions_root):
                continue
            elif event.path in self._tracked:
                if event.mask & fswatch.MODIFY:
                    touched.add(event.path)
                if event.mask & (fswatch.CLOSE_WRITE | fswatch.DELETE | fswatch.MOVED_FROM):
                    sample = True
            elif event.mask & (fswatch.CREATE | fswatch.MODIFY | fswatch.MOVED_TO):
                sample = True
        if touched:
            await self.refresh_now(sink, touched)
        if sample or gone:
            self._full = self._full or full
            self._wanted.set()
        return not gone

    async def _sample_on_demand(self, sink: EvidenceSink) -> None:
        await self.sample_now(sink, refresh_all=True)
        last = time.monotonic()
        while True:
            # A rollout missed once is confirmed (or not) by the next sample.
            wait = self._sample_interval if self._state.misses else self._idle_sample_interval
            full = True
            with anyio.move_on_after(wait):
                await self._wanted.wait()
                full = self._full
            self._wanted = anyio.Event()
            self._full = False
            pause = last + self._sample_interval - time.monotonic()
            if pause > 0:
                await anyio.sleep(pause)  # at most one sample per sample_interval
            await self.sample_now(sink, refresh_all=full)
            last = time.monotonic()

    async def sample_now(
        self,
        sink: EvidenceSink,
        refresh_all: bool = True,
        *,
        after: float = 0.0,
        stop: threading.Event | None = None,
    ) -> None:
        """Run one ownership sample (``after`` seconds from now, unless ``stop`` is set
        first), emit what changed, then refresh owned tails.

        ``refresh_all=False`` reads only the rollouts whose ownership changed (the
        watching loop's usual tick: appends to the others arrive as notifications).
        """
        try:
            # Wait, sample and reconcile in one worker-thread hop, outside the lock (the
            # process table is all it reads; refreshes go on meanwhile).
            taken = await anyio.to_thread.run_sync(self._sample_after, after, stop)
        except OSError:
            # The process table itself could not be read: prove nothing this time.
            self._stats.sample_errors += 1
            return
        if taken is None:
            return  # stopped while waiting
        sample, reconciled_from, result = taken
        async with self._lock:
            if self._state is not reconciled_from:
                # Another sample was applied while this one ran: reconcile again from it.
                result = reconcile_ownership(self._state, sample)
            state, owned, released = result
            self._stats.samples += 1
            self._stats.unreadable_processes += len(sample.uncertain)
            self._state = state
            observed = self._clock()
            for gone in released:
                tracked = self._tracked.pop(gone.path, None)
                if tracked is not None and self._emit(
                    sink,
                    RolloutReleased(
                        key=tracked.key,
                        pid=gone.owner.pid,
                        at_ms=observed,
                        observed_at_ms=observed,
                    ),
                ):
                    self._stats.released_emitted += 1
            new_paths = [o.path for o in owned if o.path not in self._tracked]
            if new_paths:
                heads = await anyio.to_thread.run_sync(_read_heads, new_paths)
                self._admit(heads, owned)
            # Read every owned tail (new ones get their bounded discovery scan) BEFORE
            # announcing ownership, so the latest boundary follows its RolloutOwned.
            reads = await self._read_tails(None if refresh_all else [c.path for c in owned])
            observed = self._clock()
            for change in owned:
                tracked = self._tracked[change.path]
                tracked.owner = change.owner
                if self._emit(
                    sink,
                    RolloutOwned(
                        key=tracked.key,
                        pid=change.owner.pid,
                        start_token=change.owner.start_token,
                        at_ms=observed,
                        observed_at_ms=observed,
                        root_key=tracked.root_key,
                        version=tracked.version,
                    ),
                ):
                    self._stats.owned_emitted += 1
            self._emit_reads(sink, reads)

    async def refresh_now(self, sink: EvidenceSink, only: Iterable[str] | None = None) -> None:
        """Read what was appended to owned rollouts (all, or those in ``only``) and emit it."""
        async with self._lock:
            await self._refresh_locked(sink, only)

    # -- internals (called under the lock)

    def _sample_after(self, after: float, stop: threading.Event | None) -> _Sampled | None:
        """Worker thread: wait ``after`` s (``None`` if ``stop`` was set meanwhile), then
        sample the process table and reconcile it with the current ownership state."""
        if after > 0:
            if stop is None:
                time.sleep(after)
            elif stop.wait(after):
                return None
        state = self._state
        sample = self._sample_blocking()
        return sample, state, reconcile_ownership(state, sample)

    def _sample_blocking(self) -> OwnershipSample:
        # os.listdir("/proc") failing raises OSError: the caller counts it, proves nothing.
        return build_sample(self._process_table(), _fd_targets, self._sessions_root)

    def _admit(self, heads: dict[str, bytes | None], owned: list[Owned]) -> None:
        owners = {o.path: o.owner for o in owned}
        metas: dict[str, RolloutMeta] = {}
        for path, head in heads.items():
            meta = parse_session_meta(head) if head is not None else None
            if meta is None:
                # No readable session_meta yet: the file name carries the thread id.
                self._stats.meta_unresolved += 1
                thread = thread_id_from_path(path) or os.path.basename(path)
                meta = RolloutMeta(thread)
            metas[path] = meta
            self._parents[meta.thread_id] = meta.parent_id
        for path, meta in metas.items():
            root = root_of(meta.thread_id, self._parents)
            self._tracked[path] = _Tracked(
                path=path,
                key=SessionKey("codex", meta.thread_id),
                owner=owners[path],
                root_key=SessionKey("codex", root) if root != meta.thread_id else None,
                version=meta.cli_version,
                tail=RolloutTail(),
            )

    async def _refresh_locked(self, sink: EvidenceSink, only: Iterable[str] | None) -> None:
        self._emit_reads(sink, await self._read_tails(only))

    async def _read_tails(self, only: Iterable[str] | None) -> list[tuple[_Tracked, _TailResult]]:
        if only is None:
            targets = list(self._tracked.values())
        else:
            targets = [self._tracked[p] for p in only if p in self._tracked]
        if not targets:
            return []
        results = await anyio.to_thread.run_sync(_refresh_and_count, targets, self._stats)
        self._stats.refreshes += 1
        return list(zip(targets, results, strict=True))

    def _emit_reads(self, sink: EvidenceSink, reads: list[tuple[_Tracked, _TailResult]]) -> None:
        observed = self._clock()
        for tracked, result in reads:
            for record in result.records:
                at_ms = record.at_ms
                if at_ms is None:
                    self._stats.bad_timestamps += 1
                    at_ms = observed
                if self._emit(
                    sink,
                    LifecycleBoundary(
                        key=tracked.key,
                        boundary=record.boundary,
                        at_ms=at_ms,
                        observed_at_ms=observed,
                        turn_id=record.turn_id,
                        root_key=tracked.root_key,
                        version=tracked.version,
                    ),
                ):
                    self._stats.boundaries_emitted += 1

    def _emit(self, sink: EvidenceSink, message: Inbound) -> bool:
        """Send ``message``; whether the sink took it (a refusal is counted)."""
        try:
            sink.inject_nowait(message)
        except MessageError:
            # e.g. a record timestamp outside 2000-2100 or an absurd thread id.
            self._stats.rejected += 1
            return False
        return True


#: What one worker-thread sample returns: the sample, the state it was reconciled from, and
#: the reconciliation (new state, newly owned, released).
_Sampled = tuple[
    OwnershipSample, OwnershipState, tuple[OwnershipState, list[Owned], list[Released]]
]


async def _set_when_cancelled(event: anyio.Event | threading.Event) -> None:
    try:
        await anyio.sleep_forever()
    finally:
        event.set()


#: What the sessions tree tells: appends, new rollouts and day directories, a writer closing.
_WATCH_MASK: Final = (
    fswatch.CREATE
    | fswatch.MODIFY
    | fswatch.CLOSE_WRITE
    | fswatch.DELETE
    | fswatch.MOVED_FROM
    | fswatch.MOVED_TO
)


def _watch_tree(notify: fswatch.Inotify, top: str) -> None:
    """Worker thread: watch ``top`` and every directory below it (``YYYY/MM/DD``).

    :raises OSError: the kernel refused a watch (``ENOSPC``: the user's watch limit).
    """
    for directory, _dirs, _files in os.walk(top):
        notify.add(directory, _WATCH_MASK)


def _read_heads(paths_: list[str]) -> dict[str, bytes | None]:
    return {path: _read_head(path) for path in paths_}


def _refresh_and_count(
    targets: list[_Tracked], stats: CodexDiscoveryStatistics
) -> list[_TailResult]:
    """Worker thread: refresh every tail and add what the refresh changed in its counters to
    the actor's ``stats``, so that an idle refresh leaves the event loop nothing to do.

    Safe off the loop: refreshes run under the actor's lock (one at a time), and these fields
    are written by nothing else.
    """
    before = [t.tail.statistics() for t in targets]
    results = _refresh_all(targets)
    for tracked, old, result in zip(targets, before, results, strict=True):
        new = tracked.tail.statistics()
        stats.bytes_read += new.bytes_read - old.bytes_read
        stats.invalid_lines += new.invalid_lines - old.invalid_lines
        stats.giant_lines += new.giant_lines - old.giant_lines
        stats.resets += new.resets - old.resets
        stats.vanished_files += result.vanished
        stats.unreadable_files += result.unreadable
    return results


def _refresh_all(targets: list[_Tracked]) -> list[_TailResult]:
    return [_refresh_tail(t) for t in targets]
