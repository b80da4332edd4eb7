"""The session state machine: a pure reducer over one session's evidence.

``reduce(state, message) -> Step`` implements every rule of docs/design.md §4. It does no
I/O and imports no async library, so it is tested exhaustively without an event
loop; :mod:`actors.runtime.session` is the thin actor around it. The state is a frozen
msgspec Struct so that a crashed actor restarts from exactly its last state.

Vocabulary: a *claim* is what one message says about presence or turn; the
*published* activity is derived from the state by :func:`derive` and is only
published when its visible fields changed (docs/design.md §4, Publishing).

This module is the ONLY place that decides a published field. Besides :func:`reduce` it holds
every other decision about what is shown: :func:`crashed` (an actor stopped after repeated
crashes: attention ``failed``), :func:`reprove` (a state restored after a restart, re-proven
against its owner's live start token), :func:`settled` (ended with nothing to act on: the actor
may retire, the table may hide it, the store may forget it), :data:`ATTENTION_PRIORITY`, and
:func:`pane_rank` (which session a pane shows when several are bound to it; :func:`pane_winners`
and :func:`pane_views` apply it). Sinks render an ``Activity``; they never re-decide it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Final

import msgspec

from actors.core.hints import blocked_reason, reason_detail
from messages.activity import Activity, PaneView
from messages.codec import SessionMessage
from messages.common import (
    Attention,
    AttentionKind,
    Evidence,
    ExitInfo,
    Presence,
    SessionKey,
    Source,
    Turn,
)
from messages.control import (
    Acknowledge,
    Forget,
    HostSignal,
    PaneBound,
    PaneFocused,
    PaneUnbound,
)
from messages.evidence import (
    HookHint,
    LedgerFire,
    LifecycleBoundary,
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

if TYPE_CHECKING:
    from actors.core.harness import ProofTable

__all__ = [
    "ATTENTION_PRIORITY",
    "ENDED_SHOWN_MS",
    "ENDED_RETENTION_MS",
    "REPLACED",
    "UNLIMITED_SOURCES",
    "Reproof",
    "SessionMessage",
    "SessionState",
    "Step",
    "attention_order",
    "attention_rank",
    "background_items",
    "crashed",
    "derive",
    "from_activity",
    "hidden_after",
    "initial_state",
    "pane_rank",
    "pane_views",
    "pane_winners",
    "reduce",
    "reprove",
    "restored",
    "retirable",
    "settled",
]

#: Attention kinds, most urgent first (docs/design.md §4): the one priority derive, badges, the
#: status table and the attention queue all use.
ATTENTION_PRIORITY: Final[tuple[AttentionKind, ...]] = ("needs_input", "failed", "turn_done")
_ATTENTION_RANK: Final[dict[str, int]] = {
    kind: len(ATTENTION_PRIORITY) - i for i, kind in enumerate(ATTENTION_PRIORITY)
}
#: A settled session (ended, nothing to act on) leaves the ``paneward status`` table after a day
#: (``--all`` lists it) ...
ENDED_SHOWN_MS: Final = 24 * 3600 * 1000
#: ... and the store forgets it after a week (deleted at load rather than restored).
ENDED_RETENTION_MS: Final = 7 * 24 * 3600 * 1000
#: The native word of a session that gave way to the session its process shows
#: (``PaneUnbound.replaced``; the pane mapper then forgets it).
REPLACED: Final = "replaced"

# How many recent fingerprints / completed turn ids a session remembers. Small and
# bounded: memory follows live sessions, not history.
_RECENT: Final = 32
_COMPLETED: Final = 16

_STATE_WORD_SOURCES: Final = frozenset(
    {"claude_registry", "pty_status", "hermes_executions", "codex_daemon"}
)
#: Evidence that is no harness's own -- process identity, the host's PTY and signals, paneward's
#: own store and supervision -- proves the same for every harness: what a harness declares it
#: can prove (``reduce(..., proof_table=...)``) never limits these.
UNLIMITED_SOURCES: Final = frozenset(
    {"pid_probe", "pty_host", "host", "persisted_store", "supervisor", "pane_mapper"}
)
_RANK: Final[dict[str, int]] = {"unknown": 0, "idle": 1, "working": 2, "needs_input": 3}


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
    # Ended and seen there (:func:`_seen_ended`): the pane shows it no more (published pane
    # ``None``), though it stays bound to it until a live claim or a new binding.
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


class Step(msgspec.Struct, frozen=True, gc=False):
    """The result of one :func:`reduce`: the new state and what to publish.

    ``publish`` is the new activity when its visible fields changed, else None.
    ``ignored`` names why a message changed nothing (stale, duplicate, ...).
    """

    state: SessionState
    publish: Activity | None = None
    ignored: str | None = None


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


def settled(activity: Activity) -> bool:
    """Ended (no live owner proven) with nothing for the user to act on.

    The one rule for "ended": a settled session's actor retires, the status table hides it
    after :data:`ENDED_SHOWN_MS`, the store forgets it after :data:`ENDED_RETENTION_MS`. A
    ``failed`` or ``turn_done`` nobody acknowledged keeps a session unsettled.
    """
    return activity.presence == "persisted" and activity.attention is None


def retirable(state: SessionState) -> bool:
    """True when the session's actor may stop: :func:`settled` (the same rule, on the state)."""
    return state.presence == "persisted" and state.done is None and state.failed is None


def attention_rank(kind: AttentionKind | None) -> int:
    """Higher is more urgent (:data:`ATTENTION_PRIORITY`); 0 for no attention."""
    return 0 if kind is None else _ATTENTION_RANK[kind]


def pane_rank(activity: Activity) -> tuple[bool, int, bool, int, str]:
    """The sort key of a session among those bound to one pane: the largest is shown.

    One rule (docs/design.md §4, "one winner per pane"), used by the tmux badges, ``paneward
    status`` and its JSON alike: the session that proves the most about the turn wins -- a proven
    turn (a live owner and a turn other than ``unknown``) beats ``unknown``, then open attention by
    :data:`ATTENTION_PRIORITY`, then a live owner over an ended one; ties go to the newest
    evidence, then the key (only to be deterministic). Everything it reads is in the activity,
    so a snapshot ranks exactly as the transitions that led to it did.
    """
    attention = activity.attention
    evidence = activity.evidence
    return (
        activity.presence != "persisted" and activity.turn != "unknown",
        attention_rank(attention.kind if attention is not None else None),
        activity.presence != "persisted",
        evidence.at_ms or evidence.observed_at_ms or 0,
        str(activity.key),
    )


def pane_winners(activities: Iterable[Activity]) -> dict[str, Activity]:
    """The session each pane shows (:func:`pane_rank`), for every pane some session is bound to."""
    shown: dict[str, Activity] = {}
    for activity in activities:
        pane = activity.pane
        if pane is not None:
            current = shown.get(pane)
            if current is None or pane_rank(activity) > pane_rank(current):
                shown[pane] = activity
    return shown


def pane_views(
    activities: Iterable[Activity], note: Callable[[Activity], str | None] | None = None
) -> list[PaneView]:
    """Which session each pane shows and which others are bound to it, by pane id: the same
    :func:`pane_rank` as the badges and the table. ``note(winner)`` says why a pane shows
    less than it could (its harness package's words, e.g. a Codex TUI whose thread nothing
    proves); ``None`` when there is nothing to say."""
    bound: dict[str, list[Activity]] = {}
    for activity in activities:
        if activity.pane is not None:
            bound.setdefault(activity.pane, []).append(activity)
    views: list[PaneView] = []
    for pane in sorted(bound):
        ranked = sorted(bound[pane], key=pane_rank, reverse=True)
        winner = ranked[0]
        views.append(
            PaneView(
                pane=pane,
                key=winner.key,
                turn=winner.turn,
                hidden=tuple(a.key for a in ranked[1:]),
                note=note(winner) if note is not None else None,
            )
        )
    return views


def hidden_after(activity: Activity, now_ms: int, after_ms: int = ENDED_SHOWN_MS) -> bool:
    """:func:`settled` for longer than ``after_ms`` (by its evidence time): the status table
    leaves it out (``--all`` lists it)."""
    if not settled(activity):
        return False
    evidence = activity.evidence
    at_ms = evidence.at_ms or evidence.observed_at_ms
    return at_ms is not None and now_ms - at_ms > after_ms


def attention_order(activity: Activity) -> tuple[int, int, int, str]:
    """The order of the attention queue and of the status table: the most urgent attention first
    (:data:`ATTENTION_PRIORITY`), oldest first within a kind, then live sessions, then the key."""
    attention = activity.attention
    return (
        -attention_rank(attention.kind if attention is not None else None),
        attention.since_ms if attention is not None else 0,
        0 if activity.presence == "running" else 1,
        str(activity.key),
    )


def crashed(state: SessionState, reason: str, at_ms: int) -> Step:
    """The session's actor stopped after repeated crashes: attention ``failed`` (published).

    Called by the supervisor (the actor's own reducer can no longer be trusted with the
    message that crashed it); the state stays otherwise as it was.
    """
    failed = msgspec.structs.replace(
        state, known=True, failed=Attention("failed", reason[:500], at_ms)
    )
    activity = derive(failed)
    return Step(msgspec.structs.replace(failed, activity=activity), activity)


class Reproof(msgspec.Struct, frozen=True, gc=False):
    """The outcome of :func:`reprove` for one restored session.

    ``step.publish`` is set when the restored activity must be corrected (published under
    ``cause``); ``live`` when the owner is proven to be the same incarnation.
    """

    step: Step
    cause: str | None = None
    live: bool = False


def reprove(state: SessionState, live_token: str | None, observed_at_ms: int) -> Reproof:
    """Re-prove a session restored after a restart, before anything is published.

    The rule is docs/design.md §4 (Restart).

    ``live_token`` is the current start token of the recorded owner pid (``None``: gone, or no
    owner recorded). A session that was not ``persisted`` keeps its state only when its owner
    is alive with the same start token; otherwise it becomes ``persisted`` / ``unknown`` with
    evidence ``persisted_store`` (cause ``persisted_store:owner_dead`` / ``owner_recycled`` /
    ``owner_unknown``), its attention kept except ``needs_input`` (nobody can be waiting on a
    prompt of a process that is gone).
    """
    if state.presence == "persisted":
        return Reproof(Step(state))
    if state.owner_pid is not None and state.owner_token is not None:
        if live_token == state.owner_token:
            return Reproof(Step(state), live=True)
        reason = "owner_dead" if live_token is None else "owner_recycled"
    else:
        reason = "owner_unknown"
    ended = msgspec.structs.replace(
        state,
        presence="persisted",
        turn="unknown",
        source="persisted_store",
        native=None,
        evidence_at_ms=None,
        observed_at_ms=observed_at_ms,
        version=None,
        needs_reason="",
        needs_since_ms=0,
        pty_working=False,
        subagents=frozenset(),
        background=frozenset(),
        deferred=None,
        registry_busy=False,
        children=(),
        host_owned=False,
    )
    activity = derive(ended)
    step = Step(msgspec.structs.replace(ended, activity=activity), activity)
    return Reproof(step, f"persisted_store:{reason}")


def derive(state: SessionState) -> Activity | None:
    """The activity to publish for ``state`` (None while nothing is known)."""
    if not state.known:
        return None
    turn = derive_turn(state)
    attention: Attention | None
    if turn == "needs_input":
        attention = Attention(
            "needs_input",
            state.needs_reason or "input required",
            state.needs_since_ms or state.evidence_at_ms or 0,
        )
        if attention.since_ms <= 0:
            attention = Attention("needs_input", attention.reason, state.turn_at_ms or 1)
    else:
        # failed before turn_done (ATTENTION_PRIORITY): the more urgent one is shown.
        attention = state.failed or state.done
    return Activity(
        key=state.key,
        presence=state.presence,
        turn=turn,
        evidence=Evidence(
            source=state.source,
            native_state=state.native,
            observed_at_ms=state.observed_at_ms,
            at_ms=state.evidence_at_ms,
            harness_version=state.version,
        ),
        attention=attention,
        pane=None if state.left_pane else state.pane,
        exit=state.exit,
        subagents=background_items(state),
    )


def background_items(state: SessionState) -> int:
    """How many pieces of background work of this session are running (published as
    ``subagents``): subagents started and not stopped, OSC 7501 child records, the in-flight
    background work the harness listed, and child threads that are not idle."""
    # Hot path (every derive): no union set or generator for what is empty, as it mostly is.
    subagents, background = state.subagents, state.background
    count = (
        len(subagents | background) if subagents and background
        else len(subagents) + len(background)
    )
    if state.children:
        count += sum(
            1 for _, child_turn, _ in state.children if child_turn in ("working", "needs_input")
        )
    return count


def _still_working(state: SessionState) -> bool:
    """The turn ended but work it started still runs (docs/design.md §4, work that outlives the
    turn): background items, or -- for a Claude that does not list its background work in ``Stop``
    -- its registry still ``busy`` after the hook said the turn ended."""
    if background_items(state) > 0:
        return True
    return state.has_registry and state.registry_busy and not state.background_listed


def _complete(state: SessionState, attention: Attention) -> SessionState:
    """A turn completed: open ``turn_done`` now, or, while work it started still runs, keep
    the completion until that work has ended and the harness says it is idle (:func:`_settle`).
    Nothing opens while the pane is focused."""
    if state.focused:
        return msgspec.structs.replace(state, deferred=None)
    if _still_working(state):
        return msgspec.structs.replace(state, deferred=attention)
    return msgspec.structs.replace(state, done=attention, deferred=None)


def _settle(state: SessionState) -> SessionState:
    """Open a deferred completion once the last background item has ended and the session's
    own turn is idle (the harness says it is idle)."""
    if state.deferred is None or _still_working(state):
        return state
    if state.presence != "running" or state.turn != "idle":
        return state
    done = None if state.focused else state.deferred
    return msgspec.structs.replace(state, done=done or state.done, deferred=None)


# --------------------------------------------------------------------------- helpers


class _Claim(msgspec.Struct, frozen=True, gc=False):
    """What one message says, normalized for the shared apply path."""

    source: Source
    native: str | None
    at_ms: int
    observed_at_ms: int
    version: str | None = None
    turn: Turn | None = None  # a turn claim (subject to event-time ordering)
    completion: str | None = None  # "completed" | "interrupted" | None
    turn_id: str | None = None
    reason: str | None = None  # for needs_input
    running: bool = False  # proves a live owner
    owner: tuple[int, str] | None = None


def _remember(items: tuple[str, ...], item: str | None, limit: int) -> tuple[str, ...]:
    if item is None or item in items:
        return items
    return (*items, item)[-limit:]


def _fingerprint(message: SessionMessage) -> int | None:
    """Identity of an evidence record, for dropping exact duplicates."""
    identity = _identity(message)
    return None if identity is None else hash(identity)


def _identity(message: SessionMessage) -> tuple[object, ...] | None:
    if isinstance(message, RegistryStatus):
        return ("reg", message.status, message.waiting_for, message.at_ms, message.pid)
    if isinstance(message, HookHint):
        return (
            "hook",
            message.source,
            message.event,
            message.at_ms,
            message.prompt_id,
            message.turn_id,
            message.agent_id,
            message.tool,
            message.serial,
        )
    if isinstance(message, LifecycleBoundary):
        return ("rollout", message.key.session_id, message.boundary, message.turn_id, message.at_ms)
    if isinstance(message, ProgramStatus):
        return ("osc", message.state, message.child_id, message.at_ms, message.message,
                message.serial)
    if isinstance(message, ThreadStatus):
        return ("daemon", message.key.session_id, message.status, message.flags, message.at_ms,
                message.summary, message.serial)
    return None


def _with_evidence(state: SessionState, claim: _Claim) -> SessionState:
    return msgspec.structs.replace(
        state,
        source=claim.source,
        native=claim.native,
        evidence_at_ms=claim.at_ms,
        observed_at_ms=claim.observed_at_ms,
        version=claim.version or state.version,
    )


def _open_done(state: SessionState, at_ms: int, reason: str) -> SessionState:
    return _complete(state, Attention("turn_done", reason, at_ms))


def _end(
    state: SessionState,
    at_ms: int,
    source: Source,
    native: str | None,
    observed_at_ms: int,
    *,
    failed_reason: str | None = None,
    exit: ExitInfo | None = None,
    graceful: bool = False,
) -> SessionState:
    """Proof of death: presence persisted, turn unknown (docs/design.md §4, Presence).

    An abrupt death while working opens attention ``failed``; a graceful end
    (``SessionEnd``, the registry file removed by the exiting program) does not.
    """
    was_working = state.presence == "running" and derive_turn(state) == "working"
    failed = state.failed
    if failed_reason is None and was_working and not graceful:
        failed_reason = f"exited while working ({native or source})"
    if failed_reason is not None:
        failed = Attention("failed", failed_reason, at_ms)
    return msgspec.structs.replace(
        state,
        known=True,
        presence="persisted",
        turn="unknown",
        source=source,
        native=native,
        evidence_at_ms=at_ms,
        observed_at_ms=observed_at_ms,
        ended_at_ms=max(state.ended_at_ms, at_ms),
        turn_at_ms=max(state.turn_at_ms, at_ms),
        failed=failed,
        exit=exit if exit is not None else state.exit,
        pty_working=False,
        subagents=frozenset(),
        background=frozenset(),
        deferred=None,
        registry_busy=False,
        children=(),
        needs_reason="",
        needs_since_ms=0,
    )


def derive_turn(state: SessionState) -> Turn:
    """The turn as it would be published for ``state`` (children rolled up).

    The same rule as :func:`derive`, without building the activity (hot path).
    """
    if not state.known or state.presence == "persisted":
        return "unknown"
    turn = state.turn
    if state.presence == "running" and turn != "needs_input":
        # Child threads roll up to their root: the strongest wins.
        for _, child_turn, _ in state.children:
            if _RANK[child_turn] > _RANK[turn] and child_turn != "needs_input":
                turn = child_turn
        if turn == "idle" and state.deferred is not None:
            turn = "working"  # the turn completed; work it started still runs
    return turn


def _apply_claim(state: SessionState, claim: _Claim) -> SessionState:
    """Apply presence and turn claims with event-time ordering (the shared path).

    Collects every field change and replaces the state once (this is the hot path).
    """
    updates: dict[str, object] = {}
    changed = False
    presence = state.presence
    if claim.running and not state.host_owned and claim.at_ms > state.ended_at_ms:
        if presence != "running" or not state.known:
            changed = True
        presence = "running"
        updates["known"] = True
        updates["presence"] = "running"
        if state.exit is not None:
            updates["exit"] = None
        if state.left_pane:
            updates["left_pane"] = False  # alive again: its pane shows it
        if claim.owner is not None:
            updates["owner_pid"], updates["owner_token"] = claim.owner
    if claim.turn is not None and claim.at_ms >= state.turn_at_ms:
        known = state.known or bool(updates)
        before: Turn = "unknown"
        if known and presence != "persisted":
            before = derive_turn(state) if state.presence == presence else state.turn
        turn = claim.turn
        updates["turn"] = turn
        updates["turn_at_ms"] = claim.at_ms
        updates["known"] = True
        needs_reason = ""
        if turn == "needs_input":
            if state.turn != "needs_input":
                updates["needs_since_ms"] = claim.at_ms
                updates["needs_after_ms"] = state.turn_at_ms
                needs_reason = claim.reason or "input required"
                updates["needs_reason_at_ms"] = claim.at_ms
            else:
                needs_reason = _kept_reason(state, claim, updates)
        elif state.needs_since_ms:
            updates["needs_since_ms"] = 0
        updates["needs_reason"] = needs_reason
        done = state.done
        deferred = state.deferred
        if turn == "working" and before != "working" and before != "needs_input":
            done = None  # the next turn closes turn_done
            updates["interrupted"] = None
        if turn == "working" and state.turn != "working" and state.turn != "needs_input":
            deferred = None  # a new turn: the last one's completion is past
        if claim.completion == "completed":
            if (
                claim.turn_id is None or claim.turn_id not in state.completed
            ) and not state.focused:
                attention = Attention(
                    "turn_done", f"turn done ({claim.native or claim.source})", claim.at_ms
                )
                if _still_working(state):
                    deferred = attention  # opens when the work it started has ended
                else:
                    done, deferred = attention, None
            updates["completed"] = _remember(state.completed, claim.turn_id, _COMPLETED)
            updates["interrupted"] = None
        elif claim.completion == "interrupted":
            deferred = None  # Esc: the turn ended without completing
        if done is not state.done:
            updates["done"] = done
        if deferred is not state.deferred:
            updates["deferred"] = deferred
        if presence == "persisted":
            after: Turn = "unknown"
        elif state.children or state.deferred is not None or "deferred" in updates:
            after = derive_turn(msgspec.structs.replace(state, **updates))
        else:
            after = turn
        if after != before or needs_reason != state.needs_reason:
            changed = True
        elif deferred is not None and deferred is not state.deferred:
            changed = True  # the turn ended while its background work runs: that is news
    elif (
        claim.turn == "needs_input"
        and state.turn == "needs_input"
        and claim.at_ms >= state.needs_after_ms
        and presence != "persisted"
    ):
        # An older record of the wait that is still open (nothing closed it since): it may
        # name what the newer one did not, and the wait opened when it says.
        needs_reason = _kept_reason(state, claim, updates)
        if needs_reason != state.needs_reason:
            updates["needs_reason"] = needs_reason
        if claim.at_ms < state.needs_since_ms:
            updates["needs_since_ms"] = claim.at_ms
    # A new native word from the same state-word source is news (registry idle -> shell);
    # event names of hooks are not (every tool call would publish).
    reworded = (
        claim.turn is not None
        and claim.source in _STATE_WORD_SOURCES
        and claim.source == state.source
        and claim.native != state.native
    )
    if changed or reworded or not state.known:
        updates["source"] = claim.source
        updates["native"] = claim.native
        updates["evidence_at_ms"] = claim.at_ms
        updates["observed_at_ms"] = claim.observed_at_ms
        if claim.version:
            updates["version"] = claim.version
    if not updates:
        return state
    return msgspec.structs.replace(state, **updates)


def _kept_reason(state: SessionState, claim: _Claim, updates: dict[str, object]) -> str:
    """The reason of the open wait after ``claim``, another record of it: the one that says
    most (:func:`actors.core.hints.reason_detail`), the newer of two that say as much -- so
    the hook's ``permission: Bash: echo hi`` is not replaced by the registry's ``permission
    prompt`` for the same dialog, in either order. Records ``needs_reason_at_ms`` in
    ``updates`` when the claim's reason is taken."""
    reason = claim.reason
    if not reason:
        return state.needs_reason or "input required"
    held = state.needs_reason
    if (reason_detail(reason), claim.at_ms) >= (reason_detail(held), state.needs_reason_at_ms):
        updates["needs_reason_at_ms"] = claim.at_ms
        return reason
    return held


# --------------------------------------------------------------------------- reduce


def reduce(
    state: SessionState,
    message: SessionMessage,
    proof_table: ProofTable | None = None,
) -> Step:
    """Apply one routed message to one session (pure).

    ``proof_table`` is what each harness can prove (``actors.core.harness.ProofTable``: harness id
    -> axis value -> the sources that prove it; the supervisor passes
    ``actors.harnesses.catalog.PROOF_TABLE``). A value this message's source cannot prove for the
    session's harness is never published as proven: a turn stays ``unknown``, a presence, a
    ``turn_done`` or a ``failed`` is not taken (:func:`_only_proven`). ``None``, or a harness
    the table does not name: nothing is limited.

    :return: the new state, and the activity to publish if it visibly changed.
    """
    fingerprint = _fingerprint(message)
    recent = state.recent
    if fingerprint is not None:
        if fingerprint in recent:
            return Step(state, None, "duplicate")
        recent = (*recent, fingerprint)[-_RECENT:]
    new = _dispatch(state, message)
    if new is not None and new.deferred is not None:
        # A completion that waited for background work: settle it now that it may be due.
        new = _settle(new)
    if new is not None and proof_table is not None:
        limits = proof_table.get(state.key.harness)
        if limits:
            # Every session message states its source on its type (a HookHint in its field):
            # none is left out of what its harness can prove.
            new = _only_proven(state, new, message.source, limits)
    if new is None:
        if recent is state.recent:
            return Step(state, None, "no claim")
        return Step(msgspec.structs.replace(state, recent=recent), None, "no claim")
    activity = derive(new)
    previous = new.activity
    if activity is None or (previous is not None and previous.visible() == activity.visible()):
        new = msgspec.structs.replace(new, recent=recent)
        return Step(new, None, None if activity is None else "repeat")
    new = msgspec.structs.replace(new, recent=recent, activity=activity)
    return Step(new, activity, None)


def _only_proven(
    before: SessionState,
    after: SessionState,
    source: Source,
    limits: Mapping[str, frozenset[str]],
) -> SessionState:
    """``after`` without what ``source`` cannot prove for this harness (docs/design.md §4, "What a
    harness can prove"): a turn it cannot prove becomes ``unknown`` (with no ``needs_input``
    reason), a ``running``, ``turn_done`` or ``failed`` it cannot prove is not taken."""
    if source in UNLIMITED_SOURCES:
        return after

    def proven(value: str) -> bool:
        sources = limits.get(value)
        return sources is None or source in sources

    updates: dict[str, object] = {}
    if after.presence == "running" and before.presence != "running" and not proven("running"):
        updates.update(
            presence=before.presence, owner_pid=before.owner_pid, owner_token=before.owner_token
        )
    if after.turn != before.turn and after.turn != "unknown" and not proven(after.turn):
        updates.update(turn="unknown", needs_reason="", needs_since_ms=0)
    elif (
        after.turn == "needs_input"
        and (after.needs_reason, after.needs_since_ms)
        != (before.needs_reason, before.needs_since_ms)
        and not proven("needs_input")
    ):
        # A record of the open wait from a source that cannot prove one tells nothing of it.
        updates.update(
            needs_reason=before.needs_reason,
            needs_since_ms=before.needs_since_ms,
            needs_reason_at_ms=before.needs_reason_at_ms,
        )
    if after.done is not None and after.done != before.done and not proven("turn_done"):
        updates["done"] = before.done
    if after.failed is not None and after.failed != before.failed and not proven("failed"):
        updates["failed"] = before.failed
    return msgspec.structs.replace(after, **updates) if updates else after


def _dispatch(state: SessionState, message: SessionMessage) -> SessionState | None:
    match message:
        case RegistryStatus():
            return _registry(state, message)
        case HookHint():
            return _hook(state, message)
        case LifecycleBoundary():
            return _boundary(state, message)
        case ProgramStatus():
            return _program_status(state, message)
        case ThreadStatus():
            return _thread_status(state, message)
        case RolloutOwned():
            claim = _Claim(
                "codex_rollout",
                "owned",
                message.at_ms,
                message.observed_at_ms,
                version=message.version,
                running=True,
                owner=(message.pid, message.start_token),
            )
            new = _apply_claim(msgspec.structs.replace(state, has_rollout=True), claim)
            if not state.known:
                new = _with_evidence(new, claim)
            return new
        case ProcessSeen():
            claims = message.key == state.key and not state.host_owned
            if not claims and not _owned_by(state, message.pid, message.start_token):
                return None
            if state.presence == "running" or message.at_ms <= state.ended_at_ms:
                return None
            if not claims and state.source == "pane_mapper" and state.native == REPLACED:
                # Its process lives on, showing the session that replaced it: only the pane
                # mapper showing it again (a ProcessSeen naming it) brings it back.
                return None
            claim = _Claim(
                "pid_probe",
                "alive",
                message.at_ms,
                message.observed_at_ms,
                running=True,
                owner=(message.pid, message.start_token),
            )
            return _apply_claim(state, claim)
        case ProcessGone():
            native = "recycled" if message.recycled else "gone"
            if message.key == state.key and not state.host_owned:
                # The pane mapper names the session the dead process stood for by itself: it
                # ends, even if it had ended (given way to the session the process showed).
                if state.known and state.source == "pid_probe" and state.presence == "persisted":
                    return None
                return _end(state, message.at_ms, "pid_probe", native, message.observed_at_ms)
            if state.host_owned or state.presence != "running":
                return None
            if not _owned_by(state, message.pid, message.start_token):
                return None
            return _end(state, message.at_ms, "pid_probe", native, message.observed_at_ms)
        case RegistryRemoved():
            if state.host_owned or state.presence != "running":
                return None
            if message.pid_alive and not message.rotated:
                return None  # file gone but owner alive: no proof either way
            native = "rotated" if message.rotated else "removed"
            return _end(
                state,
                message.at_ms,
                "claude_registry",
                native,
                message.observed_at_ms,
                graceful=True,
            )
        case RolloutReleased():
            if state.host_owned or state.presence != "running":
                return None
            return _end(state, message.at_ms, "codex_rollout", "released", message.observed_at_ms)
        case LedgerFire():
            return _ledger(state, message)
        case PtySpawned():
            if (
                state.host_owned
                and state.owner_pid == message.pid
                and state.owner_token == message.start_token
                and (message.pane is None or message.pane == state.pane)
            ):
                return None  # the same PTY announced again (the wrapper reconnected)
            return msgspec.structs.replace(
                state,
                known=True,
                presence="running",
                host_owned=True,
                owner_pid=message.pid,
                owner_token=message.start_token,
                exit=None,
                pane=message.pane or state.pane,
                left_pane=False,
                source="pty_host",
                native="spawned",
                evidence_at_ms=message.at_ms,
                observed_at_ms=message.observed_at_ms,
                ended_at_ms=0,
                failed=None,
            )
        case PtyExit():
            exit_info = ExitInfo(code=message.code, signal=message.signal)
            reason = None
            if message.signal:
                reason = f"killed by signal {message.signal}"
            elif message.code:
                reason = f"exited with code {message.code}"
            ended = _end(
                state,
                message.at_ms,
                "pty_host",
                "exited",
                message.observed_at_ms,
                failed_reason=reason,
                exit=exit_info,
            )
            return msgspec.structs.replace(ended, host_owned=False)
        case PaneBound():
            return msgspec.structs.replace(state, pane=message.pane, left_pane=False)
        case PaneUnbound():
            if state.pane != message.pane:
                return None
            left = msgspec.structs.replace(state, pane=None, focused=False, left_pane=False)
            if message.replaced and state.presence == "running" and not state.host_owned:
                return _end(
                    left, message.at_ms, "pane_mapper", REPLACED, message.at_ms, graceful=True
                )
            return left
        case PaneFocused():
            focused = state.pane is not None and state.pane == message.pane
            new = msgspec.structs.replace(state, focused=focused)
            if focused:
                new = msgspec.structs.replace(new, done=None)
            if focused or state.focused:
                # Focused now, or the focus leaves the pane it had: its pane was seen.
                new = _seen_ended(new)
            return new
        case Acknowledge():
            return _seen_ended(msgspec.structs.replace(state, done=None, failed=None))
        case Forget():
            if not state.known or state.presence != "persisted":
                return None  # a live session is not forgotten: it ends when its owner does
            # The last transition (Transition.forgets): off its pane, nothing to act on.
            return msgspec.structs.replace(
                state,
                pane=None,
                focused=False,
                done=None,
                failed=None,
                deferred=None,
                source="host",
                native="forget",
                evidence_at_ms=message.at_ms,
            )
        case HostSignal():
            if message.signal == "terminate":
                if state.presence != "running":
                    return None
                return msgspec.structs.replace(
                    state,
                    presence="shutting_down",
                    turn="unknown",
                    source="host",
                    native="terminate",
                    evidence_at_ms=message.at_ms,
                )
            if message.signal == "interrupt":
                claim = _Claim(
                    "host",
                    "interrupt",
                    message.at_ms,
                    message.at_ms,
                    turn="idle",
                    completion="interrupted",
                )
                return _apply_claim(state, claim)
            return None  # eof: the program decides what it means
        case _:  # pragma: no cover - exhaustive over SessionMessage
            raise TypeError(f"not a session message: {type(message).__name__}")


def _seen_ended(state: SessionState) -> SessionState:
    """An ended session the user has seen in its pane (focused there, or acknowledged) with
    nothing left open leaves the pane: a plain shell has no badge (docs/tmux.md)."""
    if (
        state.known
        and state.presence == "persisted"
        and state.pane is not None
        and state.done is None
        and state.failed is None
    ):
        return msgspec.structs.replace(state, left_pane=True)
    return state


def _owned_by(state: SessionState, pid: int, token: str | None) -> bool:
    if state.owner_pid != pid:
        return False
    return token is None or state.owner_token is None or token == state.owner_token


def _registry(state: SessionState, message: RegistryStatus) -> SessionState:
    status = message.status
    if status is None:
        state = msgspec.structs.replace(state, has_registry=True)
    elif status in ("idle", "shell"):
        # Claude's own word that it runs nothing but (at most) a background shell: the
        # background work a Stop listed has ended with it.
        state = msgspec.structs.replace(
            state, has_registry=True, registry_busy=False, background=frozenset()
        )
    else:
        state = msgspec.structs.replace(state, has_registry=True, registry_busy=status == "busy")
    base = _Claim(
        "claude_registry",
        status,
        message.at_ms,
        message.observed_at_ms,
        version=message.version,
        running=True,
        owner=(message.pid, message.start_token),
    )
    if status == "busy":
        return _apply_claim(state, msgspec.structs.replace(base, turn="working"))
    if status == "waiting":
        reason = message.waiting_for or "waiting"
        return _apply_claim(state, msgspec.structs.replace(base, turn="needs_input", reason=reason))
    if status in ("idle", "shell"):
        completion: str | None = None
        before = derive_turn(state) if state.known else "unknown"
        stale = message.at_ms < state.turn_at_ms
        interrupted = state.interrupted
        if before in ("working", "needs_input") and not stale:
            if not state.hooks_seen and before == "working":
                # A hook-less Claude session: the busy -> idle edge is the completion.
                completion = "completed"
            elif state.prompt_id is None or state.prompt_id not in state.completed:
                interrupted = state.prompt_id or "?"  # Esc, Ctrl-C or a denied permission
        state = msgspec.structs.replace(state, interrupted=interrupted)
        return _apply_claim(
            state, msgspec.structs.replace(base, turn="idle", completion=completion)
        )
    # The first write has no status (turn unknown); unknown words make no turn claim.
    return _apply_claim(state, base)


def _hook(state: SessionState, message: HookHint) -> SessionState | None:
    hint = message.hint
    is_codex_notify = message.source == "codex_notify"
    if is_codex_notify and not state.has_rollout:
        # The TUI's hidden title thread has no rollout: its notify proves nothing.
        return None
    owner = (message.pid, message.start_token) if message.pid and message.start_token else None
    if message.source == "claude_hook" and not state.hooks_seen:
        state = msgspec.structs.replace(state, hooks_seen=True)
    base = _Claim(
        message.source,
        message.event,
        message.at_ms,
        message.observed_at_ms,
        version=message.version,
        running=owner is not None and hint != "ended",
        owner=owner,
    )
    turn_id = message.prompt_id or message.turn_id
    if message.background is not None and (
        frozenset(message.background) != state.background or not state.background_listed
    ):
        state = msgspec.structs.replace(
            state, background=frozenset(message.background), background_listed=True
        )
    if hint == "working":
        if message.prompt_id is not None and message.prompt_id != state.prompt_id:
            state = msgspec.structs.replace(state, prompt_id=message.prompt_id)
        return _apply_claim(state, msgspec.structs.replace(base, turn="working"))
    if hint == "needs_input":
        state = msgspec.structs.replace(
            state, permission_prompts=_remember(state.permission_prompts, message.prompt_id, 8)
        )
        reason = message.summary or "input required"
        return _apply_claim(state, msgspec.structs.replace(base, turn="needs_input", reason=reason))
    if hint == "late_needs_input":
        # Claude's permission Notification arrives ~6 s late, after the user may have
        # answered: it is the same dialog as PermissionRequest / registry `waiting`.
        if state.has_registry or (
            message.prompt_id is not None and message.prompt_id in state.permission_prompts
        ):
            return _apply_claim(state, base)
        reason = message.summary or "input required"
        return _apply_claim(state, msgspec.structs.replace(base, turn="needs_input", reason=reason))
    if hint == "completed":
        stale = message.at_ms < state.turn_at_ms
        if stale:
            # A Stop that reached us after the registry edge it precedes: the turn is
            # already idle; its completion still opens turn_done for that prompt.
            if (
                state.interrupted is not None
                and derive_turn(state) == "idle"
                and (turn_id is None or turn_id == state.interrupted or state.interrupted == "?")
            ):
                new = _open_done(state, message.at_ms, f"turn done ({message.event})")
                return msgspec.structs.replace(
                    new, interrupted=None, completed=_remember(new.completed, turn_id, _COMPLETED)
                )
            return _apply_claim(state, base)
        if (
            derive_turn(state) == "idle"
            and state.interrupted is not None
            and turn_id is not None
            and turn_id == state.interrupted
        ):
            # Stop landing just after the registry edge: same turn, now completed.
            new = _open_done(state, message.at_ms, f"turn done ({message.event})")
            new = msgspec.structs.replace(
                new, interrupted=None, completed=_remember(new.completed, turn_id, _COMPLETED)
            )
            return _apply_claim(new, msgspec.structs.replace(base, turn="idle"))
        return _apply_claim(
            state,
            msgspec.structs.replace(base, turn="idle", completion="completed", turn_id=turn_id),
        )
    if hint in ("interrupted", "idle"):
        return _apply_claim(state, msgspec.structs.replace(base, turn="idle"))
    if hint == "subagent_start" and message.agent_id:
        return msgspec.structs.replace(
            _apply_claim(state, base), subagents=state.subagents | {message.agent_id}
        )
    if hint == "subagent_stop" and message.agent_id:
        return msgspec.structs.replace(
            _apply_claim(state, base), subagents=state.subagents - {message.agent_id}
        )
    if hint == "ended":
        if state.presence == "persisted" and state.known:
            return None
        return _end(
            state,
            message.at_ms,
            message.source,
            message.summary or message.event,
            message.observed_at_ms,
            graceful=True,
        )
    # start, info: a presence claim at most.
    return _apply_claim(state, base)


_BOUNDARY_TURN: Final[dict[str, Turn]] = {
    "task_started": "working",
    "task_complete": "idle",
    "turn_aborted": "idle",
}


def _boundary(state: SessionState, message: LifecycleBoundary) -> SessionState | None:
    turn = _BOUNDARY_TURN[message.boundary]
    if message.root_key is not None and message.key != state.key:
        # A child thread's boundary, routed to its root: roll up, never flip to idle.
        return _child(state, message.key.session_id, turn, message.at_ms)
    if (
        message.boundary == "task_complete"
        and message.at_ms < state.turn_at_ms
        and state.interrupted is not None
        and derive_turn(state) == "idle"
        and (message.turn_id is None or message.turn_id not in state.completed)
    ):
        # The daemon's `idle` edge reached us before the rollout's task_complete it follows:
        # the turn is already idle, and this completes it.
        new = _open_done(state, message.at_ms, f"turn done ({message.boundary})")
        return msgspec.structs.replace(
            new,
            has_rollout=True,
            interrupted=None,
            completed=_remember(new.completed, message.turn_id, _COMPLETED),
        )
    completion = None
    if message.boundary == "task_complete":
        completion = "completed"
    elif message.boundary == "turn_aborted":
        completion = "interrupted"
    claim = _Claim(
        "codex_rollout",
        message.boundary,
        message.at_ms,
        message.observed_at_ms,
        version=message.version,
        turn=turn,
        completion=completion,
        turn_id=message.turn_id,
    )
    return _apply_claim(msgspec.structs.replace(state, has_rollout=True), claim)


def _child(state: SessionState, child: str, turn: Turn | None, at_ms: int) -> SessionState | None:
    """Record a child thread's turn at its root (``None``: the child is gone); older news of
    a child than what is recorded is ignored."""
    others = tuple(c for c in state.children if c[0] != child)
    previous = next((c for c in state.children if c[0] == child), None)
    if previous is not None and at_ms < previous[2]:
        return None
    if turn is None:
        return None if previous is None else msgspec.structs.replace(state, children=others)
    return msgspec.structs.replace(state, children=(*others, (child, turn, at_ms)))


_DAEMON_WAITS: Final = {"waitingOnApproval": "permission", "waitingOnUserInput": "input requested"}


def _thread_status(state: SessionState, message: ThreadStatus) -> SessionState | None:
    """The Codex daemon's own status of a thread: ``active`` is working (needs_input with a
    waiting flag), ``idle`` is idle (the completion is the rollout's ``task_complete`` or
    notify: the daemon's edge does not say), ``systemError`` opens ``failed``, ``closed``
    ends the thread; ``notLoaded`` (also the first half of a reload) claims nothing."""
    status = message.status
    if message.root_key is not None and message.key != state.key:
        child_turn: Turn | None = None
        if status == "active":
            child_turn = "working"
        elif status in ("idle", "systemError"):
            child_turn = "idle"
        elif status == "notLoaded":
            return None
        return _child(state, message.key.session_id, child_turn, message.at_ms)
    at, seen = message.at_ms, message.observed_at_ms
    if status == "closed":
        if state.host_owned or state.presence != "running":
            return None
        return _end(state, at, "codex_daemon", "closed", seen, graceful=True)
    if status == "notLoaded":
        return None
    owner = (message.pid, message.start_token) if message.pid and message.start_token else None
    wait = next((f for f in message.flags if f in _DAEMON_WAITS), None)
    native = status if wait is None else f"{status}:{wait}"
    base = _Claim(
        "codex_daemon",
        native,
        at,
        seen,
        version=message.version,
        running=owner is not None,
        owner=owner,
    )
    if status == "active" and wait is not None:
        # The daemon names the pending call (found in the rollout) as the hook for the same
        # dialog does, with the same reason; without it, a reason already there (the hook's)
        # is kept. A named reason replaces a bare "permission" (the wrapper's Codex record).
        named = message.summary if wait == "waitingOnApproval" else None
        keep = (
            state.turn == "needs_input"
            and bool(state.needs_reason)
            and not (named and state.needs_reason == _DAEMON_WAITS[wait])
        )
        reason = None if keep else named or _DAEMON_WAITS[wait]
        claim = msgspec.structs.replace(base, turn="needs_input", reason=reason)
        return _apply_claim(state, claim)
    if status == "active":
        return _apply_claim(state, msgspec.structs.replace(base, turn="working"))
    before = derive_turn(state) if state.known else "unknown"
    if before in ("working", "needs_input") and at >= state.turn_at_ms:
        # An idle edge without its completion yet: a task_complete older than it may follow.
        state = msgspec.structs.replace(state, interrupted="?")
    new = _apply_claim(state, msgspec.structs.replace(base, turn="idle"))
    if status == "systemError":
        new = msgspec.structs.replace(
            new, known=True, failed=Attention("failed", "codex daemon: system error", at)
        )
    return new


def _program_status(state: SessionState, message: ProgramStatus) -> SessionState | None:
    at, seen = message.at_ms, message.observed_at_ms
    if message.child_id:
        # Records with a child id describe subagents, never the parent's turn.
        if message.state in ("working", "blocked"):
            agents = state.subagents | {message.child_id}
        else:
            agents = state.subagents - {message.child_id}
        return msgspec.structs.replace(state, subagents=agents)
    native = message.state if message.kind is None else f"{message.state}:{message.kind}"
    base = _Claim("pty_status", native, at, seen)
    if message.state == "working":
        state = msgspec.structs.replace(state, pty_working=True)
        return _apply_claim(state, msgspec.structs.replace(base, turn="working"))
    if message.state == "blocked":
        reason = blocked_reason(message.kind, message.message)
        return _apply_claim(state, msgspec.structs.replace(base, turn="needs_input", reason=reason))
    if message.state == "done":
        state = msgspec.structs.replace(state, pty_working=False)
        return _apply_claim(
            state, msgspec.structs.replace(base, turn="idle", completion="completed")
        )
    if message.state == "idle":
        # `idle` after `working` without `done` is an interrupt: idle, no turn_done.
        state = msgspec.structs.replace(state, pty_working=False)
        return _apply_claim(state, msgspec.structs.replace(base, turn="idle"))
    # clear: this source makes no further claim about the turn.
    if state.source != "pty_status" or at < state.turn_at_ms:
        return None
    return msgspec.structs.replace(
        state,
        turn="unknown",
        turn_at_ms=at,
        pty_working=False,
        native="clear",
        evidence_at_ms=at,
        observed_at_ms=seen,
        needs_reason="",
        needs_since_ms=0,
    )


_LIVE_FIRES: Final = frozenset({"claimed", "running"})


def _ledger(state: SessionState, message: LedgerFire) -> SessionState | None:
    at, seen = message.at_ms, message.observed_at_ms
    if message.status in _LIVE_FIRES and message.pid_alive:
        # The Hermes actor proved the pid alive with a matching start time itself.
        claim = _Claim("hermes_executions", message.status, at, seen, turn="working", running=True)
        return _apply_claim(state, claim)
    native = "abandoned" if message.status in _LIVE_FIRES else message.status
    reason = "hermes fire failed" if message.status == "failed" else None
    if state.known and state.presence == "persisted" and state.native == native:
        return None
    # A fire that finished on its own is a graceful end; an abandoned one is a death.
    graceful = native != "abandoned"
    return _end(
        state, at, "hermes_executions", native, seen, failed_reason=reason, graceful=graceful
    )
