"""A synchronous table of sessions: the tests' reference model of the whole system.

:class:`SessionTable` applies inbound messages to every session they concern,
exactly as the supervisor does (same normalization, routing and reducer), but in
one call stack with no actors. Replay tests, property tests and benchmarks use
it; the supervisor's own tests check that it publishes the same transitions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from actors.core.session.causes import cause_of
from actors.core.session.harness import ProofTable
from actors.core.session.reducer import SessionState, initial_state, reduce
from actors.core.session.routing import RoutingIndex
from messages.activity import Activity, Transition, Unmapped
from messages.codec import Inbound
from messages.common import SessionKey

__all__ = ["SessionTable"]


@dataclass
class SessionTable:
    """Every session's reducer state plus the global transition ``seq``.

    ``normalize`` is the edge normalization the supervisor applies (pass
    :func:`actors.harnesses.catalog.normalize`); ``proof_table`` what each harness can prove, as
    the supervisor's reducer is handed it (pass :data:`actors.harnesses.catalog.PROOF_TABLE`).
    """

    normalize: Callable[[Inbound], Inbound | Unmapped]
    proof_table: ProofTable | None = None
    states: dict[SessionKey, SessionState] = field(default_factory=dict)
    index: RoutingIndex = field(default_factory=RoutingIndex)
    seq: int = 0
    unmapped: list[Unmapped] = field(default_factory=list)
    ignored: dict[str, int] = field(default_factory=dict)

    def apply(self, message: Inbound) -> list[Transition]:
        """Apply one inbound message; return the transitions it published, in order."""
        normalized = self.normalize(message)
        if isinstance(normalized, Unmapped):
            self.unmapped.append(normalized)
            return []
        published: list[Transition] = []
        for delivery in self.index.deliveries(normalized):
            state = self.states.get(delivery.key)
            if state is None:
                if not delivery.spawn:
                    continue
                state = initial_state(delivery.key)
            before = state.activity
            step = reduce(state, delivery.message, self.proof_table)
            self.states[delivery.key] = step.state
            self.index.update(state, step.state)
            if step.ignored is not None:
                self.ignored[step.ignored] = self.ignored.get(step.ignored, 0) + 1
            if step.publish is not None:
                self.seq += 1
                transition = Transition(
                    seq=self.seq,
                    key=delivery.key,
                    after=step.publish,
                    cause=cause_of(delivery.message),
                    before=before,
                )
                published.append(transition)
                if transition.forgets:
                    # As the supervisor does: gone, and a later session of the key starts anew.
                    del self.states[delivery.key]
                    self.index.forget(step.state)
        return published

    def activity(self, key: SessionKey) -> Activity | None:
        """The last published activity of ``key``."""
        state = self.states.get(key)
        return state.activity if state is not None else None

