"""Which session a pane shows, decided from the process tree: the pane mapper's pure core.

A pane is ``(pane id, root pid)`` (``PaneOpened``). The session shown in a pane is the one
owned by the *nearest* process below the root (breadth-first, the root itself first, at most
256 processes visited, docs/design.md §6) that owns a session. Ownership is learnt from
the evidence :meth:`PaneMap.observe` is fed:

========================  ===========================  =========================
evidence                  owner                        ``PaneBound.proof``
========================  ===========================  =========================
``RegistryStatus``        the Claude registry pid      ``claude_registry_pid``
``RolloutOwned`` (root)   the ``codex`` holding it     ``codex_rollout_owner``
``HookHint`` with a pid   the hook's claimed owner     ``hook_owner_pid``
``ClientAttached``        the process that shows it    its ``proof`` (``codex_daemon_mcp``)
========================  ===========================  =========================

and forgotten on ``RegistryRemoved`` / ``RolloutReleased`` (that key), ``ThreadStatus``
``closed`` (that thread) and ``ProcessGone`` (every key of that incarnation). A process that
shows a session another runs (``ClientAttached``: a Codex TUI and the thread the shared daemon
runs for it) shows the one attached last; the thread has one such client at a time (a newer
attachment elsewhere moves it), and its pane is unbound as soon as that client dies, since the
session itself lives on in the daemon: the pane shows the client's own session instead, ended
(``■ exited``). Where no owner is known, what a process proves by itself (its harness package's
binding, e.g. Codex's ``codex resume <id>`` command line) binds; a process's own session (a Codex
TUI whose thread nothing names yet) gives way, ended (``PaneUnbound.replaced``) and forgotten
(``Forget``), once the session that process shows is known.

Bindings change only on proof: a newer agent found nearer (or the only one) in the pane
rebinds it (``PaneUnbound`` old, then ``PaneBound`` new); ``PaneClosed`` unbinds. When the
agent exits and the walk finds no owner, the pane keeps showing its last session (its
activity says it is no longer running). The I/O shell is :mod:`actors.sources.pane_mapper`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final, TypeAlias, assert_never, get_args

import msgspec

import messages

if TYPE_CHECKING:
    from typing_extensions import TypeIs

__all__ = [
    "EXITED_CLIENT",
    "MAX_VISIT",
    "OBSERVED",
    "Binding",
    "ChildrenLookup",
    "BindingLookup",
    "Observed",
    "OwnedSession",
    "PaneChange",
    "PaneMap",
]

MAX_VISIT: Final = 256

ChildrenLookup = Callable[[int], Sequence[int]]
PaneChange = (
    messages.PaneBound
    | messages.PaneUnbound
    | messages.ProcessSeen
    | messages.ProcessGone
    | messages.Forget
)
#: ``PaneBound.proof`` of a pane that shows its dead client's own session again.
EXITED_CLIENT: Final = "exited_client"
#: What the pane map learns from (:meth:`PaneMap.observe`, one case each): owners and panes.
#: The pane mapper accepts exactly these (:attr:`actors.sources.pane_mapper.PaneMapper.accepts`).
Observed: TypeAlias = (
    messages.RegistryStatus
    | messages.RegistryRemoved
    | messages.RolloutOwned
    | messages.RolloutReleased
    | messages.HookHint
    | messages.ClientAttached
    | messages.ThreadStatus
    | messages.ProcessGone
    | messages.PaneOpened
    | messages.PaneClosed
)
OBSERVED: Final[tuple[type[messages.Inbound], ...]] = get_args(Observed)
_OBSERVED: Final[frozenset[type]] = frozenset(OBSERVED)


def _observed(message: messages.Inbound) -> TypeIs[Observed]:
    return type(message) in _OBSERVED


class OwnedSession(msgspec.Struct, frozen=True):
    """``pid`` (incarnation ``token``, if known) owns ``key``, proven by ``proof``;
    ``learnt`` orders owners by when the mapper learnt of them."""

    key: messages.SessionKey
    proof: str
    token: str | None = None
    learnt: int = 0
    client: bool = False  # ``pid`` shows ``key`` but does not run it (ClientAttached)


class Binding(msgspec.Struct, frozen=True):
    """``key`` is shown in a pane, proven by ``proof``; ``pid``/``token`` name the
    process for a ``codex_tui_process`` binding (the mapper announces it alive)."""

    key: messages.SessionKey
    proof: str
    pid: int | None = None
    token: str | None = None
    client: int | None = None  # the client process that shows ``key``: its death unbinds
    # The client's own session (what it proves by itself): shown, ended, when the client dies.
    itself: messages.SessionKey | None = None


#: pid -> what that process proves by itself about the session it shows, or ``None``.
BindingLookup = Callable[[int], "Binding | None"]


class PaneMap:
    """Pure state of the mapper: pane roots, the owner table and current bindings.

    Fed with :meth:`observe`; :meth:`rebind` walks the panes (with the lookups
    given) and returns the ``PaneUnbound``/``PaneBound`` messages to send.
    """

    def __init__(self, max_visit: int = MAX_VISIT) -> None:
        self.max_visit = max_visit
        self.panes: dict[str, int] = {}
        self.bindings: dict[str, Binding] = {}
        self.owners: dict[int, list[OwnedSession]] = {}
        self._owned: dict[int, set[messages.SessionKey]] = {}  # pid -> the keys in owners[pid]
        self.dirty: set[str] = set()
        self.walks = 0
        self.visited = 0
        self.truncated = 0
        self.ignored = 0
        self._learnt = 0

    # -- learning --

    def owns(self, pid: int, key: messages.SessionKey) -> bool:
        """Whether ``pid`` is known to own ``key`` (one dict lookup: a hook event of a known
        session, on the hot path, costs nothing however many sessions one pid owns)."""
        return key in self._owned.get(pid, ())

    def _index(self, pid: int) -> None:
        owned = self.owners.get(pid)
        if owned:
            self._owned[pid] = {o.key for o in owned}
        else:
            self._owned.pop(pid, None)

    def _add_owner(self, pid: int, owner: OwnedSession) -> None:
        known = self.owners.get(pid, ())
        if known and known[-1].key == owner.key and known[-1].proof == owner.proof and (
            known[-1].token == owner.token
        ):
            # The newest owner of this pid again (a status edge of a known session): nothing a
            # walk could decide differently, so no pane is walked again.
            return
        self._learnt += 1
        owner = msgspec.structs.replace(owner, learnt=self._learnt)
        owned = [o for o in self.owners.get(pid, []) if o.key != owner.key]
        if owner.client:
            # A thread has one client at a time: attaching it here detaches it elsewhere.
            for other in [p for p in self.owners if p != pid]:
                kept = [o for o in self.owners[other] if not (o.client and o.key == owner.key)]
                if len(kept) != len(self.owners[other]):
                    if kept:
                        self.owners[other] = kept
                    else:
                        del self.owners[other]
        if owner.proof == "claude_registry_pid":
            # A Claude process owns one session at a time (/clear rotates it in place).
            owned = [o for o in owned if o.proof != "claude_registry_pid"]
        owned.append(owner)
        self.owners[pid] = owned
        self._index(pid)
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
        self._index(pid)
        if len(keep) != len(owned):
            self.dirty.update(self.panes)

    def observe(self, message: messages.Inbound) -> list[PaneChange]:
        """Learn from one message; returns the binding changes it implies at once (pane
        closed, or the client that showed a session another process runs died: the pane
        shows the client's own session, ended -- a ``ProcessGone`` naming it, then its
        ``PaneBound``).

        Panes that need a new walk are collected in :attr:`dirty`. A message not of
        :data:`Observed` is counted in :attr:`ignored`.
        """
        m = message
        if not _observed(m):
            self.ignored += 1
            return []
        match m:
            case messages.RegistryStatus():
                self._add_owner(m.pid, OwnedSession(m.key, "claude_registry_pid", m.start_token))
            case messages.RolloutOwned():
                if m.root_key is None:
                    owned = OwnedSession(m.key, "codex_rollout_owner", m.start_token)
                    self._add_owner(m.pid, owned)
                else:
                    self.ignored += 1  # a child thread: its root's owner binds the pane
            case messages.HookHint():
                if m.pid is None:
                    self.ignored += 1
                elif not self.owns(m.pid, m.key):
                    self._add_owner(m.pid, OwnedSession(m.key, "hook_owner_pid", m.start_token))
            case messages.ClientAttached():
                self._add_owner(m.pid, OwnedSession(m.key, m.proof, m.start_token, client=True))
            case messages.ThreadStatus():
                if m.status != "closed":
                    self.ignored += 1
                else:
                    for pid in list(self.owners):
                        self._drop_owner(pid, m.key, None)
            case messages.RegistryRemoved() | messages.RolloutReleased():
                self._drop_owner(m.pid, m.key, None)
            case messages.ProcessGone():
                # What the dead process ran is shown by no client any more (a Codex daemon that
                # stopped: its TUIs show themselves until they reattach to a new one).
                ran = {
                    o.key
                    for o in self.owners.get(m.pid, ())
                    if not o.client and (m.start_token is None or o.token in (None, m.start_token))
                }
                self._drop_owner(m.pid, None, m.start_token)
                for pid in list(self.owners):
                    shows = pid in self.owners and any(
                        o.client and o.key in ran for o in self.owners[pid]
                    )
                    if shows:
                        for key in ran:
                            self._drop_owner(pid, key, None)
                # The session a dead client showed lives on elsewhere: that pane no longer
                # shows it, and shows the client's own session instead, ended (the agent in it
                # is gone).
                gone = [p for p, b in self.bindings.items() if b.client == m.pid]
                out: list[PaneChange] = []
                for pane in gone:
                    shown = self.bindings.pop(pane)
                    out.append(messages.PaneUnbound(key=shown.key, pane=pane, at_ms=m.at_ms))
                    if shown.itself is not None:
                        out.append(
                            messages.ProcessGone(
                                pid=m.pid,
                                start_token=m.start_token,
                                at_ms=m.at_ms,
                                observed_at_ms=m.observed_at_ms,
                                key=shown.itself,
                            )
                        )
                        self.bindings[pane] = Binding(shown.itself, EXITED_CLIENT)
                        out.append(
                            messages.PaneBound(
                                key=shown.itself, pane=pane, at_ms=m.at_ms, proof=EXITED_CLIENT
                            )
                        )
                return out
            case messages.PaneOpened():
                self.panes[m.pane] = m.root_pid
                self.dirty.add(m.pane)
            case messages.PaneClosed():
                self.panes.pop(m.pane, None)
                self.dirty.discard(m.pane)
                bound = self.bindings.pop(m.pane, None)
                if bound is not None:
                    # It happened when the host closed the pane, not when we heard of it.
                    return [messages.PaneUnbound(key=bound.key, pane=m.pane, at_ms=m.at_ms)]
            case _:
                assert_never(m)
        return []

    # -- walking --

    def walk(
        self, root: int, children: ChildrenLookup, bind: BindingLookup | None = None
    ) -> Binding | None:
        """Breadth-first below ``root`` (root first) to the nearest proven owner.

        Visits at most :attr:`max_visit` processes. Several owners at the same depth
        (an agent suspended with Ctrl-Z and a newer one): the most recently learnt
        wins. Failing an owner at a depth, what a process there proves by itself
        (``bind``, from its harness package: :func:`actors.harnesses.catalog.process_binding`)
        binds: a binding naming a session (e.g. ``codex resume <id>``) first, then one to the
        process's own session (a Codex TUI in daemon mode: presence only, turn unknown) -- and
        the walk stops there, so a shared daemon below it, which holds the rollouts of every
        thread, never lends the pane a guessed thread.
        """
        self.walks += 1
        level = [root]
        seen: set[int] = {root}
        visited = 0
        best_pid = root
        while level:
            best: OwnedSession | None = None
            named: Binding | None = None
            itself: Binding | None = None
            looked: list[int] = []
            truncated = False
            for pid in level:
                if visited >= self.max_visit:
                    self.truncated += 1
                    truncated = True
                    break
                visited += 1
                looked.append(pid)
                for owner in self.owners.get(pid, ()):
                    if best is None or owner.learnt > best.learnt:
                        best, best_pid = owner, pid
                if best is None and named is None and bind is not None:
                    found = bind(pid)
                    if found is not None:
                        if found.pid is None:
                            named = found
                        elif itself is None:
                            itself = found
            # The next level is asked for only when this one proved nothing: children are a
            # read per process, and the pane's own process is usually the owner.
            next_level: list[int] = []
            if best is None and named is None and itself is None and not truncated:
                for pid in looked:
                    for child in children(pid):
                        if child not in seen:
                            seen.add(child)
                            next_level.append(child)
            if best is not None:
                self.visited += visited
                if not best.client:
                    return Binding(best.key, best.proof)
                own = bind(best_pid) if bind is not None else None
                return Binding(
                    best.key,
                    best.proof,
                    client=best_pid,
                    itself=own.key if own is not None and own.pid == best_pid else None,
                )
            if named is not None:
                self.visited += visited
                return named
            if itself is not None:
                self.visited += visited
                return itself
            level = next_level
        self.visited += visited
        return None

    def rebind(
        self,
        children: ChildrenLookup,
        bind: BindingLookup | None,
        at_ms: int,
        panes: Iterable[str] | None = None,
    ) -> list[PaneChange]:
        """Walk the dirty panes (or ``panes``) and return the binding changes.

        A pane bound to a Codex TUI process is preceded by the ``ProcessSeen`` that
        proves that process (and so its session) alive.
        """
        todo = sorted(self.dirty if panes is None else set(panes) & set(self.panes))
        self.dirty.difference_update(todo)
        out: list[PaneChange] = []
        for pane in todo:
            found = self.walk(self.panes[pane], children, bind)
            current = self.bindings.get(pane)
            if found is None or (current is not None and current.key == found.key):
                continue  # no proof of another session: keep what the pane shows
            if current is not None:
                # A process's own session (a Codex TUI whose thread was unknown) stood only for
                # that process until something was proven in its pane: it gives way to what is
                # (the thread the TUI shows or runs itself, whichever of the pane's processes
                # the proof names). The walk shows it again (a ProcessSeen naming it) when
                # nothing else is; a record from tmux's output still on its way to it brings
                # nothing back (actors.core.session.reducer.dispatch).
                replaced = current.pid is not None
                out.append(
                    messages.PaneUnbound(
                        key=current.key, pane=pane, at_ms=at_ms, replaced=replaced
                    )
                )
                if replaced:
                    # It stood only for that process: ended, it leaves every view and the
                    # store. The process's death shows it again, anew (``ProcessGone.key``).
                    out.append(messages.Forget(current.key, at_ms))
            if found.pid is not None and found.token is not None:
                out.append(
                    messages.ProcessSeen(
                        pid=found.pid,
                        start_token=found.token,
                        at_ms=at_ms,
                        observed_at_ms=at_ms,
                        key=found.key,
                    )
                )
            self.bindings[pane] = found
            out.append(messages.PaneBound(key=found.key, pane=pane, at_ms=at_ms, proof=found.proof))
        return out
