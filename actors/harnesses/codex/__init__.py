"""Codex CLI: everything paneward knows about it, in one package.

- :mod:`.paths` -- where its files are (``$CODEX_HOME``, default ``~/.codex``);
- :mod:`.hooks` -- ``notify`` and ``hooks.json`` payloads to hints;
- :mod:`.rollouts` -- rollout files held open by a ``codex`` process: a package of the
  parsing, the tail, ownership sampling, the blocking reads and the discovery actor;
- :mod:`.tui` -- what a TUI process proves about the thread it shows;
- :mod:`.daemon` -- the shared app-server daemon's control socket: thread status, and which
  TUI shows which thread (the daemon's MCP connection to the TUI's own listener);
- :mod:`.jsonrpc` -- the daemon's protocol, JSON-RPC over a WebSocket, sans-IO;
- :mod:`.approvals` -- which tool call an approval wait is about, from the rollout's tail;
- :mod:`.install` -- the ``config.toml`` / ``hooks.json`` edits of ``install-hooks codex``.

Facts: real rollouts in tests/fixtures/codex/, docs/discovery.md. The owner of a hook or notify
is the hook's parent, the ``codex`` process that runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from actors.core.session.harness import Discovery, DiscoveryActor, HarnessSpec, Proof
from actors.harnesses.codex import hooks, tui

if TYPE_CHECKING:
    from actors.core.install.config_edit import Installer

__all__ = ["PROOFS", "SPEC"]

#: What Codex can prove, and from what (docs/design.md §4, "What a harness can prove").
PROOFS = (
    Proof("running", ("codex_rollout", "codex_hook", "codex_notify", "codex_daemon", "pty_host"),
          "a `codex` process holding the rollout open; the hook's parent (--owner parent); the "
          "daemon's loaded thread with its TUI attached"),
    Proof("working", ("codex_rollout", "codex_hook", "codex_daemon", "pty_status", "tmux_output"),
          "rollout task_started; UserPromptSubmit, PreToolUse, PostToolUse; the daemon's "
          "thread status active; OSC 7501 working"),
    Proof("idle", ("codex_rollout", "codex_hook", "codex_notify", "codex_daemon", "pty_status",
                   "tmux_output"),
          "rollout task_complete/turn_aborted; Stop; notify agent-turn-complete; the daemon's "
          "thread status idle; OSC 7501"),
    Proof("needs_input", ("codex_hook", "codex_daemon", "pty_status", "tmux_output"),
          "PermissionRequest hook (once its hooks are trusted); the daemon's activeFlags "
          "waitingOnApproval / waitingOnUserInput; OSC 7501 blocked. A rollout records the pending "
          "call (which names the command), never the wait itself"),
    Proof("turn_done", ("codex_rollout", "codex_hook", "codex_notify", "pty_status", "tmux_output"),
          "rollout task_complete; Stop; notify agent-turn-complete; OSC 7501 done "
          "(turn_aborted is an interrupt: no turn_done; the daemon's idle is not a completion)"),
    Proof("failed", ("pid_probe", "pty_host", "codex_daemon"),
          "process evidence: death while working, a non-zero PTY exit or a signal; the "
          "daemon's systemError"),
)

def _installer() -> Installer:
    from actors.harnesses.codex import install

    return install.INSTALLER


def _rollouts(home: Path | None) -> DiscoveryActor:
    from actors.harnesses.codex.rollouts import CodexRolloutDiscovery

    return CodexRolloutDiscovery(home)


def _app_server(home: Path | None) -> DiscoveryActor:
    from actors.harnesses.codex.daemon import CodexDaemonSource

    return CodexDaemonSource(home)


SPEC = HarnessSpec(
    id="codex",
    summary=(
        "rollout files held open, the app-server daemon's thread status, notify, hooks.json,"
        " OSC 7501 (under paneward wrap, or read from tmux's pane output)"
    ),
    sources=("codex_rollout", "codex_notify", "codex_hook", "codex_daemon"),
    normalize=hooks.normalize,
    binding_comms=tui.BINDING_COMMS,
    process_binding=tui.process_binding,
    proofs=PROOFS,
    pane_note=tui.pane_note,
    installer=_installer,
    discovery=(Discovery("codex_rollouts", _rollouts), Discovery("codex_daemon", _app_server)),
    home_env=("CODEX_HOME",),
    wrap_commands=("codex",),
)
