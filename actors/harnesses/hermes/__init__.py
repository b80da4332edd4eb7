"""Hermes Agent: everything paneward knows about it, in one package.

- :mod:`.paths` -- where its files are (``$HERMES_HOME``, default ``~/.hermes``);
- :mod:`.ledger` -- the cron execution ledger (``cron/executions.db`` + ``state.db``): the
  join and the discovery actor;
- :mod:`.hooks` -- the interactive ``hermes``'s shell hooks and how each payload maps to a hint;
- :mod:`.install` -- the ``config.yaml`` edit ``paneward install-hooks hermes`` makes.

Facts: real ledgers and hook payloads in tests/fixtures/hermes/.
The owner of a hook is its parent, the ``hermes`` process (``--owner parent``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from actors.core.session.harness import Discovery, DiscoveryActor, HarnessSpec, Proof
from actors.harnesses.hermes import hooks

if TYPE_CHECKING:
    from actors.core.install.config_edit import Installer

__all__ = ["PROOFS", "SPEC"]

#: What Hermes can prove: the interactive CLI through its shell hooks, cron fires through the
#: execution ledger.
PROOFS = (
    Proof("running", ("hermes_hook", "hermes_executions"),
          "the hook's parent, the hermes process; a fire's pid alive with its start time"),
    Proof("working", ("hermes_hook", "hermes_executions"),
          "pre_llm_call, pre/post_tool_call, post_approval_response; a claimed/running fire"),
    Proof("idle", ("hermes_hook",), "on_session_end (per turn)"),
    Proof("needs_input", ("hermes_hook",),
          "pre_approval_request on the cli/gateway surface, answered by "
          "post_approval_response (the smart surface is Hermes's own model, not a wait)"),
    Proof("turn_done", ("hermes_hook",),
          "on_session_end with completed and not interrupted (Ctrl+C: interrupted)"),
    Proof("failed", ("hermes_executions", "pid_probe"),
          "a cron fire whose status is failed; the hermes process died while working"),
)

def _installer() -> Installer:
    from actors.harnesses.hermes import install

    return install.INSTALLER

def _ledger(home: Path | None) -> DiscoveryActor:
    from actors.harnesses.hermes.ledger import HermesLedgerDiscovery

    return HermesLedgerDiscovery(home)


SPEC = HarnessSpec(
    id="hermes",
    summary="interactive shell hooks (config.yaml), the cron execution ledger",
    sources=("hermes_executions", "hermes_hook"),
    normalize=hooks.normalize,
    proofs=PROOFS,
    installer=_installer,
    discovery=(Discovery("hermes_ledger", _ledger),),
    home_env=("HERMES_HOME",),
)
