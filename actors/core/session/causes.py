"""What caused a transition: the short name every published :class:`messages.Transition`
carries in ``cause`` (``HookHint:Stop``, ``ThreadStatus:active``, ``Forget``).

Named by the supervisor when it publishes (and by the tests' reference model,
``tests/support/reference_model.py``, which must publish the same transitions).
"""

from __future__ import annotations

__all__ = ["cause_of"]


def cause_of(message: object) -> str:
    """A short name for what caused a transition, e.g. ``HookHint:Stop``: the message's type,
    and its ``event``, ``status``, ``boundary`` or ``state`` word when it has one."""
    name = type(message).__name__
    detail = getattr(message, "event", None) or getattr(message, "status", None)
    detail = detail or getattr(message, "boundary", None) or getattr(message, "state", None)
    return f"{name}:{detail}" if isinstance(detail, str) else name
