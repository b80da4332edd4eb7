"""Claude Code: everything paneward knows about it, in one package.

- :mod:`.paths` -- where its files are (``$CLAUDE_CONFIG_DIR``, default ``~/.claude``);
- :mod:`.hooks` -- its 34 hook events and how each payload maps to a hint;
- :mod:`.registry` -- ``sessions/<pid>.json``: the parser and the discovery actor;
- :mod:`.install` -- the ``settings.json`` edit ``paneward install-hooks claude-code`` makes.

Facts: reference/real-harnesses.md §4. The owner of a hook is ``$CLAUDE_PID`` (the hook's
parent is ``/bin/sh``): :mod:`.install` writes ``--owner env:CLAUDE_PID`` into the command.
"""

from __future__ import annotations

from actors.core.harness import HarnessSpec
from actors.harnesses.claude_code import hooks

__all__ = ["SPEC"]

SPEC = HarnessSpec(
    id="claude-code",
    summary="registry files, command/http hooks, OSC 7501 under paneward wrap",
    normalize=hooks.normalize,
    http_refused=dict.fromkeys(
        hooks.HTTP_REFUSED_EVENTS,
        "Claude Code never sends it as an http hook and it needs CLAUDE_PID: keep a command "
        "hook (`paneward hook --harness claude-code`) for it",
    ),
)
