"""Each harness's own evidence words as claims: the Claude registry and every harness's hooks,
Codex rollout boundaries and the Codex daemon's thread status (child threads rolled up to
their root), OSC 7501 program status, and the Hermes ledger's fires.
"""

from __future__ import annotations

from typing import Final

import msgspec

from actors.core.session.hints import blocked_reason
from actors.core.session.reducer.claims import (
    COMPLETED,
    Claim,
    apply_claim,
    end_session,
    open_done,
    remember,
)
from actors.core.session.reducer.published import derive_turn
from actors.core.session.reducer.state import SessionState
from messages.common import Attention, Turn
from messages.evidence import (
    HookHint,
    LedgerFire,
    LifecycleBoundary,
    ProgramStatus,
    RegistryStatus,
    ThreadStatus,
)

__all__ = [
    "reduce_boundary",
    "reduce_hook",
    "reduce_ledger",
    "reduce_program_status",
    "reduce_registry",
    "reduce_thread_status",
]


def reduce_registry(state: SessionState, message: RegistryStatus) -> SessionState:
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
    base = Claim(
        "claude_registry",
        status,
        message.at_ms,
        message.observed_at_ms,
        version=message.version,
        running=True,
        owner=(message.pid, message.start_token),
    )
    if status == "busy":
        return apply_claim(state, msgspec.structs.replace(base, turn="working"))
    if status == "waiting":
        reason = message.waiting_for or "waiting"
        return apply_claim(state, msgspec.structs.replace(base, turn="needs_input", reason=reason))
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
        return apply_claim(
            state, msgspec.structs.replace(base, turn="idle", completion=completion)
        )
    # The first write has no status (turn unknown); unknown words make no turn claim.
    return apply_claim(state, base)


def reduce_hook(state: SessionState, message: HookHint) -> SessionState | None:
    hint = message.hint
    is_codex_notify = message.source == "codex_notify"
    if is_codex_notify and not state.has_rollout:
        # The TUI's hidden title thread has no rollout: its notify proves nothing.
        return None
    owner = (message.pid, message.start_token) if message.pid and message.start_token else None
    if message.source == "claude_hook" and not state.hooks_seen:
        state = msgspec.structs.replace(state, hooks_seen=True)
    base = Claim(
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
        return apply_claim(state, msgspec.structs.replace(base, turn="working"))
    if hint == "needs_input":
        state = msgspec.structs.replace(
            state, permission_prompts=remember(state.permission_prompts, message.prompt_id, 8)
        )
        reason = message.summary or "input required"
        return apply_claim(state, msgspec.structs.replace(base, turn="needs_input", reason=reason))
    if hint == "late_needs_input":
        # Claude's permission Notification arrives ~6 s late, after the user may have
        # answered: it is the same dialog as PermissionRequest / registry `waiting`.
        if state.has_registry or (
            message.prompt_id is not None and message.prompt_id in state.permission_prompts
        ):
            return apply_claim(state, base)
        reason = message.summary or "input required"
        return apply_claim(state, msgspec.structs.replace(base, turn="needs_input", reason=reason))
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
                new = open_done(state, message.at_ms, f"turn done ({message.event})")
                return msgspec.structs.replace(
                    new, interrupted=None, completed=remember(new.completed, turn_id, COMPLETED)
                )
            return apply_claim(state, base)
        if (
            derive_turn(state) == "idle"
            and state.interrupted is not None
            and turn_id is not None
            and turn_id == state.interrupted
        ):
            # Stop landing just after the registry edge: same turn, now completed.
            new = open_done(state, message.at_ms, f"turn done ({message.event})")
            new = msgspec.structs.replace(
                new, interrupted=None, completed=remember(new.completed, turn_id, COMPLETED)
            )
            return apply_claim(new, msgspec.structs.replace(base, turn="idle"))
        return apply_claim(
            state,
            msgspec.structs.replace(base, turn="idle", completion="completed", turn_id=turn_id),
        )
    if hint in ("interrupted", "idle"):
        return apply_claim(state, msgspec.structs.replace(base, turn="idle"))
    if hint == "subagent_start" and message.agent_id:
        return msgspec.structs.replace(
            apply_claim(state, base), subagents=state.subagents | {message.agent_id}
        )
    if hint == "subagent_stop" and message.agent_id:
        return msgspec.structs.replace(
            apply_claim(state, base), subagents=state.subagents - {message.agent_id}
        )
    if hint == "ended":
        if state.presence == "persisted" and state.known:
            return None
        return end_session(
            state,
            message.at_ms,
            message.source,
            message.summary or message.event,
            message.observed_at_ms,
            graceful=True,
        )
    # start, info: a presence claim at most.
    return apply_claim(state, base)


_BOUNDARY_TURN: Final[dict[str, Turn]] = {
    "task_started": "working",
    "task_complete": "idle",
    "turn_aborted": "idle",
}


def reduce_boundary(state: SessionState, message: LifecycleBoundary) -> SessionState | None:
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
        new = open_done(state, message.at_ms, f"turn done ({message.boundary})")
        return msgspec.structs.replace(
            new,
            has_rollout=True,
            interrupted=None,
            completed=remember(new.completed, message.turn_id, COMPLETED),
        )
    completion = None
    if message.boundary == "task_complete":
        completion = "completed"
    elif message.boundary == "turn_aborted":
        completion = "interrupted"
    claim = Claim(
        "codex_rollout",
        message.boundary,
        message.at_ms,
        message.observed_at_ms,
        version=message.version,
        turn=turn,
        completion=completion,
        turn_id=message.turn_id,
    )
    return apply_claim(msgspec.structs.replace(state, has_rollout=True), claim)


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


def reduce_thread_status(state: SessionState, message: ThreadStatus) -> SessionState | None:
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
        return end_session(state, at, "codex_daemon", "closed", seen, graceful=True)
    if status == "notLoaded":
        return None
    owner = (message.pid, message.start_token) if message.pid and message.start_token else None
    wait = next((f for f in message.flags if f in _DAEMON_WAITS), None)
    native = status if wait is None else f"{status}:{wait}"
    base = Claim(
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
        return apply_claim(state, claim)
    if status == "active":
        return apply_claim(state, msgspec.structs.replace(base, turn="working"))
    before = derive_turn(state) if state.known else "unknown"
    if before in ("working", "needs_input") and at >= state.turn_at_ms:
        # An idle edge without its completion yet: a task_complete older than it may follow.
        state = msgspec.structs.replace(state, interrupted="?")
    new = apply_claim(state, msgspec.structs.replace(base, turn="idle"))
    if status == "systemError":
        new = msgspec.structs.replace(
            new, known=True, failed=Attention("failed", "codex daemon: system error", at)
        )
    return new


def reduce_program_status(state: SessionState, message: ProgramStatus) -> SessionState | None:
    at, seen = message.at_ms, message.observed_at_ms
    if message.child_id:
        # Records with a child id describe subagents, never the parent's turn.
        if message.state in ("working", "blocked"):
            agents = state.subagents | {message.child_id}
        else:
            agents = state.subagents - {message.child_id}
        return msgspec.structs.replace(state, subagents=agents)
    native = message.state if message.kind is None else f"{message.state}:{message.kind}"
    base = Claim(message.source, native, at, seen)
    if message.state == "working":
        state = msgspec.structs.replace(state, pty_working=True)
        return apply_claim(state, msgspec.structs.replace(base, turn="working"))
    if message.state == "blocked":
        reason = blocked_reason(message.kind, message.message)
        return apply_claim(state, msgspec.structs.replace(base, turn="needs_input", reason=reason))
    if message.state == "done":
        state = msgspec.structs.replace(state, pty_working=False)
        return apply_claim(
            state, msgspec.structs.replace(base, turn="idle", completion="completed")
        )
    if message.state == "idle":
        # `idle` after `working` without `done` is an interrupt: idle, no turn_done.
        state = msgspec.structs.replace(state, pty_working=False)
        return apply_claim(state, msgspec.structs.replace(base, turn="idle"))
    # clear: this source makes no further claim about the turn.
    if state.source != message.source or at < state.turn_at_ms:
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


def reduce_ledger(state: SessionState, message: LedgerFire) -> SessionState | None:
    at, seen = message.at_ms, message.observed_at_ms
    if message.status in _LIVE_FIRES and message.pid_alive:
        # The Hermes actor proved the pid alive with a matching start time itself.
        claim = Claim("hermes_executions", message.status, at, seen, turn="working", running=True)
        return apply_claim(state, claim)
    native = "abandoned" if message.status in _LIVE_FIRES else message.status
    reason = "hermes fire failed" if message.status == "failed" else None
    if state.known and state.presence == "persisted" and state.native == native:
        return None
    # A fire that finished on its own is a graceful end; an abandoned one is a death.
    graceful = native != "abandoned"
    return end_session(
        state, at, "hermes_executions", native, seen, failed_reason=reason, graceful=graceful
    )
