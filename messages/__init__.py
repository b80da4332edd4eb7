"""paneward's typed vocabulary: every message between parts, and its wire codec.

No I/O happens here. Three directions: evidence in (:mod:`messages.evidence`),
host control in (:mod:`messages.control`), activity out (:mod:`messages.activity`);
the value types they share (:mod:`messages.common`), the error types (:mod:`messages.errors`)
and one JSON codec (:mod:`messages.codec`).
"""

from __future__ import annotations

from messages.activity import (
    Activity,
    Gap,
    Overflow,
    PaneView,
    Rejected,
    Snapshot,
    Transition,
    Unmapped,
)
from messages.codec import (
    Inbound,
    Outbound,
    SessionMessage,
    decode_inbound,
    decode_outbound,
    encode,
    encode_lines,
    revalidate,
)
from messages.common import (
    Attention,
    Evidence,
    ExitInfo,
    Harness,
    Presence,
    SessionKey,
    Turn,
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
from messages.errors import MessageError, PanewardError
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
    "Acknowledge",
    "Activity",
    "Attention",
    "ClientAttached",
    "Evidence",
    "ExitInfo",
    "Forget",
    "Harness",
    "HookHint",
    "HostSignal",
    "Inbound",
    "LedgerFire",
    "LifecycleBoundary",
    "MessageError",
    "NotifyHook",
    "Outbound",
    "Gap",
    "Overflow",
    "PaneBound",
    "PaneClosed",
    "PaneFocused",
    "PaneOpened",
    "PaneUnbound",
    "PaneView",
    "PanewardError",
    "Presence",
    "ProcessGone",
    "ProcessSeen",
    "ProgramStatus",
    "PtyExit",
    "PtySpawned",
    "RegistryRemoved",
    "RegistryStatus",
    "Rejected",
    "RolloutOwned",
    "RolloutReleased",
    "SessionKey",
    "SessionMessage",
    "Snapshot",
    "ThreadStatus",
    "Transition",
    "Turn",
    "Unmapped",
    "decode_inbound",
    "decode_outbound",
    "encode",
    "encode_lines",
    "revalidate",
]
