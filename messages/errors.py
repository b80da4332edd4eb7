"""The error types of paneward's vocabulary.

Every failure that a caller of the public API can see is a :class:`PanewardError`.
"""

from __future__ import annotations

__all__ = ["MessageError", "PanewardError"]


class PanewardError(Exception):
    """Root of every error paneward raises on purpose."""


class MessageError(PanewardError):
    """Raised when bytes or an object are not a valid paneward message.

    The text names the problem precisely (bad JSON, unknown tag, wrong field
    type, missing field, out-of-range value) and, where msgspec reports one,
    the JSON path of the offending field, e.g.
    ``invalid NotifyHook: Expected `int`, got `str` - at `$.pid```.
    """
