"""What a Codex TUI process proves about the thread it shows (pure).

Facts (docs/discovery.md): in daemon mode (the default) the TUI holds no rollout
and nothing on disk names its thread; the shared ``codex app-server`` daemon below it holds the
rollouts of every thread. The daemon itself says which TUI a thread is attached to
(:mod:`.daemon`: proof ``codex_daemon_mcp``, learnt by the pane mapper as an owner). What a
process shows by itself: ``codex resume <thread-id>`` on the command line of a process named
``codex`` (proof ``codex_resume_argv``); otherwise a TUI process is bound to its own session
``codex:tui-<pid>-<token>`` (proof ``codex_tui_process``: presence only, turn unknown) --
never to a guessed thread -- and ``paneward status`` says why (:func:`pane_note`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import messages
from actors.core.session.pane_map import Binding
from messages.activity import Activity
from messages.common import MAX_ID_LEN

__all__ = [
    "BINDING_COMMS",
    "codex_resume_thread",
    "codex_tui_key",
    "is_codex_tui",
    "pane_note",
    "process_binding",
]

#: What ``paneward status`` says of a pane that shows a Codex TUI whose thread is not proven.
UNBOUND_NOTE: Final = (
    "codex daemon: thread not bound to this pane (nothing proves which thread this TUI shows;"
    " run it as `paneward wrap -- codex`)"
)

#: The process names whose command line can prove something (the walk reads only theirs).
BINDING_COMMS: Final = frozenset({"codex"})


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


def process_binding(
    pid: int, comm: str, argv: Sequence[str], token: str | None
) -> Binding | None:
    """What process ``pid`` (named ``comm``, run as ``argv``, start token ``token``) proves.

    A ``codex resume <id>`` names the thread; a bare TUI (with a known token) is bound to its own
    session; anything else proves nothing.
    """
    thread = codex_resume_thread(comm, argv)
    if thread is not None:
        return Binding(messages.SessionKey("codex", thread), "codex_resume_argv")
    if token is not None and is_codex_tui(comm, argv):
        return Binding(codex_tui_key(pid, token), "codex_tui_process", pid, token)
    return None


def pane_note(activity: Activity) -> str | None:
    """Why a pane shows ``activity`` and no turn: a live Codex TUI bound to itself."""
    key = activity.key
    if key.harness == "codex" and key.session_id.startswith("tui-") and (
        activity.presence == "running"
    ):
        return UNBOUND_NOTE
    return None
