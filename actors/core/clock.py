"""The wall clock paneward stamps evidence with: epoch milliseconds.

Standard library only. Every ``at_ms`` / ``observed_at_ms`` paneward makes itself comes from
:func:`now_ms`; tests and hosts pass their own clock where a part takes one.
"""

from __future__ import annotations

import time

__all__ = ["now_ms"]


def now_ms() -> int:
    """Now, in milliseconds since the epoch (``time.time_ns() // 1_000_000``)."""
    return time.time_ns() // 1_000_000
