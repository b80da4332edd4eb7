"""Inbound evidence: facts about the world, each with the time it happened.

Every message carries ``at_ms`` (when the fact happened, as best known: the hook
client's clock when the hook fired, registry ``statusUpdatedAt``, a rollout
record's ``timestamp``, the exit time) and ``observed_at_ms`` (when paneward saw
it). Session-scoped messages are routed by the supervisor to the session actor
of their ``key``; pid-scoped ones (``ProcessSeen``/``ProcessGone``) to every
session whose owner is that pid.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from messages.common import Harness, Id, Message, Pid, SessionKey, Source, Text, TimeMs

__all__ = [
    "Boundary",
    "ClientAttached",
    "EvidenceMessage",
    "HintKind",
    "HookHint",
    "LedgerFire",
    "LifecycleBoundary",
    "Numbered",
    "NotifyHook",
    "ProcessGone",
    "ProcessSeen",
    "ProgramState",
    "ProgramStatus",
    "PtyExit",
    "PtySpawned",
    "RegistryRemoved",
    "RegistryStatus",
    "RolloutOwned",
    "RolloutReleased",
    "ThreadState",
    "ThreadStatus",
]


class EvidenceMessage(Message, frozen=True):
    """Base of every inbound evidence message (its settings: :class:`messages.common.Message`).

    Each one the session reducer applies states, on its own class, the evidence ``source`` of
    what it claims (a class variable, never encoded; :class:`HookHint` carries it as a field):
    the reducer limits a claim by what that source can prove for the session's harness
    (tests/test_design.py checks that every session message states one).
    """


class Numbered(EvidenceMessage, frozen=True, kw_only=True):
    """Base of the evidence whose source numbers its records (:class:`HookHint` from paneward's
    OpenCode plugin and Pi extension, :class:`ProgramStatus` from an OSC 7501 parser,
    :class:`ThreadStatus` from a Codex daemon connection).

    The reducer drops a record identical to one it has seen, and ``at_ms`` counts milliseconds:
    a session can go ``working``, ``idle``, ``working`` within one, and the second ``working``
    would read as the first one again. ``serial``, the record's number from its source, keeps
    such records apart; ``None``: the source does not number its records.
    """

    serial: int | None = None


class ProcessSeen(EvidenceMessage, frozen=True, kw_only=True):
    """A pid was probed and found alive with this start token.

    Sent by the pid watcher (and discovery actors that just read the token);
    handled by the supervisor, which routes it to every session owned by ``pid``.
    With ``key`` it also claims that this process owns that session (the pane
    mapper's Codex TUI whose thread nothing names). It proves presence and
    nothing else: the turn stays as it was (``unknown`` for a new session).
    """

    source: ClassVar[Source] = "pid_probe"

    pid: Pid
    start_token: str
    at_ms: TimeMs
    observed_at_ms: TimeMs
    ppid: int | None = None
    key: SessionKey | None = None


class ProcessGone(EvidenceMessage, frozen=True, kw_only=True):
    """A pid the watcher had seen alive is gone, or now has another start token.

    Sent by the pid watcher; routed by the supervisor to the sessions owned by
    that incarnation (``start_token``; ``None`` means any incarnation). Handled by
    the session reducer: presence ``persisted``, turn ``unknown``, and attention
    ``failed`` if the turn was ``working``. With ``key`` (sent by the pane mapper) it names
    the session that process stood for by itself -- a Codex TUI's own session, shown in its
    pane again when the TUI that showed a thread died -- which it ends even if it had ended.
    """

    source: ClassVar[Source] = "pid_probe"

    pid: Pid
    at_ms: TimeMs
    observed_at_ms: TimeMs
    start_token: str | None = None
    recycled: bool = False
    key: SessionKey | None = None


class RegistryStatus(EvidenceMessage, frozen=True, kw_only=True):
    """One validated write of Claude Code's ``sessions/<pid>.json``.

    Sent by the Claude discovery actor only for records whose pid is alive with a
    matching ``procStart`` (so it proves a live owner); ``status`` is ``None`` for
    the first write, which has no status. ``at_ms`` is ``statusUpdatedAt``.
    Handled by the session reducer (turn source ``claude_registry``).
    """

    source: ClassVar[Source] = "claude_registry"

    key: SessionKey
    pid: Pid
    start_token: str
    status: str | None
    at_ms: TimeMs
    observed_at_ms: TimeMs
    waiting_for: Text | None = None
    version: str | None = None


class RegistryRemoved(EvidenceMessage, frozen=True, kw_only=True):
    """Claude's ``sessions/<pid>.json`` disappeared, or now names another session.

    Sent by the Claude discovery actor; ``pid_alive`` says whether the owner was
    alive when the removal was seen. Handled by the session reducer: a removal
    with a dead owner ends the session; a session-id rotation (``/clear``,
    ``/resume``) with a live owner ends the old key (``rotated``).
    """

    source: ClassVar[Source] = "claude_registry"

    key: SessionKey
    pid: Pid
    at_ms: TimeMs
    observed_at_ms: TimeMs
    pid_alive: bool = False
    rotated: bool = False


Boundary = Literal["task_started", "task_complete", "turn_aborted"]


class LifecycleBoundary(EvidenceMessage, frozen=True, kw_only=True):
    """A Codex rollout lifecycle record (``event_msg`` task_started/complete/aborted).

    Sent by the Codex discovery actor's rollout tail. ``key`` is the thread the
    record belongs to; ``root_key`` is set for a child thread whose
    ``session_meta`` names a parent, and the supervisor then routes it to the
    root session, where child status rolls up (busy > idle > running).
    """

    source: ClassVar[Source] = "codex_rollout"

    key: SessionKey
    boundary: Boundary
    at_ms: TimeMs
    observed_at_ms: TimeMs
    turn_id: str | None = None
    root_key: SessionKey | None = None
    version: str | None = None


class RolloutOwned(EvidenceMessage, frozen=True, kw_only=True):
    """A process whose comm is exactly ``codex`` holds this thread's rollout open.

    Sent by the Codex discovery actor; proves presence ``running`` for ``key``.
    """

    source: ClassVar[Source] = "codex_rollout"

    key: SessionKey
    pid: Pid
    start_token: str
    at_ms: TimeMs
    observed_at_ms: TimeMs
    root_key: SessionKey | None = None
    version: str | None = None


class RolloutReleased(EvidenceMessage, frozen=True, kw_only=True):
    """Rollout ownership of ``key`` was missed in two consecutive samples.

    Sent by the Codex discovery actor; handled by the session reducer as proof
    of death of that owner (presence ``persisted``).
    """

    source: ClassVar[Source] = "codex_rollout"

    key: SessionKey
    pid: Pid
    at_ms: TimeMs
    observed_at_ms: TimeMs


ThreadState = Literal["idle", "active", "systemError", "notLoaded", "closed"]


class ThreadStatus(Numbered, frozen=True, kw_only=True):
    """The Codex app-server daemon's own status of one loaded thread.

    Sent by the Codex daemon source (:mod:`actors.harnesses.codex.daemon`) for every
    ``thread/status/changed`` broadcast, for each loaded thread when it (re)connects
    (``thread/read``), and with ``status="closed"`` for ``thread/closed``. ``flags`` are the
    ``activeFlags`` of an ``active`` status (``waitingOnApproval``, ``waitingOnUserInput``);
    ``pid``/``start_token`` name the daemon (the peer of its control socket), which runs the
    thread. ``root_key`` is set for a child thread (``parentThreadId``): the supervisor then
    routes it to the root, where child status rolls up. ``summary`` is the permission reason
    (:func:`actors.core.session.hints.permission_reason`) of the tool call a ``waitingOnApproval``
    status waits on, found in the rollout's tail (:mod:`actors.harnesses.codex.approvals`):
    the reason the ``PermissionRequest`` hook gives for the same dialog; ``None`` when it was
    not found. Handled by the session reducer (source ``codex_daemon``); ``at_ms`` is the
    daemon's ``emittedAtMs``.
    """

    source: ClassVar[Source] = "codex_daemon"

    key: SessionKey
    status: ThreadState
    at_ms: TimeMs
    observed_at_ms: TimeMs
    flags: tuple[str, ...] = ()
    pid: Pid | None = None
    start_token: str | None = None
    root_key: SessionKey | None = None
    version: str | None = None
    summary: Text | None = None


class ClientAttached(EvidenceMessage, frozen=True, kw_only=True):
    """Process ``pid`` shows session ``key``, which another process runs.

    A Codex TUI in daemon mode shows a thread the shared app-server daemon runs. Sent by the
    Codex daemon source each time a thread is (re)attached (``thread/started``, a reload after
    ``notLoaded``) when the daemon says that thread's ``codex_tui`` MCP server is at
    ``127.0.0.1:<port>`` and the loopback listener on that port is a socket held by ``pid``, a
    Codex TUI (``proof`` ``codex_daemon_mcp``). Handled by the pane mapper (the newest
    attachment of a process is what its pane shows) and the pid watcher; never by a session:
    it proves nothing about presence or the turn.
    """

    key: SessionKey
    pid: Pid
    start_token: str
    proof: Id
    at_ms: TimeMs
    observed_at_ms: TimeMs


class NotifyHook(EvidenceMessage, frozen=True, kw_only=True):
    """A raw hook payload as the harness sent it (Claude/Codex/Cursor/Hermes/Gemini hooks, Codex
    notify, the OpenCode plugin and the Pi extension, which build the same frame themselves).

    Sent by the hook listener (socket or http) and ``paneward inject``. The
    supervisor normalizes it at the edge with the harness module into a
    :class:`HookHint` (or a counted ``unmapped`` event) before routing.
    ``pid``/``start_token`` are the claimed owner (``CLAUDE_PID``, or the hook
    client's parent for Codex).
    """

    harness: Harness
    payload: dict[str, Any]
    at_ms: TimeMs
    observed_at_ms: TimeMs
    pid: Pid | None = None
    start_token: str | None = None


HintKind = Literal[
    "start",  # a session began; no turn claim
    "working",  # a turn is running
    "completed",  # a turn completed (completion boundary: opens turn_done)
    "interrupted",  # a turn ended without completing (no turn_done)
    "idle",  # the turn is idle, neither completion nor interrupt
    "needs_input",  # the harness is blocked on the user (immediate signals)
    "late_needs_input",  # a delayed permission notification: opens only without better proof
    "subagent_start",
    "subagent_stop",
    "ended",  # the session ended (SessionEnd)
    "info",  # a known event that makes no claim (MessageDisplay, idle_prompt, ...)
]


class HookHint(Numbered, frozen=True, kw_only=True):
    """A hook payload normalized by its harness module.

    Produced by ``actors.harnesses.<harness>.normalize`` from a
    :class:`NotifyHook` (it may also be injected directly); handled by the
    session reducer.
    """

    key: SessionKey
    source: Literal[
        "claude_hook",
        "codex_notify",
        "codex_hook",
        "cursor_hook",
        "hermes_hook",
        "gemini_hook",
        "opencode_plugin",
        "pi_extension",
    ]
    event: str
    hint: HintKind
    at_ms: TimeMs
    observed_at_ms: TimeMs
    prompt_id: str | None = None
    turn_id: str | None = None
    tool: Text | None = None
    summary: Text | None = None
    agent_id: str | None = None
    pid: Pid | None = None
    start_token: str | None = None
    version: str | None = None
    #: The in-flight background work a payload lists (Claude ``Stop``/``SubagentStop``
    #: ``background_tasks``, background shells left out), by id; ``None``: no list in it.
    background: tuple[Id, ...] | None = None


class LedgerFire(EvidenceMessage, frozen=True, kw_only=True):
    """One Hermes cron execution row (``cron/executions.db``).

    Sent by the Hermes discovery actor; ``pid_alive`` is whether the recorded
    pid is alive with a matching start time. Handled by the session reducer.
    """

    source: ClassVar[Source] = "hermes_executions"

    key: SessionKey
    status: str
    at_ms: TimeMs
    observed_at_ms: TimeMs
    pid: Pid | None = None
    pid_alive: bool = False


class PtySpawned(EvidenceMessage, frozen=True, kw_only=True):
    """A host (or ``paneward wrap``) started ``key``'s program in a PTY it owns.

    The host is then the authority on presence for this session.
    """

    source: ClassVar[Source] = "pty_host"

    key: SessionKey
    pid: Pid
    start_token: str
    at_ms: TimeMs
    observed_at_ms: TimeMs
    pane: Id | None = None


class PtyExit(EvidenceMessage, frozen=True, kw_only=True):
    """The host PTY's program exited with ``code`` or was killed by ``signal``.

    Handled by the session reducer: presence ``persisted``; non-zero code or a
    signal opens attention ``failed``. ``key`` or ``pane`` names the session.
    """

    source: ClassVar[Source] = "pty_host"

    at_ms: TimeMs
    observed_at_ms: TimeMs
    key: SessionKey | None = None
    pane: Id | None = None
    code: int | None = None
    signal: int | None = None


ProgramState = Literal["working", "blocked", "done", "idle", "clear"]


class ProgramStatus(Numbered, frozen=True, kw_only=True):
    """One OSC 7501 program-status record from the PTY stream.

    Sent by ``paneward wrap`` or a host that feeds its PTY bytes through the parser
    (``source`` ``pty_status``), or by the tmux bridge, which reads the records from tmux's
    own output stream (``tmux_output``, :mod:`actors.sinks.tmux_output`); routed by ``key``,
    else by the session bound to ``pane``.
    """

    source: Literal["pty_status", "tmux_output"] = "pty_status"

    state: ProgramState
    at_ms: TimeMs
    observed_at_ms: TimeMs
    key: SessionKey | None = None
    pane: Id | None = None
    kind: str | None = None
    app: str | None = None
    message: Text | None = None
    child_id: str | None = None
    title: Text | None = None
