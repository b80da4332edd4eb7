"""Cursor: everything paneward knows about it, in one package.

- :mod:`.hooks` -- its hook payloads to hints;
- :mod:`.install` -- the ``~/.cursor/hooks.json`` edit of ``install-hooks cursor``.

Its hooks name no owner process, so they prove turns, never presence.
"""

from __future__ import annotations

from actors.core.harness import HarnessSpec
from actors.harnesses.cursor import hooks

__all__ = ["SPEC"]

SPEC = HarnessSpec(id="cursor", summary="hooks.json hooks", normalize=hooks.normalize)
