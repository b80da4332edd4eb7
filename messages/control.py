"""Inbound host control: panes, focus, acknowledgement, forgetting and signals.

Sent by the embedding multiplexer host (or the tmux actor standing in for it)
and by the pane mapper; handled by the supervisor, which routes each to the
session bound to the pane or named by the key.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from messages.common import Id, Message, Pid, SessionKey, Source, Text, TimeMs

__all__ = [
    "Acknowledge",
    "ControlMessage",
    "Forget",
    "HostSignal",
    "PaneBound",
    "PaneClosed",
    "PaneFocused",
    "PaneOpened",
    "PaneUnbound",
]


class ControlMessage(Message, frozen=True):
    """Base of every inbound control message (its settings: :class:`messages.common.Message`).

    Each one the session reducer applies states its evidence ``source`` on its own class, as
    :class:`~messages.evidence.EvidenceMessage` says (``host`` or ``pane_mapper``: no
    harness's own, so what a harness can prove never limits it).
    """


class PaneOpened(ControlMessage, frozen=True, kw_only=True):
    """A pane exists with ``root_pid`` as the process the host started in it.

    Sent by the host or the tmux bridge when a pane appears or is respawned, and by the tmux
    output reader (:mod:`actors.sinks.tmux_output`) again for a known pane whose foreground
    program changed (a shell that started ``codex``); handled by the pane mapper, which walks
    the process tree below ``root_pid`` to find a session to bind (a repeat is a fresh walk).
    """

    pane: Id
    root_pid: Pid
    at_ms: TimeMs
    cwd: Text | None = None
    focused: bool = False


class PaneClosed(ControlMessage, frozen=True):
    """A pane is gone. Sent by the host or tmux; the pane mapper unbinds it."""

    pane: Id
    at_ms: TimeMs


class PaneFocused(ControlMessage, frozen=True):
    """The user focused ``pane``. Closes ``turn_done`` for its session.

    Sent by the host or tmux; the supervisor routes it to the session bound to
    the pane and to the session of the pane focused before it.
    """

    source: ClassVar[Source] = "host"

    pane: Id
    at_ms: TimeMs


class PaneBound(ControlMessage, frozen=True, kw_only=True):
    """The pane mapper proved that ``key``'s owner runs in ``pane``.

    ``proof`` says which proof (``claude_registry_pid``, ``codex_rollout_owner``,
    ``hook_owner_pid``, ``codex_resume_argv``, ``pty_status``, ``host``).
    """

    source: ClassVar[Source] = "pane_mapper"

    key: SessionKey
    pane: Id
    at_ms: TimeMs
    proof: str = "host"


class PaneUnbound(ControlMessage, frozen=True, kw_only=True):
    """``key`` is no longer shown in ``pane`` (pane closed or another agent started).

    ``replaced``: ``key`` was the session a process stood for by itself (a Codex TUI whose
    thread nothing named yet) and the session that process shows now has the pane; ``key``
    ends with it (sent by the pane mapper, which then forgets it: :class:`Forget`).
    """

    source: ClassVar[Source] = "pane_mapper"

    key: SessionKey
    pane: Id
    at_ms: TimeMs
    replaced: bool = False


class Acknowledge(ControlMessage, frozen=True):
    """The user acknowledged the session's attention item (``turn_done`` or ``failed``).

    Sent by the host or the CLI; names the session by ``key`` or by ``pane``.
    """

    source: ClassVar[Source] = "host"

    at_ms: TimeMs
    key: SessionKey | None = None
    pane: Id | None = None


class Forget(ControlMessage, frozen=True):
    """An ended session is dismissed: it leaves every view and the store.

    Sent by the CLI (``paneward forget``: the user dismissed it) or a host, and by the pane
    mapper for a process's own session that gave way to the session the process shows
    (``PaneUnbound.replaced``: a Codex TUI whose thread became known); routed to ``key``'s
    session, whose reducer takes it only when the session has ended (presence ``persisted``):
    it then publishes one last transition (cause ``Forget``:
    :attr:`messages.activity.Transition.forgets`; no pane, no attention), and the supervisor
    drops the session from its catalog, so no later snapshot has it and the store deletes its
    row. A live session is left as it is. Evidence for the key after that
    starts the session again.
    """

    source: ClassVar[Source] = "host"

    key: SessionKey
    at_ms: TimeMs


class HostSignal(ControlMessage, frozen=True, kw_only=True):
    """The host delivered ``interrupt`` (Ctrl-C), ``eof`` or ``terminate`` to the session.

    ``interrupt`` makes the turn idle without opening ``turn_done``;
    ``terminate`` moves presence to ``shutting_down``.
    """

    source: ClassVar[Source] = "host"

    key: SessionKey
    signal: Literal["interrupt", "eof", "terminate"]
    at_ms: TimeMs
    reason: Text | None = None
