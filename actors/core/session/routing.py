"""Routing: which sessions an inbound message concerns (pure, no I/O).

Used by the supervisor (to pick session actors) and by :class:`SessionTable`
(the synchronous reference model used in replay and property tests), so both
route identically. Session-scoped messages go to their key; pid-scoped ones to
the sessions that pid owns; pane-scoped ones to the sessions bound to the pane.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeAlias, TypeVar, assert_never, get_args

import msgspec

if TYPE_CHECKING:
    from typing_extensions import TypeIs

from actors.core.session.reducer import SessionMessage, SessionState
from messages.codec import Inbound
from messages.common import SessionKey
from messages.control import (
    Acknowledge,
    Forget,
    HostSignal,
    PaneBound,
    PaneClosed,
    PaneFocused,
    PaneOpened,
    PaneUnbound,
)
from messages.evidence import (
    ClientAttached,
    HookHint,
    LedgerFire,
    LifecycleBoundary,
    NotifyHook,
    ProcessGone,
    ProcessSeen,
    ProgramStatus,
    PtyExit,
    PtySpawned,
    RegistryRemoved,
    RegistryStatus,
    RolloutOwned,
    RolloutReleased,
    ThreadStatus,
)

__all__ = ["Delivery", "RoutingIndex"]


class Delivery(msgspec.Struct, frozen=True, gc=False):
    """One message for one session; ``spawn`` says whether it may create the session.

    A Struct rather than a frozen dataclass: one is made per routed message, and a frozen
    dataclass's ``__init__`` (``object.__setattr__`` per field) costs ten times as much.
    """

    key: SessionKey
    message: SessionMessage
    spawn: bool


@dataclass
class RoutingIndex:
    """Who owns which pid, which sessions each pane shows, which pane has focus.

    Kept up to date from session states by :meth:`update`; plain mutable data. The focused
    pane is the one named by the last :class:`PaneFocused`; a session that binds to it
    (:class:`PaneBound`) is told at once.
    """

    owners: dict[int, set[SessionKey]] = field(default_factory=dict)
    panes: dict[str, set[SessionKey]] = field(default_factory=dict)
    focused_pane: str | None = None

    def update(self, old: SessionState | None, new: SessionState) -> None:
        """Re-index one session after a step (owner pid and pane may have moved)."""
        key = new.key
        old_pid = old.owner_pid if old is not None else None
        if old_pid != new.owner_pid:
            if old_pid is not None:
                _discard(self.owners, old_pid, key)
            if new.owner_pid is not None:
                self.owners.setdefault(new.owner_pid, set()).add(key)
        old_pane = old.pane if old is not None else None
        if old_pane != new.pane:
            if old_pane is not None:
                _discard(self.panes, old_pane, key)
            if new.pane is not None:
                self.panes.setdefault(new.pane, set()).add(key)

    def forget(self, state: SessionState) -> None:
        """Drop a retired session from the index."""
        if state.owner_pid is not None:
            _discard(self.owners, state.owner_pid, state.key)
        if state.pane is not None:
            _discard(self.panes, state.pane, state.key)

    def route(self, message: Inbound) -> list[Delivery]:
        """:meth:`deliveries` as a list; a message for its own key alone (the hot path: hook
        hints, registry and rollout evidence) without the generator and the type match."""
        if _own_key(message) and type(message) is not PaneBound:
            return [Delivery(message.key, message, True)]
        return list(self.deliveries(message))

    def deliveries(self, message: Inbound) -> Iterator[Delivery]:
        """The (session, message) pairs ``message`` turns into, in a stable order.

        ``message`` must already be normalized (no :class:`NotifyHook`). Every type of the
        inbound union has a case here: one without is a type error (``assert_never``), and
        raises ``AssertionError`` if it reaches here anyway, rather than going nowhere.
        """
        if _own_key(message):
            yield Delivery(message.key, message, True)
            if isinstance(message, PaneBound) and message.pane == self.focused_pane:
                # Bound to the pane the user already looks at: no focus change will come to
                # tell the session, so it is told now (after the binding, which it needs).
                yield Delivery(message.key, PaneFocused(message.pane, message.at_ms), False)
            return
        match message:
            case PaneUnbound() | Forget():
                yield Delivery(message.key, message, False)
            case LifecycleBoundary() | ThreadStatus():
                yield Delivery(message.key, message, True)
                if message.root_key is not None and message.root_key != message.key:
                    yield Delivery(message.root_key, message, True)
            case ProcessSeen() | ProcessGone():
                claimed = message.key
                if claimed is not None:
                    yield Delivery(claimed, message, True)
                for key in _sorted(self.owners.get(message.pid)):
                    if key != claimed:
                        yield Delivery(key, message, False)
            case PtyExit() | ProgramStatus() | Acknowledge():
                if message.key is not None:
                    yield Delivery(message.key, message, isinstance(message, ProgramStatus))
                elif message.pane is not None:
                    for key in _sorted(self.panes.get(message.pane)):
                        yield Delivery(key, message, False)
            case PaneFocused():
                previous, self.focused_pane = self.focused_pane, message.pane
                targets = set(self.panes.get(message.pane, ()))
                if previous is not None and previous != message.pane:
                    targets |= self.panes.get(previous, set())
                for key in _sorted(targets):
                    yield Delivery(key, message, False)
            case PaneClosed():
                # Without a pane mapper the host's close still unbinds what the pane showed.
                if self.focused_pane == message.pane:
                    self.focused_pane = None
                for key in _sorted(self.panes.get(message.pane)):
                    unbound = PaneUnbound(key=key, pane=message.pane, at_ms=message.at_ms)
                    yield Delivery(key, unbound, False)
            case PaneOpened() | NotifyHook() | ClientAttached():
                return  # for the listeners (pane mapper, pid watcher) only
            case _:
                assert_never(message)


#: The messages that concern exactly their own ``key`` and may create its session.
OwnKeyed: TypeAlias = (
    RegistryStatus
    | RegistryRemoved
    | RolloutOwned
    | RolloutReleased
    | HookHint
    | LedgerFire
    | PtySpawned
    | PaneBound
    | HostSignal
)
_OWN_KEY: Final[frozenset[type]] = frozenset(get_args(OwnKeyed))


def _own_key(message: Inbound) -> TypeIs[OwnKeyed]:
    """Whether ``message`` concerns exactly its own key (narrows both ways for the checker)."""
    return type(message) in _OWN_KEY


def _sorted(keys: set[SessionKey] | None) -> list[SessionKey]:
    if not keys:
        return []
    return sorted(keys, key=lambda k: (k.harness, k.session_id))


_Slot = TypeVar("_Slot", int, str)


def _discard(table: dict[_Slot, set[SessionKey]], slot: _Slot, key: SessionKey) -> None:
    keys = table.get(slot)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del table[slot]
