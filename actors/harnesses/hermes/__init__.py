"""Hermes Agent: everything paneward knows about it, in one package.

- :mod:`.paths` -- where its files are (``$HERMES_HOME``, default ``~/.hermes``);
- :mod:`.ledger` -- the cron execution ledger (``cron/executions.db`` + ``state.db``): the
  join and the discovery actor.

Facts: reference/hermes.md.
"""

from __future__ import annotations

from actors.core.harness import HarnessSpec

__all__ = ["SPEC"]

SPEC = HarnessSpec(id="hermes", summary="the cron execution ledger")
