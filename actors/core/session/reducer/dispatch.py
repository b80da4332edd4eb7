"""The per-message reduction: :func:`dispatch` hands each session message to its rule. The
harness-neutral ones (process identity, the host's PTY and signals, pane binding and focus,
acknowledge, forget) are decided here; each harness's own evidence words in
:mod:`actors.core.session.reducer.harness_claims`.
"""

from __future__ import annotations

from typing import Final

import msgspec

from actors.core.session.reducer.claims import Claim, apply_claim, end_session, with_evidence
from actors.core.session.reducer.harness_claims import (
    reduce_boundary,
    reduce_hook,
    reduce_ledger,
    reduce_program_status,
    reduce_registry,
    reduce_thread_status,
)
from actors.core.session.reducer.state import SessionState
from messages.codec import SessionMessage
from messages.common import ExitInfo
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

__all__ = ["REPLACED", "dispatch"]

#: The native word of a session that gave way to the session its process shows
#: (``PaneUnbound.replaced``; the pane mapper then forgets it).
REPLACED: Final = "replaced"


def dispatch(state: SessionState, message: SessionMessage) -> SessionState | None:
    match message:
        case RegistryStatus():
            return reduce_registry(state, message)
        case HookHint():
            return reduce_hook(state, message)
        case LifecycleBoundary():
            return reduce_boundary(state, message)
        case ProgramStatus():
            if message.source == "tmux_output" and (not state.known or _gave_way(state)):
                # A record read from a pane is about the session the pane shows, known by then
                # (or a transport's, made known by its ProcessSeen first). One for a session
                # that gave way (a Codex TUI's own session, once its thread is bound) or was
                # forgotten since is late: the pane showed it a moment ago. It brings nothing
                # back and makes no new session.
                return None
            return reduce_program_status(state, message)
        case ThreadStatus():
            return reduce_thread_status(state, message)
        case RolloutOwned():
            claim = Claim(
                "codex_rollout",
                "owned",
                message.at_ms,
                message.observed_at_ms,
                version=message.version,
                running=True,
                owner=(message.pid, message.start_token),
            )
            new = apply_claim(msgspec.structs.replace(state, has_rollout=True), claim)
            if not state.known:
                new = with_evidence(new, claim)
            return new
        case ProcessSeen():
            claims = message.key == state.key and not state.host_owned
            if not claims and not _owned_by(state, message.pid, message.start_token):
                return None
            if state.presence == "running" or message.at_ms <= state.ended_at_ms:
                return None
            if not claims and _gave_way(state):
                # Its process lives on, showing the session that replaced it: only the pane
                # mapper showing it again (a ProcessSeen naming it) brings it back.
                return None
            claim = Claim(
                "pid_probe",
                "alive",
                message.at_ms,
                message.observed_at_ms,
                running=True,
                owner=(message.pid, message.start_token),
            )
            return apply_claim(state, claim)
        case ProcessGone():
            native = "recycled" if message.recycled else "gone"
            if message.key == state.key and not state.host_owned:
                # The pane mapper names the session the dead process stood for by itself: it
                # ends, even if it had ended (given way to the session the process showed).
                if state.known and state.source == "pid_probe" and state.presence == "persisted":
                    return None
                return end_session(
                    state, message.at_ms, "pid_probe", native, message.observed_at_ms
                )
            if state.host_owned or state.presence != "running":
                return None
            if not _owned_by(state, message.pid, message.start_token):
                return None
            return end_session(state, message.at_ms, "pid_probe", native, message.observed_at_ms)
        case RegistryRemoved():
            if state.host_owned or state.presence != "running":
                return None
            if message.pid_alive and not message.rotated:
                return None  # file gone but owner alive: no proof either way
            native = "rotated" if message.rotated else "removed"
            return end_session(
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
            return end_session(
                state, message.at_ms, "codex_rollout", "released", message.observed_at_ms
            )
        case LedgerFire():
            return reduce_ledger(state, message)
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
            ended = end_session(
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
                return end_session(
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
                claim = Claim(
                    "host",
                    "interrupt",
                    message.at_ms,
                    message.at_ms,
                    turn="idle",
                    completion="interrupted",
                )
                return apply_claim(state, claim)
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


def _gave_way(state: SessionState) -> bool:
    """Ended by the pane mapper because its process shows another session
    (``PaneUnbound(replaced=True)``), and nothing has brought it back since."""
    return state.source == "pane_mapper" and state.native == REPLACED
