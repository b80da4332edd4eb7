"""OpenCode: everything paneward knows about it, in one package.

- :mod:`.paths` -- where its configuration is (``$XDG_CONFIG_HOME/opencode``);
- :mod:`.hooks` -- the events paneward's plugin forwards, and how each maps to a hint;
- :mod:`.install` -- the plugin ``paneward install-hooks opencode`` writes.

Facts: tests/fixtures/opencode/. The owner is the opencode process the plugin runs in
(its ``process.pid``); the pane mapper binds it by process identity. The TUI's own ``/event`` SSE
stream (``opencode --port N``) carries the same events; paneward uses the plugin, which needs no
port.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.core.session.harness import HarnessSpec, Proof
from actors.harnesses.opencode import hooks

if TYPE_CHECKING:
    from actors.core.install.config_edit import Installer

__all__ = ["PROOFS", "SPEC"]

#: What OpenCode can prove (through paneward's plugin), and from what.
PROOFS = (
    Proof("running", ("opencode_plugin",), "the plugin runs in opencode: its process.pid"),
    Proof("working", ("opencode_plugin",),
          "session.status busy; permission.replied (status stays busy during a wait)"),
    Proof("idle", ("opencode_plugin",), "session.idle"),
    Proof("needs_input", ("opencode_plugin",),
          "permission.asked, answered by permission.replied"),
    Proof("turn_done", ("opencode_plugin",),
          "session.idle with no session.error in that turn (MessageAbortedError is an Esc)"),
    Proof("failed", ("pid_probe",), "process evidence: the owner died while working"),
)

def _installer() -> Installer:
    from actors.harnesses.opencode import install

    return install.INSTALLER


SPEC = HarnessSpec(
    id="opencode",
    summary="paneward's in-process plugin (bus events)",
    sources=("opencode_plugin",),
    normalize=hooks.normalize,
    proofs=PROOFS,
    installer=_installer,
)
