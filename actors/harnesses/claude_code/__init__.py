"""Claude Code: everything paneward knows about it, in one package.

- :mod:`.paths` -- where its files are (``$CLAUDE_CONFIG_DIR``, default ``~/.claude``);
- :mod:`.hooks` -- its 34 hook events and how each payload maps to a hint;
- :mod:`.registry` -- ``sessions/<pid>.json``: the parser and the discovery actor;
- :mod:`.install` -- the ``settings.json`` edit ``paneward install-hooks claude-code`` makes.

Facts: tests/fixtures/claude_registry/, tests/fixtures/hooks/. The owner of a hook is
``$CLAUDE_PID`` (the hook's parent is ``/bin/sh``): :mod:`.install` writes ``--owner
env:CLAUDE_PID`` into the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from actors.core.session.harness import Discovery, DiscoveryActor, HarnessSpec, Proof
from actors.harnesses.claude_code import hooks

if TYPE_CHECKING:
    from actors.core.install.config_edit import Installer

__all__ = ["PROOFS", "SPEC"]

#: What Claude Code can prove, and from what (docs/design.md §4, "What a harness can prove").
PROOFS = (
    Proof("running", ("claude_registry", "claude_hook", "pty_host"),
          "sessions/<pid>.json of a live pid with its procStart; a command hook's $CLAUDE_PID"),
    Proof("working", ("claude_registry", "claude_hook", "pty_status", "tmux_output"),
          "registry busy; UserPromptSubmit, PreToolUse, PostToolUse; OSC 7501 working"),
    Proof("idle", ("claude_registry", "claude_hook", "pty_status", "tmux_output"),
          "registry idle/shell; Stop; OSC 7501 done/idle"),
    Proof("needs_input", ("claude_registry", "claude_hook", "pty_status", "tmux_output"),
          "registry waiting (waitingFor); PermissionRequest, Elicitation; OSC 7501 blocked. "
          "An answered permission is proven only by the registry (waiting -> busy) or the next "
          "tool event: the answer itself has no hook"),
    Proof("turn_done", ("claude_hook", "claude_registry", "pty_status", "tmux_output"),
          "Stop for the turn's prompt_id; registry busy -> idle of a session without hooks; "
          "OSC 7501 done (an Esc is registry busy -> idle without Stop: no turn_done)"),
    Proof("failed", ("pid_probe", "pty_host"),
          "process evidence: death while working, a non-zero PTY exit or a signal"),
)

def _installer() -> Installer:
    from actors.harnesses.claude_code import install

    return install.INSTALLER


def _registry(home: Path | None) -> DiscoveryActor:
    from actors.harnesses.claude_code.registry import ClaudeRegistryWatcher

    return ClaudeRegistryWatcher(None if home is None else home / "sessions")


SPEC = HarnessSpec(
    id="claude-code",
    summary="registry files, command/http hooks, OSC 7501 under paneward wrap",
    sources=("claude_registry", "claude_hook"),
    normalize=hooks.normalize,
    http_refused=dict.fromkeys(
        hooks.HTTP_REFUSED_EVENTS,
        "Claude Code never sends it as an http hook and it needs CLAUDE_PID: keep a command "
        "hook (`paneward hook --harness claude-code`) for it",
    ),
    proofs=PROOFS,
    installer=_installer,
    discovery=(Discovery("claude_registry", _registry),),
    home_env=("CLAUDE_CONFIG_DIR",),
    wrap_commands=("claude",),
)
