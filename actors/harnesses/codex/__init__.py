"""Codex CLI: everything paneward knows about it, in one package.

- :mod:`.paths` -- where its files are (``$CODEX_HOME``, default ``~/.codex``);
- :mod:`.hooks` -- ``notify`` and ``hooks.json`` payloads to hints;
- :mod:`.rollouts` -- rollout files held open by a ``codex`` process: the discovery actor;
- :mod:`.tui` -- what a TUI process proves about the thread it shows;
- :mod:`.daemon` -- the shared app-server daemon's control socket: thread status, and which
  TUI shows which thread (the daemon's MCP connection to the TUI's own listener);
- :mod:`.install` -- the ``config.toml`` / ``hooks.json`` edits of ``install-hooks codex``.

Facts: reference/real-harnesses.md §5, real-harnesses-2.md §2. The owner of a hook or notify
is the hook's parent, the ``codex`` process that runs it.
"""

from __future__ import annotations

from actors.core.harness import HarnessSpec
from actors.harnesses.codex import hooks, tui

__all__ = ["SPEC"]

SPEC = HarnessSpec(
    id="codex",
    summary=(
        "rollout files held open, the app-server daemon's thread status, notify, hooks.json,"
        " OSC 7501 under paneward wrap"
    ),
    normalize=hooks.normalize,
    claim_comms=tui.CLAIM_COMMS,
    process_claim=tui.process_claim,
    pane_note=tui.pane_note,
)
