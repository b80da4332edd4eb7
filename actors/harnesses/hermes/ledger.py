"""Hermes Agent: cron fires from ``cron/executions.db`` as :class:`~messages.LedgerFire`.

Facts (real ledgers in tests/fixtures/hermes/):

- Home: ``$HERMES_HOME``, else ``~/.hermes``; every ``<home>/profiles/<name>/`` is a
  complete home of its own. A fire and its session live in the same home.
- ``cron/executions.db`` table ``executions`` (read columns by name: newer Hermes
  appends columns): ``id, job_id, pid, process_started_at`` (``/proc/<pid>/stat``
  field 22 on Linux, psutil create time in centiseconds elsewhere, may be NULL),
  ``status`` in claimed/running/completed/failed/unknown, ``claimed_at``,
  ``started_at``, ``finished_at`` (ISO-8601 with Hermes' timezone offset). Newer
  Hermes lets a worker take a claimed fire over (rewriting pid and start time), so
  the pid is re-read on every poll.
- A fire has no session column. Its session is the smallest ``state.db`` ``sessions.id``
  with ``source='cron'``, prefix ``cron_<job_id>_`` and a ``YYYYmmdd_HHMMSS`` suffix
  between ``wall(started_at)`` and ``wall(finished_at)`` (open-ended while running).
  A fire that never reached ``running``, a ``no_agent`` job, or a run that failed
  before its first agent turn has none: it is keyed ``exec_<execution id>`` instead.
  When a fire first keyed that way later gains its session (it was running but had
  not reached its first turn), the old key receives one last fire with status
  ``superseded`` (persisted/unknown) and the fire continues under the session key.

Mapping (who decides): this module only reports the ledger word, the pid and
``pid_alive`` — whether the pid is alive, not a zombie, and its start token equals
``process_started_at``. The session reducer maps claimed/running + ``pid_alive`` to
running/working, claimed/running without it to persisted/unknown (native
``abandoned``), anything else to persisted/unknown with the ledger word. A NULL
``process_started_at`` cannot prove an owner, so ``pid_alive`` is False (Hermes
itself treats such a row as dead on its next restart).

Functional core: :func:`wall`, :func:`match_session`, :func:`owner_alive`,
:func:`plan_emissions`. Shell: :class:`HermesLedgerDiscovery` polls each home about
once a second, opening the databases read-only (``file:…?mode=ro``) in a worker
thread; a missing, locked or half-migrated database is counted and retried.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final

import anyio
import anyio.abc
import anyio.to_thread
import msgspec
import psutil

from actors.core.clock import now_ms
from actors.harnesses.hermes import paths
from actors.runtime.mailbox import EvidenceSink
from actors.sources import fswatch, procfs
from actors.sources.files import NotRegularFile, check_regular
from messages.common import SessionKey
from messages.errors import MessageError
from messages.evidence import LedgerFire

__all__ = [
    "LIVE_STATUSES",
    "EvidenceSink",
    "FireRow",
    "FireView",
    "HermesLedgerDiscovery",
    "HermesStatistics",
    "ProcessProbe",
    "Sent",
    "fallback_session_id",
    "hermes_homes",
    "iso_to_ms",
    "match_session",
    "owner_alive",
    "plan_emissions",
    "probe_process",
    "read_fires",
    "wall",
]

LIVE_STATUSES: Final[frozenset[str]] = frozenset({"claimed", "running"})
POLL_INTERVAL_S: Final = 1.0
# With notifications, the ledgers are read when they change, and once in this long besides.
IDLE_POLL_INTERVAL_S: Final = 60.0
SUPERSEDED: Final = "superseded"
# Hermes' open upper bound for a fire that has not finished yet.
_OPEN_END: Final = "99999999_999999"
_SUFFIX_RE: Final = re.compile(r"\d{8}_\d{6}\Z")
_REQUIRED: Final = ("id", "job_id", "pid", "status", "claimed_at")
# Seconds a poll may wait on a busy database before it counts "locked" and moves on.
_BUSY_TIMEOUT_S: Final = 0.05


# --------------------------------------------------------------------------- pure core


class FireRow(msgspec.Struct, frozen=True):
    """One ``executions`` row, normalized (``pid`` None: not a usable pid)."""

    id: str
    job_id: str
    status: str
    pid: int | None
    process_started_at: int | None
    claimed_at: str | None
    started_at: str | None = None
    finished_at: str | None = None


def wall(iso: str | None) -> str | None:
    """Hermes wall clock ``YYYYmmdd_HHMMSS`` of an ISO time: first 19 chars, ``-``/``:`` removed.

    ``'2026-11-30T05:32:11.92+05:30' -> '20261130_053211'``; None when not that shape.
    """
    if not iso or len(iso) < 19:
        return None
    text = iso[:19].replace("-", "").replace(":", "").replace("T", "_")
    return text if _SUFFIX_RE.match(text) else None


def iso_to_ms(iso: str | None) -> int | None:
    """Epoch milliseconds of an ISO-8601 time with offset (naive: local time); bad -> None."""
    if not iso:
        return None
    try:
        return int(datetime.fromisoformat(iso).timestamp() * 1000)
    except (ValueError, OverflowError, OSError):
        return None


def match_session(fire: FireRow, cron_session_ids: Iterable[str]) -> str | None:
    """The session of ``fire`` among ``state.db`` cron session ids, by Hermes' naming rule.

    The smallest id ``cron_<job_id>_<suffix>`` with ``wall(started_at) <= suffix <=
    wall(finished_at)`` (no upper bound while unfinished). None if the fire never
    started or nothing matches.
    """
    low = wall(fire.started_at)
    if low is None:
        return None
    high = wall(fire.finished_at) or _OPEN_END
    prefix = f"cron_{fire.job_id}_"
    best: str | None = None
    for sid in cron_session_ids:
        if not sid.startswith(prefix):
            continue
        suffix = sid[len(prefix) :]
        if _SUFFIX_RE.match(suffix) and low <= suffix <= high and (best is None or sid < best):
            best = sid
    return best


def fallback_session_id(fire_id: str) -> str:
    """The key used for a fire with no session row.

    Documented in README.md, Reference > Evidence: Codex rollouts and the Hermes cron ledger.
    """
    return f"exec_{fire_id}"


class ProcessProbe(msgspec.Struct, frozen=True):
    """What the OS says about a pid right now."""

    exists: bool
    zombie: bool = False
    start_token: str | None = None


def owner_alive(fire: FireRow, probe: ProcessProbe | None) -> bool:
    """Whether ``fire``'s recorded owner is provably the live process that claimed it.

    Alive, not a zombie, and start token equal to ``process_started_at``; a NULL
    start time proves nothing (False). Terminal statuses never have a live owner.
    """
    if fire.status not in LIVE_STATUSES or fire.pid is None or probe is None:
        return False
    if not probe.exists or probe.zombie or fire.process_started_at is None:
        return False
    return probe.start_token == str(fire.process_started_at)


class FireView(msgspec.Struct, frozen=True):
    """One fire as this poll sees it (``at_ms`` is the time of its current status)."""

    fire_id: str
    session_id: str
    status: str
    pid: int | None
    pid_alive: bool
    at_ms: int | None


class Sent(msgspec.Struct, frozen=True):
    """What was last sent for one fire."""

    session_id: str
    status: str
    pid: int | None
    pid_alive: bool
    at_ms: int


def status_time(fire: FireRow) -> str | None:
    """The ledger time of the fire's current status (claim, start or finish)."""
    if fire.status == "claimed":
        return fire.claimed_at
    if fire.status == "running":
        return fire.started_at or fire.claimed_at
    return fire.finished_at or fire.started_at or fire.claimed_at


def plan_emissions(
    previous: Mapping[str, Sent], views: Sequence[FireView], observed_ms: int
) -> tuple[dict[str, Sent], list[tuple[str, Sent]]]:
    """Decide what to send for this poll's ``views`` (pure).

    Returns the new per-fire memory and ``(fire_id, Sent)`` pairs to send, in
    order. Only a change of session, status, pid or ``pid_alive`` is sent. A
    status change carries the ledger time of the new status; a change of owner
    or liveness alone carries ``observed_ms`` (when it was seen). Times never go
    backwards for one session. A fire whose key moves from its fallback to its
    session first sends ``superseded`` on the old key. Fires no longer in the
    ledger (pruned terminal rows) are forgotten.
    """
    memory: dict[str, Sent] = {}
    out: list[tuple[str, Sent]] = []
    for view in views:
        before = previous.get(view.fire_id)
        signature = (view.session_id, view.status, view.pid, view.pid_alive)
        if before is not None and signature == (
            before.session_id,
            before.status,
            before.pid,
            before.pid_alive,
        ):
            memory[view.fire_id] = before
            continue
        if before is None or before.status != view.status or before.session_id != view.session_id:
            at_ms = view.at_ms if view.at_ms is not None else observed_ms
        else:
            at_ms = observed_ms
        if before is not None and before.session_id != view.session_id:
            if before.status != SUPERSEDED:
                out.append(
                    (
                        view.fire_id,
                        Sent(
                            before.session_id,
                            SUPERSEDED,
                            before.pid,
                            False,
                            max(observed_ms, before.at_ms),
                        ),
                    )
                )
        elif before is not None:
            at_ms = max(at_ms, before.at_ms)
        sent = Sent(view.session_id, view.status, view.pid, view.pid_alive, at_ms)
        memory[view.fire_id] = sent
        out.append((view.fire_id, sent))
    return memory, out


# --------------------------------------------------------------------------- blocking I/O


def hermes_homes(root: Path) -> list[Path]:
    """``root`` and every ``root/profiles/<name>/`` directory (blocking)."""
    homes = [root]
    try:
        profiles = sorted((root / "profiles").iterdir())
    except OSError:
        return homes
    homes.extend(p for p in profiles if p.is_dir())
    return homes


def probe_process(pid: int) -> ProcessProbe:
    """Existence, zombie state and start token of ``pid`` (blocking)."""
    if procfs.HAVE_PROCFS:
        stat = procfs.read_stat(pid)
        if stat is None:
            # Gone, or present but unreadable (EACCES): kill(0) tells, identity unknown.
            return ProcessProbe(procfs.is_alive(pid))
        return ProcessProbe(True, stat.state == "Z", stat.start_token)
    try:
        proc = psutil.Process(pid)
        zombie = proc.status() == psutil.STATUS_ZOMBIE
        # Hermes writes psutil's create time in centiseconds off Linux.
        return ProcessProbe(True, zombie, str(int(proc.create_time() * 100)))
    except psutil.NoSuchProcess:
        return ProcessProbe(False)
    except (psutil.Error, OSError):
        return ProcessProbe(procfs.is_alive(pid))


class _DbProblem(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


def _connect_ro(path: Path) -> sqlite3.Connection:
    """A read-only connection to ``path`` (blocking).

    SQLite opens the files itself, blocking on a FIFO: the database and its ``-wal``/``-shm``
    are first opened as evidence (``O_NONBLOCK | O_NOFOLLOW``, ``fstat``), so a FIFO, device or
    link in their place is refused (:class:`_DbProblem` ``error``) instead of hanging the worker
    thread forever.
    """
    for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            check_regular(candidate)
        except NotRegularFile as exc:
            raise _DbProblem(
                "error", f"{candidate} is not a regular file ({exc.strerror})"
            ) from None
        except OSError as exc:
            raise _DbProblem("error", f"cannot open {candidate}: {exc}") from None
    uri = "file:" + urllib.parse.quote(str(path)) + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT_S, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    return conn


def _classify(exc: sqlite3.Error) -> str:
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return "locked"
    if "no such table" in text or "no such column" in text:
        return "schema"
    return "error"


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _as_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def read_fires(db: Path) -> tuple[list[FireRow], int]:
    """Every ``executions`` row of ``db`` read-only, plus how many rows were malformed.

    :raises _DbProblem: ``missing``, ``locked``, ``schema`` or ``error``.
    """
    if not db.is_file():
        raise _DbProblem("missing", str(db))
    try:
        conn = _connect_ro(db)
        try:
            cursor = conn.execute("SELECT * FROM executions")
            columns = {d[0] for d in cursor.description}
            missing = [c for c in _REQUIRED if c not in columns]
            if missing:
                raise _DbProblem("schema", f"executions lacks {', '.join(missing)}")
            rows = cursor.fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise _DbProblem(_classify(exc), str(exc)) from None
    fires: list[FireRow] = []
    bad = 0
    for row in rows:
        keys = row.keys()
        fire_id, job_id, status = _as_str(row["id"]), _as_str(row["job_id"]), _as_str(row["status"])
        if fire_id is None or job_id is None or status is None:
            bad += 1
            continue
        pid = _as_int(row["pid"])
        fires.append(
            FireRow(
                id=fire_id,
                job_id=job_id,
                status=status,
                pid=pid if pid is not None and pid > 0 else None,
                process_started_at=(
                    _as_int(row["process_started_at"]) if "process_started_at" in keys else None
                ),
                claimed_at=_as_str(row["claimed_at"]),
                started_at=_as_str(row["started_at"]) if "started_at" in keys else None,
                finished_at=_as_str(row["finished_at"]) if "finished_at" in keys else None,
            )
        )
    return fires, bad


def _cron_sessions(state_db: Path, prefixes: Iterable[str]) -> list[str]:
    """Cron session ids in ``state_db`` starting with any of ``prefixes`` (blocking).

    A missing ``state.db`` has no sessions (no agent ever ran in that home).
    :raises _DbProblem: ``locked``, ``schema`` or ``error``.
    """
    if not state_db.is_file():
        return []
    found: list[str] = []
    try:
        conn = _connect_ro(state_db)
        try:
            for prefix in sorted(set(prefixes)):
                # Range over the primary key: [prefix, prefix + U+FFFF).
                rows = conn.execute(
                    "SELECT id FROM sessions WHERE source = 'cron' AND id >= ? AND id < ?",
                    (prefix, prefix + "\uffff"),
                ).fetchall()
                found.extend(r[0] for r in rows if isinstance(r[0], str))
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise _DbProblem(_classify(exc), str(exc)) from None
    return found


# --------------------------------------------------------------------------- the actor


class HermesStatistics(msgspec.Struct, kw_only=True):
    """Counters of :class:`HermesLedgerDiscovery` (monotonic except ``fires_tracked``, a size
    filled in by ``statistics()``): one record it keeps, copied by ``statistics()``."""

    polls: int = 0
    homes_polled: int = 0
    db_missing: int = 0
    db_locked: int = 0
    db_schema_errors: int = 0
    db_errors: int = 0
    state_db_errors: int = 0
    bad_rows: int = 0
    bad_timestamps: int = 0
    fires_tracked: int = 0
    fires_emitted: int = 0
    superseded: int = 0
    fires_forgotten: int = 0
    rejected: int = 0
    watch_errors: int = 0


@dataclass
class _HomeResult:
    home: str
    views: list[FireView] = field(default_factory=list)
    problem: str | None = None
    state_problem: bool = False
    bad_rows: int = 0
    bad_timestamps: int = 0
    sessions: dict[str, str | None] = field(default_factory=dict)  # fire -> session (lookups)


class HermesLedgerDiscovery:
    """Discovery actor for Hermes cron fires; sends :class:`~messages.LedgerFire`.

    Every ``poll_interval`` seconds (and on :meth:`poll_now`) it reads each home's
    ledger, re-probes every claimed/running fire's pid, and sends one
    ``LedgerFire`` per fire whose session, status, pid or liveness changed. The
    supervisor routes it by ``key`` to the session actor, whose reducer maps it.
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        poll_interval: float = POLL_INTERVAL_S,
        idle_poll_interval: float = IDLE_POLL_INTERVAL_S,
        watch: bool = True,
        clock: Callable[[], int] = now_ms,
        probe: Callable[[int], ProcessProbe] = probe_process,
    ) -> None:
        self._root = Path(home) if home is not None else paths.home()
        self._poll_interval = poll_interval
        self._idle_poll_interval = idle_poll_interval
        self._watch = watch
        self._wanted = anyio.Event()  # set when a notification or an owner's exit asks for a poll
        self._pidfds: dict[int, anyio.CancelScope] = {}  # live fires' pids we wait on
        self._clock = clock
        self._probe = probe
        self._lock = anyio.Lock()
        self._sent: dict[str, dict[str, Sent]] = {}  # home -> fire id -> last sent
        # Settled fire -> session lookups (a match, or no match for a terminal fire).
        self._sessions: dict[str, dict[str, str | None]] = {}
        self._stats = HermesStatistics()

    def statistics(self) -> HermesStatistics:
        """A point-in-time copy of the counters (see :class:`HermesStatistics`)."""
        return msgspec.structs.replace(
            self._stats, fires_tracked=sum(len(v) for v in self._sent.values())
        )

    async def run(self, sink: EvidenceSink) -> None:
        """Poll until cancelled: on every change of a ledger (inotify) and when the pid of a
        live fire exits (pidfd), at most once per ``poll_interval``, plus once every
        ``idle_poll_interval`` s; every ``poll_interval`` s where notifications are
        unavailable (or ``watch=False``)."""
        if self._watch and fswatch.AVAILABLE and hasattr(os, "pidfd_open"):
            try:
                await self._notified(sink)
            except OSError:
                self._stats.watch_errors += 1  # inotify refused: poll instead
        while True:
            await self.poll_now(sink)
            await anyio.sleep(self._poll_interval)

    async def _notified(self, sink: EvidenceSink) -> None:
        with fswatch.Inotify() as notify:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._poll_on_demand, sink, tg)
                while True:
                    # (Re)arm after any directory appeared or went: a new profile, a first
                    # cron/ directory, the home itself created.
                    await anyio.to_thread.run_sync(_watch_homes, notify, self._root)
                    self._wanted.set()  # what changed before the watches were in place
                    while True:
                        events = await notify.wait()
                        if any(e.is_dir or e.mask & (fswatch.IGNORED | fswatch.Q_OVERFLOW)
                               for e in events):
                            break
                        if any(e.name in _LEDGER_FILES for e in events):
                            self._wanted.set()

    async def _poll_on_demand(self, sink: EvidenceSink, tg: anyio.abc.TaskGroup) -> None:
        last = -math.inf
        while True:
            with anyio.move_on_after(self._idle_poll_interval):
                await self._wanted.wait()
            self._wanted = anyio.Event()
            pause = last + self._poll_interval - time.monotonic()
            if pause > 0:
                await anyio.sleep(pause)  # at most one poll per poll_interval
            await self.poll_now(sink)
            last = time.monotonic()
            self._follow_owners(tg)

    def _follow_owners(self, tg: anyio.abc.TaskGroup) -> None:
        """Wait on a pidfd for the pid of every live fire: its exit asks for a poll."""
        live = {
            sent.pid
            for fires in self._sent.values()
            for sent in fires.values()
            if sent.pid is not None and sent.pid_alive and sent.status in LIVE_STATUSES
        }
        for pid in self._pidfds.keys() - live:
            self._pidfds.pop(pid).cancel()
        for pid in live - self._pidfds.keys():
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                self._wanted.set()  # already gone: the next poll says so
                continue
            scope = anyio.CancelScope()
            self._pidfds[pid] = scope
            tg.start_soon(self._wait_exit, pid, fd, scope)

    async def _wait_exit(self, pid: int, fd: int, scope: anyio.CancelScope) -> None:
        try:
            with scope:
                await anyio.wait_readable(fd)
                self._wanted.set()
        finally:
            os.close(fd)
            if self._pidfds.get(pid) is scope:
                del self._pidfds[pid]

    async def poll_now(self, sink: EvidenceSink) -> None:
        """Read every home's ledger once and send what changed."""
        async with self._lock:
            results = await anyio.to_thread.run_sync(self._poll_blocking)
            observed = self._clock()
            stats = self._stats
            stats.polls += 1
            for result in results:
                stats.homes_polled += 1
                stats.bad_rows += result.bad_rows
                stats.bad_timestamps += result.bad_timestamps
                stats.state_db_errors += result.state_problem
                if result.problem is not None:
                    # Keep what we knew: an unreadable ledger proves nothing.
                    _count_problem(stats, result.problem)
                    continue
                self._sessions.setdefault(result.home, {}).update(result.sessions)
                previous = self._sent.get(result.home, {})
                memory, sends = plan_emissions(previous, result.views, observed)
                stats.fires_forgotten += len(previous.keys() - memory.keys())
                self._sent[result.home] = memory
                for _fire_id, sent in sends:
                    self._send(sink, sent, observed)

    def _send(self, sink: EvidenceSink, sent: Sent, observed: int) -> None:
        message = LedgerFire(
            key=SessionKey("hermes", sent.session_id),
            status=sent.status,
            at_ms=sent.at_ms,
            observed_at_ms=observed,
            pid=sent.pid,
            pid_alive=sent.pid_alive,
        )
        try:
            sink.inject_nowait(message)
        except MessageError:
            self._stats.rejected += 1
            return
        if sent.status == SUPERSEDED:
            self._stats.superseded += 1
        else:
            self._stats.fires_emitted += 1

    # -- worker thread

    def _poll_blocking(self) -> list[_HomeResult]:
        return [self._poll_home(home) for home in hermes_homes(self._root)]

    def _poll_home(self, home: Path) -> _HomeResult:
        result = _HomeResult(str(home))
        try:
            fires, result.bad_rows = read_fires(home / "cron" / "executions.db")
        except _DbProblem as problem:
            result.problem = problem.kind
            return result
        settled = self._sessions.get(result.home, {})
        previous = self._sent.get(result.home, {})
        unsettled = [f for f in fires if f.id not in settled and f.started_at is not None]
        found: list[str] = []
        lookup_ok = True
        if unsettled:
            try:
                found = _cron_sessions(home / "state.db", (f"cron_{f.job_id}_" for f in unsettled))
            except _DbProblem:
                result.state_problem = True
                lookup_ok = False
        probes: dict[int, ProcessProbe] = {}
        for fire in fires:
            if fire.id in settled:
                session = settled[fire.id]
            elif fire.started_at is None:
                session = None  # never started: no session was minted (yet)
            elif lookup_ok:
                session = match_session(fire, found)
                if session is not None or fire.status not in LIVE_STATUSES:
                    # A terminal fire's session row was written before it finished.
                    result.sessions[fire.id] = session
            elif fire.id in previous:
                session = _session_of(previous[fire.id], fire.id)
            else:
                continue  # state.db unreadable: decide this fire's key next poll
            alive = False
            if fire.status in LIVE_STATUSES and fire.pid is not None:
                if fire.pid not in probes:
                    probes[fire.pid] = self._probe(fire.pid)
                alive = owner_alive(fire, probes[fire.pid])
            at_ms = iso_to_ms(status_time(fire))
            if at_ms is None:
                result.bad_timestamps += 1
            result.views.append(
                FireView(
                    fire_id=fire.id,
                    session_id=session if session is not None else fallback_session_id(fire.id),
                    status=fire.status,
                    pid=fire.pid,
                    pid_alive=alive,
                    at_ms=at_ms,
                )
            )
        return result


#: The files whose changes can change what the ledgers say (the -shm index is not one: readers
#: touch it too, and it holds no rows).
_LEDGER_FILES: Final = frozenset(
    f"{db}{suffix}" for db in ("executions.db", "state.db") for suffix in ("", "-wal", "-journal")
)
# Data written, a file created, renamed into place or removed: never what a reader does.
_HOME_MASK: Final = fswatch.MODIFY | fswatch.CREATE | fswatch.MOVED_TO | fswatch.DELETE


def _watch_homes(notify: fswatch.Inotify, root: Path) -> None:
    """Worker thread: watch every home (``root``, ``root/profiles/*``), its ``cron/`` and
    ``profiles/`` directories; while ``root`` does not exist, its nearest existing ancestor.

    :raises OSError: the kernel refused a watch.
    """
    if fswatch.watch_nearest(notify, root, _HOME_MASK) != root:
        return
    notify.add(root / "profiles", fswatch.CREATE | fswatch.MOVED_TO)
    for home in hermes_homes(root):
        notify.add(home, _HOME_MASK)
        notify.add(home / "cron", _HOME_MASK)


def _session_of(sent: Sent, fire_id: str) -> str | None:
    return None if sent.session_id == fallback_session_id(fire_id) else sent.session_id


def _count_problem(stats: HermesStatistics, kind: str) -> None:
    """Count one unreadable ledger by its :class:`_DbProblem` ``kind``."""
    if kind == "missing":
        stats.db_missing += 1
    elif kind == "locked":
        stats.db_locked += 1
    elif kind == "schema":
        stats.db_schema_errors += 1
    else:
        stats.db_errors += 1
