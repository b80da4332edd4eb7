"""What the reducer knows about one session: :class:`SessionState`, and the states it starts
from (:func:`initial_state`, :func:`from_activity`, :func:`restored`).

A frozen msgspec Struct, so that a crashed actor restarts from exactly its last state and the
store keeps it whole (:mod:`actors.sinks.store`).
"""

from __future__ import annotations

import msgspec

from messages.activity import Activity
from messages.common import Attention, ExitInfo, Presence, SessionKey, Source, Turn

__all__ = ["SessionState", "from_activity", "initial_state", "restored"]


class SessionState(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Everything the reducer knows about one session. Internal, never published."""

    key: SessionKey
    known: bool = False  # some evidence claimed something: the session is shown
    presence: Presence = "persisted"
    turn: Turn = "unknown"
    # Evidence of the current state (docs/design.md §1).
    source: Source = "persisted_store"
    native: str | None = None
    version: str | None = None
    evidence_at_ms: int | None = None
    observed_at_ms: int | None = None
    pane: str | None = None
    focused: bool = False
    # Ended and seen there (focused or acknowledged, :mod:`actors.core.session.reducer.dispatch`):
    # the pane shows it no more (published pane ``None``), though it stays bound to it until a live
    # claim or a new binding.
    left_pane: bool = False
    exit: ExitInfo | None = None
    # Owner incarnation; a host-owned session takes presence from the host only.
    owner_pid: int | None = None
    owner_token: str | None = None
    host_owned: bool = False
    ended_at_ms: int = 0  # presence claims at or before this are from the dead
    # Turn ordering: newest applied turn evidence, and recent fingerprints.
    turn_at_ms: int = 0
    # Hashes of recent evidence records (a 64-bit hash: a collision would need
    # 2**32 records, the window holds 32; the hash is per process, never persisted).
    recent: tuple[int, ...] = ()
    # Attention that is not derived from the turn.
    needs_reason: str = ""
    needs_since_ms: int = 0
    # The open wait: the time of the turn claim it followed (a needs_input claim older than the
    # newest one but newer than this is the same wait), and of the claim its reason came from.
    needs_after_ms: int = 0
    needs_reason_at_ms: int = 0
    failed: Attention | None = None
    done: Attention | None = None
    # Claude specifics.
    hooks_seen: bool = False
    has_registry: bool = False
    prompt_id: str | None = None
    completed: tuple[str, ...] = ()  # prompt/turn ids whose completion was seen
    permission_prompts: tuple[str, ...] = ()
    interrupted: str | None = None  # id of the turn an idle edge ended without its completion
    registry_busy: bool = False  # the newest registry word is `busy`
    # Codex specifics.
    has_rollout: bool = False
    children: tuple[tuple[str, Turn, int], ...] = ()  # (child thread, turn, at_ms)
    # OSC 7501 program status: a `working` not yet closed by `done`.
    pty_working: bool = False
    subagents: frozenset[str] = frozenset()
    # Work that outlives the turn: the in-flight background work the harness listed (Claude
    # `background_tasks`), and a completion waiting for the background work to end.
    background: frozenset[str] = frozenset()
    background_listed: bool = False  # the harness lists its background work (Claude 2.1.332)
    deferred: Attention | None = None
    activity: Activity | None = None  # the last published activity


def initial_state(key: SessionKey) -> SessionState:
    """A fresh state for ``key``: nothing known yet."""
    return SessionState(key=key)


def from_activity(activity: Activity) -> SessionState:
    """A state rebuilt from a published activity alone.

    Only for store rows written before the store kept whole states (schema < 3): the reducer's
    own memory (hooks seen, the prompt id, children, ...) is not in an activity.
    """
    attention = activity.attention
    return SessionState(
        key=activity.key,
        known=True,
        presence=activity.presence,
        turn=activity.turn,
        source=activity.evidence.source,
        native=activity.evidence.native_state,
        version=activity.evidence.harness_version,
        evidence_at_ms=activity.evidence.at_ms,
        observed_at_ms=activity.evidence.observed_at_ms,
        pane=activity.pane,
        exit=activity.exit,
        needs_reason=attention.reason if attention and attention.kind == "needs_input" else "",
        needs_since_ms=attention.since_ms if attention and attention.kind == "needs_input" else 0,
        failed=attention if attention and attention.kind == "failed" else None,
        done=attention if attention and attention.kind == "turn_done" else None,
        activity=activity,
    )


def restored(state: SessionState) -> SessionState:
    """A state read back from the store, made fit for this process.

    The duplicate fingerprints are per-process hashes (never valid in another process) and no
    pane is known to be focused until the host says so.
    """
    return msgspec.structs.replace(state, recent=(), focused=False)
