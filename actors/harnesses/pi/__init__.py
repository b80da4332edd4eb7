"""Pi (``@mariozechner/pi-coding-agent``): everything paneward knows about it, in one package.

- :mod:`.paths` -- where its agent directory is (``$PI_CODING_AGENT_DIR``, ``~/.pi/agent``);
- :mod:`.hooks` -- the events paneward's extension forwards, and how each maps to a hint;
- :mod:`.install` -- the extension ``paneward install-hooks pi`` writes.

Facts: tests/fixtures/pi/. Pi emits no OSC 7501 (``paneward wrap`` recovers nothing
from it) and asks no permission. The owner is the pi process the extension runs in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.core.session.harness import HarnessSpec, Proof
from actors.harnesses.pi import hooks

if TYPE_CHECKING:
    from actors.core.install.config_edit import Installer

__all__ = ["PROOFS", "SPEC"]

#: What Pi can prove (through paneward's extension), and what it cannot.
PROOFS = (
    Proof("running", ("pi_extension",), "the extension runs in pi: its process.pid"),
    Proof("working", ("pi_extension",), "agent_start, tool_execution_start/end"),
    Proof("idle", ("pi_extension",), "agent_end"),
    Proof("needs_input", (), "Pi has no permission prompt and no permission event"),
    Proof("turn_done", ("pi_extension",),
          "agent_end whose last message did not stop as aborted (Esc) or error"),
    Proof("failed", ("pid_probe",), "process evidence: the owner died while working"),
)

def _installer() -> Installer:
    from actors.harnesses.pi import install

    return install.INSTALLER


SPEC = HarnessSpec(
    id="pi",
    summary="paneward's in-process extension (agent events); no OSC 7501",
    sources=("pi_extension",),
    normalize=hooks.normalize,
    proofs=PROOFS,
    installer=_installer,
)
