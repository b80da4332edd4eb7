"""The pane mapper: which session runs in which pane, proven from the process tree.

A pane is ``(pane id, root pid)`` (``PaneOpened``). The session shown in a pane is
the one owned by the *nearest* process below the root (breadth-first, the root
itself first, at most 256 processes visited, DESIGN §6, behaviour 19) that owns a
session. Ownership is learnt from the evidence the mapper is fed:

========================  ===========================  =========================
evidence                  owner                        ``PaneBound.proof``
========================  ===========================  =========================
``RegistryStatus``        the Claude registry pid      ``claude_registry_pid``
``RolloutOwned`` (root)   the ``codex`` holding it     ``codex_rollout_owner``
``HookHint`` with a pid   the hook's claimed owner     ``hook_owner_pid``
========================  ===========================  =========================

and forgotten on ``RegistryRemoved`` / ``RolloutReleased`` (that key) and
``ProcessGone`` (every key of that incarnation). A Codex TUI in daemon mode owns
no rollout and nothing on disk names its thread: it is bound only by real proof,
``codex resume <thread-id>`` on the command line of a process named ``codex``
(proof ``codex_resume_argv``); otherwise it is not bound (never a guessed thread).

Bindings change only on proof: a newer agent found nearer (or the only one) in
the pane rebinds it (``PaneUnbound`` old, then ``PaneBound`` new); ``PaneClosed``
unbinds. When the agent exits and the walk finds no owner, the pane keeps showing
its last session (its activity says it is no longer running).

:class:`PaneMap` is the pure core (the walk takes a children lookup function);
:class:`PaneMapper` the actor: fed by the supervisor on a bounded mailbox, it reads
the process tree in a worker thread and sends ``PaneBound`` / ``PaneUnbound`` to
the sink, which the supervisor routes to the sessions named.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

import messages
from actors.runtime.mailbox import EvidenceSink
from actors.sources import procfs
from messages.common import MAX_ID_LEN

__all__ = [
    "MAX_VISIT",
    "Binding",
    "EvidenceSink",
    "Owner",
    "PaneMap",
    "PaneMapper",
    "PaneMapperStatistics",
    "codex_resume_thread",
]

MAX_VISIT = 256

ChildrenLookup = Callable[[int], Sequence[int]]
# pid -> its start token (field 22 of /proc/<pid>/stat), or None if it is gone
TokenLookup = Callable[[int], "str | None"]
PaneChange = messages.PaneBound | messages.PaneUnbound | messages.ProcessSeen
# pid -> (comm, argv) when the walk needs it (only for the codex argv proof), or None
DescribeLookup = Callable[[int], "tuple[str, Sequence[str]] | None"]


class Owner(msgspec.Struct, frozen=True):
    """``pid`` (incarnation ``token``, if known) owns ``key``, proven by ``proof``;
    ``learnt`` orders owners by when the mapper learnt of them."""

    key: messages.SessionKey
    proof: str
    token: str | None = None
    learnt: int = 0


class Binding(msgspec.Struct, frozen=True):
    """``key`` is shown in a pane, proven by ``proof``; ``pid``/``token`` name the
    process for a ``codex_tui_process`` binding (the mapper announces it alive)."""

    key: messages.SessionKey
    proof: str
    pid: int | None = None
    token: str | None = None


def is_codex_tui(comm: str, argv: Sequence[str]) -> bool:
    """A Codex TUI: named exactly ``codex``, not the shared ``app-server`` daemon (nor
    its pid-update loop) and not ``codex exec``. Pure."""
    return comm == "codex" and "app-server" not in argv[1:] and "exec" not in argv[1:2]


def codex_tui_key(pid: int, token: str) -> messages.SessionKey:
    """The session of a Codex TUI process whose thread is unknown (daemon mode)."""
    return messages.SessionKey("codex", f"tui-{pid}-{token}")


def codex_resume_thread(comm: str, argv: Sequence[str]) -> str | None:
    """The thread id of ``codex [options] resume [options] <id>``, else ``None``. Pure.

    Only a process named exactly ``codex``; ``resume --last`` / a bare ``resume``
    name no thread and prove nothing.
    """
    if comm != "codex" or len(argv) < 2:
        return None
    args = list(argv[1:])
    if "resume" not in args:
        return None
    for arg in args[args.index("resume") + 1 :]:
        if arg == "--":
            continue
        if arg.startswith("-"):
            return None  # an option (e.g. --last) before any id: no thread named
        return arg if 1 <= len(arg) <= MAX_ID_LEN else None
    return None


class PaneMap:
    """Pure state of the mapper: pane roots, the owner table and current bindings.

    Fed with :meth:`observe`; :meth:`rebind` walks the panes (with the lookups
    given) and returns the ``PaneUnbound``/``PaneBound`` messages to send.
    """

    def __init__(self, max_visit: int = MAX_VISIT) -> None:
        self.max_visit = max_visit
        self.panes: dict[str, int] = {}
        self.bindings: dict[str, Binding] = {}
        self.owners: dict[int, list[Owner]] = {}
        self.dirty: set[str] = set()
        self.walks = 0
        self.visited = 0
        self.truncated = 0
        self.ignored = 0
        self._learnt = 0

    # -- learning --

    def _add_owner(self, pid: int, owner: Owner) -> None:
        self._learnt += 1
        owner = msgspec.structs.replace(owner, learnt=self._learnt)
        owned = [o for o in self.owners.get(pid, []) if o.key != owner.key]
        if owner.proof == "claude_registry_pid":
            # A Claude process owns one session at a time (/clear rotates it in place).
            owned = [o for o in owned if o.proof != "claude_registry_pid"]
        owned.append(owner)
        self.owners[pid] = owned
        self.dirty.update(self.panes)

    def _drop_owner(self, pid: int, key: messages.SessionKey | None, token: str | None) -> None:
        owned = self.owners.get(pid)
        if not owned:
            return
        keep = [
            o
            for o in owned
            if not (
                (key is None or o.key == key)
                and (token is None or o.token is None or o.token == token)
            )
        ]
        if keep:
            self.owners[pid] = keep
        else:
            del self.owners[pid]
        if len(keep) != len(owned):
            self.dirty.update(self.panes)

    def observe(self, message: messages.Inbound) -> list[messages.PaneUnbound]:
        """Learn from one message; returns the unbinds it implies at once (pane closed).

        Panes that need a new walk are collected in :attr:`dirty`.
        """
        m = message
        if isinstance(m, messages.RegistryStatus):
            self._add_owner(m.pid, Owner(m.key, "claude_registry_pid", m.start_token))
        elif isinstance(m, messages.RolloutOwned):
            if m.root_key is None:
                self._add_owner(m.pid, Owner(m.key, "codex_rollout_owner", m.start_token))
            else:
                self.ignored += 1  # a child thread: its root's owner binds the pane
        elif isinstance(m, messages.HookHint):
            if m.pid is None:
                self.ignored += 1
            elif not any(o.key == m.key for o in self.owners.get(m.pid, [])):
                self._add_owner(m.pid, Owner(m.key, "hook_owner_pid", m.start_token))
        elif isinstance(m, messages.RegistryRemoved | messages.RolloutReleased):
            self._drop_owner(m.pid, m.key, None)
        elif isinstance(m, messages.ProcessGone):
            self._drop_owner(m.pid, None, m.start_token)
        elif isinstance(m, messages.PaneOpened):
            self.panes[m.pane] = m.root_pid
            self.dirty.add(m.pane)
        elif isinstance(m, messages.PaneClosed):
            self.panes.pop(m.pane, None)
            self.dirty.discard(m.pane)
            bound = self.bindings.pop(m.pane, None)
            if bound is not None:
                # It happened when the host closed the pane, not when we heard of it.
                return [messages.PaneUnbound(key=bound.key, pane=m.pane, at_ms=m.at_ms)]
        else:
            self.ignored += 1
        return []

    # -- walking --

    def walk(
        self,
        root: int,
        children: ChildrenLookup,
        describe: DescribeLookup | None = None,
        token_of: TokenLookup | None = None,
    ) -> Binding | None:
        """Breadth-first below ``root`` (root first) to the nearest proven owner.

        Visits at most :attr:`max_visit` processes. Several owners at the same depth
        (an agent suspended with Ctrl-Z and a newer one): the most recently learnt
        wins; a ``codex resume`` command line counts only where no owner is known at
        that depth; failing both, a Codex TUI process (with ``token_of``) binds the
        pane to that process's own session (presence only, turn unknown) -- and the
        walk stops there, so the shared ``app-server`` daemon below it, which holds
        the rollouts of every thread, never lends the pane a guessed thread.
        """
        self.walks += 1
        level = [root]
        seen: set[int] = {root}
        visited = 0
        while level:
            best: Owner | None = None
            argv_proof: Binding | None = None
            tui: Binding | None = None
            next_level: list[int] = []
            for pid in level:
                if visited >= self.max_visit:
                    self.truncated += 1
                    next_level = []
                    break
                visited += 1
                for owner in self.owners.get(pid, ()):
                    if best is None or owner.learnt > best.learnt:
                        best = owner
                if best is None and argv_proof is None and describe is not None:
                    described = describe(pid)
                    thread = None if described is None else codex_resume_thread(*described)
                    if thread is not None:
                        key = messages.SessionKey("codex", thread)
                        argv_proof = Binding(key, "codex_resume_argv")
                    elif (
                        tui is None
                        and described is not None
                        and token_of is not None
                        and is_codex_tui(*described)
                    ):
                        token = token_of(pid)
                        if token is not None:
                            tui = Binding(
                                codex_tui_key(pid, token), "codex_tui_process", pid, token
                            )
                for child in children(pid):
                    if child not in seen:
                        seen.add(child)
                        next_level.append(child)
            if best is not None:
                self.visited += visited
                return Binding(best.key, best.proof)
            if argv_proof is not None:
                self.visited += visited
                return argv_proof
            if tui is not None:
                self.visited += visited
                return tui
            level = next_level
        self.visited += visited
        return None

    def rebind(
        self,
        children: ChildrenLookup,
        describe: DescribeLookup | None,
        at_ms: int,
        panes: Iterable[str] | None = None,
        token_of: TokenLookup | None = None,
    ) -> list[PaneChange]:
        """Walk the dirty panes (or ``panes``) and return the binding changes.

        A pane bound to a Codex TUI process is preceded by the ``ProcessSeen`` that
        proves that process (and so its session) alive.
        """
        todo = sorted(self.dirty if panes is None else set(panes) & set(self.panes))
        self.dirty.difference_update(todo)
        out: list[PaneChange] = []
        for pane in todo:
            found = self.walk(self.panes[pane], children, describe, token_of)
            current = self.bindings.get(pane)
            if found is None or (current is not None and current.key == found.key):
                continue  # no proof of another session: keep what the pane shows
            if current is not None:
                out.append(messages.PaneUnbound(key=current.key, pane=pane, at_ms=at_ms))
            if found.pid is not None and found.token is not None:
                out.append(
                    messages.ProcessSeen(found.pid, found.token, at_ms, at_ms, key=found.key)
                )
            self.bindings[pane] = found
            out.append(messages.PaneBound(key=found.key, pane=pane, at_ms=at_ms, proof=found.proof))
        return out


# ---------------------------------------------------------------- the actor


class PaneMapperStatistics(msgspec.Struct, frozen=True):
    """Counters of the pane mapper (monotonic except the sizes)."""

    panes: int
    bound: int
    owners: int
    received: int
    ignored: int
    mailbox_overflow: int
    tree_reads: int
    walks: int
    visited: int
    truncated_walks: int
    bound_sent: int
    unbound_sent: int
    sink_rejected: int


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _TreeReader:
    """Worker thread: one process-table snapshot, cmdlines read only when the walk asks."""

    def __init__(self) -> None:
        table = procfs.scan_processes()
        self.comm = {p.pid: p.comm for p in table}
        self.tokens = {p.pid: p.start_token for p in table}
        self.children = procfs.children_map(table)

    def kids(self, pid: int) -> Sequence[int]:
        return self.children.get(pid, ())

    def describe(self, pid: int) -> tuple[str, Sequence[str]] | None:
        comm = self.comm.get(pid)
        if comm != "codex":
            return None  # only a codex command line can be a proof; skip the read
        argv = procfs.read_cmdline(pid)
        return None if argv is None else (comm, argv)


class PaneMapper:
    """Actor: maps panes to sessions. Fed by the supervisor (and the host / tmux actor)
    with evidence and pane messages via :meth:`send_nowait` / :meth:`send`; sends
    ``PaneBound`` / ``PaneUnbound`` to the sink.

    ``rescan_interval`` re-walks every pane periodically (default 5 s) for what no
    message announces, e.g. a ``codex resume <id>`` TUI started in a pane; ``None``
    disables it.
    """

    def __init__(
        self,
        *,
        mailbox_size: int = 1024,
        max_visit: int = MAX_VISIT,
        rescan_interval: float | None = 5.0,
    ) -> None:
        if rescan_interval is not None and rescan_interval <= 0:
            raise ValueError(f"rescan_interval must be positive or None, got {rescan_interval!r}")
        self._map = PaneMap(max_visit)
        self._rescan_interval = rescan_interval
        send, receive = anyio.create_memory_object_stream[messages.Inbound](mailbox_size)
        self._send_stream: MemoryObjectSendStream[messages.Inbound] = send
        self._receive: MemoryObjectReceiveStream[messages.Inbound] = receive
        self._received = 0
        self._overflow = 0
        self._tree_reads = 0
        self._bound_sent = 0
        self._unbound_sent = 0
        self._sink_rejected = 0
        self._idle: anyio.Event | None = None
        self._busy = False

    def send_nowait(self, message: messages.Inbound) -> None:
        """Queue a message without blocking.

        :raises anyio.WouldBlock: when the mailbox is full (counted as overflow).
        """
        try:
            self._send_stream.send_nowait(message)
        except anyio.WouldBlock:
            self._overflow += 1
            raise

    def close(self) -> None:
        """Close the mailbox (done by :meth:`run` when it ends); later sends raise
        ``anyio.ClosedResourceError``."""
        self._send_stream.close()
        self._receive.close()

    async def send(self, message: messages.Inbound) -> None:
        """Queue a message, waiting for room in the mailbox."""
        await self._send_stream.send(message)

    def statistics(self) -> PaneMapperStatistics:
        m = self._map
        return PaneMapperStatistics(
            panes=len(m.panes),
            bound=len(m.bindings),
            owners=sum(len(v) for v in m.owners.values()),
            received=self._received,
            ignored=m.ignored,
            mailbox_overflow=self._overflow,
            tree_reads=self._tree_reads,
            walks=m.walks,
            visited=m.visited,
            truncated_walks=m.truncated,
            bound_sent=self._bound_sent,
            unbound_sent=self._unbound_sent,
            sink_rejected=self._sink_rejected,
        )

    def bindings(self) -> dict[str, messages.SessionKey]:
        """The current pane -> session bindings (a copy)."""
        return {pane: b.key for pane, b in self._map.bindings.items()}

    async def wait_idle(self) -> None:
        """Wait until every queued message has been handled (tests, benchmarks)."""
        while self._receive.statistics().current_buffer_used or self._busy:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    async def run(self, sink: EvidenceSink) -> None:
        """Handle mailbox batches until cancelled."""
        try:
            await self._run(sink)
        finally:
            self.close()

    async def _run(self, sink: EvidenceSink) -> None:
        interval = math.inf if self._rescan_interval is None else self._rescan_interval
        while True:
            batch: list[messages.Inbound] = []
            with anyio.move_on_after(interval):
                batch.append(await self._receive.receive())
            self._busy = True
            try:
                while True:
                    try:
                        batch.append(self._receive.receive_nowait())
                    except anyio.WouldBlock:
                        break
                await self._handle(batch, sink, rescan=not batch)
            finally:
                self._busy = False
                if self._idle is not None and not self._receive.statistics().current_buffer_used:
                    self._idle.set()
                    self._idle = None

    async def _handle(
        self, batch: list[messages.Inbound], sink: EvidenceSink, rescan: bool
    ) -> None:
        now = _now_ms()
        out: list[PaneChange] = []
        for message in batch:
            self._received += 1
            out.extend(self._map.observe(message))
        if rescan:
            self._map.dirty.update(self._map.panes)
        if self._map.dirty:
            tree = await anyio.to_thread.run_sync(self._walk_dirty, now)
            out.extend(tree)
        for message in out:
            try:
                sink.inject_nowait(message)
            except messages.PanewardError:  # invalid, or a full session mailbox
                self._sink_rejected += 1
                continue
            if isinstance(message, messages.PaneBound):
                self._bound_sent += 1
            elif isinstance(message, messages.PaneUnbound):
                self._unbound_sent += 1

    def _walk_dirty(self, now: int) -> list[PaneChange]:
        # Worker thread. The actor task awaits this call, so nothing else touches the
        # map meanwhile (messages wait in the mailbox).
        reader = _TreeReader()
        self._tree_reads += 1
        return self._map.rebind(reader.kids, reader.describe, now, token_of=reader.tokens.get)
