"""Cursor: everything paneward knows about it, in one package.

- :mod:`.hooks` -- its hook payloads to hints;
- :mod:`.install` -- the ``~/.cursor/hooks.json`` edit of ``install-hooks cursor``.

Its hooks name no owner process, so they prove turns, never presence -- and a turn is shown
only while its owner is proven, so a Cursor session shows ``persisted`` / ``unknown`` unless a
host or ``paneward wrap`` proves the process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.core.session.harness import HarnessSpec, Proof
from actors.harnesses.cursor import hooks

if TYPE_CHECKING:
    from actors.core.install.config_edit import Installer

__all__ = ["PROOFS", "SPEC"]

#: What Cursor's hooks can prove, and what they cannot.
PROOFS = (
    Proof("running", (), "its hooks name no owner process (installed with --owner none)"),
    Proof("working", ("cursor_hook",),
          "beforeSubmitPrompt, before*/after* tool events, afterAgentResponse"),
    Proof("idle", ("cursor_hook",), "stop (any status), sessionEnd"),
    Proof("needs_input", (), "Cursor hooks have no permission event: a wait shows as working"),
    Proof("turn_done", ("cursor_hook",), "stop with status completed (aborted: no turn_done)"),
    Proof("failed", (), "no owner process is known, so no death can be seen"),
)

def _installer() -> Installer:
    from actors.harnesses.cursor import install

    return install.INSTALLER


SPEC = HarnessSpec(
    id="cursor",
    summary="hooks.json hooks",
    sources=("cursor_hook",),
    normalize=hooks.normalize,
    proofs=PROOFS,
    installer=_installer,
)
