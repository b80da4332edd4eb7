"""The one JSON wire codec for every paneward message.

Decoders are built once at import time. Any malformed input (bad JSON, unknown
``type`` tag, wrong field type, missing field, out-of-range value) raises
:class:`~messages.errors.MessageError` with msgspec's precise description.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from typing import Any, Final, Union

import msgspec

from messages.activity import (
    Activity,
    Daemon,
    Gap,
    Overflow,
    PaneView,
    Rejected,
    Snapshot,
    Transition,
    Unmapped,
)
from messages.control import (
    Acknowledge,
    Forget,
    HostSignal,
    PaneBound,
    PaneClosed,
    PaneFocused,
    PaneOpened,
    PaneUnbound,
)
from messages.errors import MessageError
from messages.evidence import (
    ClientAttached,
    HookHint,
    LedgerFire,
    LifecycleBoundary,
    NotifyHook,
    ProcessGone,
    ProcessSeen,
    ProgramStatus,
    PtyExit,
    PtySpawned,
    RegistryRemoved,
    RegistryStatus,
    RolloutOwned,
    RolloutReleased,
    ThreadStatus,
)

__all__ = [
    "INBOUND_TYPES",
    "OUTBOUND_TYPES",
    "SESSION_TYPES",
    "Inbound",
    "Outbound",
    "SessionMessage",
    "decode_inbound",
    "decode_outbound",
    "encode",
    "encode_lines",
    "revalidate",
]

# The one catalog of inbound messages. Every other list of message types is derived from these
# unions (tests/test_design.py checks that no list is copied).
SessionMessage = Union[  # noqa: UP007 - a runtime union object is what msgspec needs
    # evidence the session reducer applies
    ProcessSeen,
    ProcessGone,
    RegistryStatus,
    RegistryRemoved,
    LifecycleBoundary,
    RolloutOwned,
    RolloutReleased,
    ThreadStatus,
    HookHint,
    LedgerFire,
    PtySpawned,
    PtyExit,
    ProgramStatus,
    # host control the session reducer applies
    PaneBound,
    PaneUnbound,
    PaneFocused,
    Acknowledge,
    Forget,
    HostSignal,
]
"""What the session reducer handles (:func:`actors.core.session.reducer.reduce`)."""
Inbound = Union[  # noqa: UP007
    SessionMessage,
    NotifyHook,  # normalized at the edge into a HookHint (or a counted Unmapped)
    PaneOpened,  # pane lifecycle: the pane mapper's, routed to sessions as PaneBound/Unbound
    PaneClosed,
    ClientAttached,  # a process shows a session another runs: the pane mapper's
]
"""Every message paneward accepts (``Supervisor.inject``, the hook socket, ``paneward inject``)."""
Outbound = Union[  # noqa: UP007
    Activity, Transition, Snapshot, Overflow, Gap, Unmapped, Rejected, PaneView, Daemon
]

INBOUND_TYPES: Final[tuple[type[msgspec.Struct], ...]] = typing.get_args(Inbound)
OUTBOUND_TYPES: Final[tuple[type[msgspec.Struct], ...]] = typing.get_args(Outbound)
SESSION_TYPES: Final[tuple[type[msgspec.Struct], ...]] = typing.get_args(SessionMessage)

_INBOUND_SET: Final[frozenset[type[msgspec.Struct]]] = frozenset(INBOUND_TYPES)

_ENCODER: Final = msgspec.json.Encoder()
_INBOUND: Final = msgspec.json.Decoder(Inbound)
_OUTBOUND: Final = msgspec.json.Decoder(Outbound)


def encode(message: msgspec.Struct) -> bytes:
    """Encode any paneward message as one line of JSON (no trailing newline)."""
    return _ENCODER.encode(message)


def encode_lines(messages: Iterable[msgspec.Struct]) -> bytes:
    """Encode paneward messages as newline-delimited JSON: each :func:`encode` line followed
    by ``\\n``, in one call (what ``watch`` writes per run of transitions)."""
    return _ENCODER.encode_lines(messages)


def _explain(exc: msgspec.DecodeError, what: str) -> MessageError:
    text = str(exc)
    if isinstance(exc, msgspec.ValidationError):
        return MessageError(f"invalid {what}: {text}")
    return MessageError(f"malformed JSON for {what}: {text}")


def decode_inbound(data: bytes | str) -> Inbound:
    """Decode one inbound message (evidence or host control).

    :raises MessageError: naming what is wrong with ``data``.
    """
    try:
        message = _INBOUND.decode(data)
    except msgspec.DecodeError as exc:
        raise _explain(exc, "inbound message") from None
    except RecursionError:
        raise MessageError("malformed JSON for inbound message: nested too deeply") from None
    for field in ("key", "root_key"):
        key = getattr(message, field, None)
        if key is not None and key.host is not None:
            raise MessageError(
                f"invalid inbound message: `$.{field}.host` names a remote session; only the "
                "daemon on that host takes evidence for it"
            )
    return message


def decode_outbound(data: bytes | str) -> Outbound:
    """Decode one outbound message (activity, transition, snapshot, markers).

    :raises MessageError: naming what is wrong with ``data``.
    """
    try:
        return _OUTBOUND.decode(data)
    except msgspec.DecodeError as exc:
        raise _explain(exc, "outbound message") from None
    except RecursionError:
        raise MessageError("malformed JSON for outbound message: nested too deeply") from None


def revalidate(message: Any) -> Inbound:
    """Check a message built in Python exactly as if it had come over the wire.

    msgspec does not check types in ``__init__``; this round-trips through the
    codec so that ``Supervisor.inject`` applies the same rules as the socket.

    :raises MessageError: when ``message`` is not a valid inbound message.
    """
    # A set lookup first: isinstance against the 20-odd Struct classes of the tuple costs
    # microseconds per message (one __instancecheck__ per class until the match).
    if type(message) not in _INBOUND_SET and not isinstance(message, INBOUND_TYPES):
        raise MessageError(
            f"not an inbound paneward message: {type(message).__name__}"
        )
    try:
        data = _ENCODER.encode(message)
    except (msgspec.EncodeError, TypeError, ValueError, OverflowError) as exc:
        raise MessageError(
            f"invalid {type(message).__name__}: cannot encode: {exc}"
        ) from None
    return decode_inbound(data)
