"""Gemini CLI: everything paneward knows about it, in one package.

- :mod:`.paths` -- where its files are (``$GEMINI_CLI_HOME/.gemini``, default ``~/.gemini``);
- :mod:`.hooks` -- its hook events and how each payload maps to a hint;
- :mod:`.install` -- the ``settings.json`` edit ``paneward install-hooks gemini`` makes.

Facts: tests/fixtures/gemini/. The owner of a hook is its parent, the CLI's node process
(there is no pid in the hook's environment): :mod:`.install` writes ``--owner parent``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.core.session.harness import HarnessSpec, Proof
from actors.harnesses.gemini import hooks

if TYPE_CHECKING:
    from actors.core.install.config_edit import Installer

__all__ = ["PROOFS", "SPEC"]

#: What Gemini CLI can prove, and what it cannot.
PROOFS = (
    Proof("running", ("gemini_hook",), "the hook's parent, Gemini's node process"),
    Proof("working", ("gemini_hook",), "BeforeAgent; AfterTool"),
    Proof("idle", ("gemini_hook",), "AfterAgent"),
    Proof("needs_input", ("gemini_hook",),
          "Notification ToolPermission; its answer has no event: the next AfterTool or "
          "AfterAgent closes it"),
    Proof("turn_done", ("gemini_hook",),
          "AfterAgent -- but an Esc interrupt is an AfterAgent too, with no flag: an "
          "interrupted turn also shows as done"),
    Proof("failed", ("pid_probe",), "process evidence: the owner died while working"),
)

def _installer() -> Installer:
    from actors.harnesses.gemini import install

    return install.INSTALLER


SPEC = HarnessSpec(
    id="gemini",
    summary="settings.json command hooks (synchronous: only the events paneward needs)",
    sources=("gemini_hook",),
    normalize=hooks.normalize,
    proofs=PROOFS,
    installer=_installer,
)
