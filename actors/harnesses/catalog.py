"""The harness catalog: every harness package's :class:`~actors.core.harness.HarnessSpec`.

Who uses it: the supervisor normalizes each raw :class:`~messages.NotifyHook` with
:func:`normalize` before routing (a hook's session key is inside its payload) and hands
:data:`PROOFS` (what each harness can prove) to the reducer; the hook listener
serves ``/hook/<harness>`` for the harnesses in :data:`HOOK_ROUTES` and refuses what
:func:`http_refusal` names. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

from actors.core.harness import (
    HarnessSpec,
    HookIngress,
    ProcessClaim,
    ProcessClaims,
    ProofTable,
)
from actors.core.hints import first_str, unmapped
from actors.core.pane_map import Binding
from actors.harnesses import claude_code, codex, cursor, gemini, hermes, opencode, pi
from messages.activity import Activity, Unmapped
from messages.codec import Inbound
from messages.common import Harness
from messages.evidence import HookHint, NotifyHook

__all__ = [
    "CLAIMS",
    "CLAIM_COMMS",
    "HOOKS",
    "HOOK_ROUTES",
    "PROOFS",
    "SPECS",
    "http_refusal",
    "normalize",
    "pane_note",
    "normalize_hook",
    "process_claim",
]

#: Every harness with a package, by id.
SPECS: Final[Mapping[Harness, HarnessSpec]] = MappingProxyType(
    {
        spec.id: spec
        for spec in (
            claude_code.SPEC,
            codex.SPEC,
            cursor.SPEC,
            hermes.SPEC,
            gemini.SPEC,
            opencode.SPEC,
            pi.SPEC,
        )
    }
)
#: What each harness can prove (its package's ``proves``), as the reducer is handed it
#: (``actors.core.reducer.reduce(..., proves=PROOFS)``: the supervisor's default reducer).
PROOFS: Final[ProofTable] = MappingProxyType(
    {spec.id: MappingProxyType(dict(spec.proof_table())) for spec in SPECS.values() if spec.proves}
)
#: Harnesses that send hook payloads (``/hook/<id>`` over http, ``--harness`` of the hook client).
HOOK_ROUTES: Final[Mapping[str, Harness]] = MappingProxyType(
    {spec.id: spec.id for spec in SPECS.values() if spec.normalize is not None}
)

_CLAIMS: Final[Mapping[str, ProcessClaim]] = MappingProxyType(
    {
        comm: spec.process_claim
        for spec in SPECS.values()
        if spec.process_claim is not None
        for comm in spec.claim_comms
    }
)
#: Process names whose command line can prove something to the pane mapper.
CLAIM_COMMS: Final = frozenset(_CLAIMS)


def process_claim(
    pid: int, comm: str, argv: Sequence[str], token: str | None
) -> Binding | None:
    """What a process proves by itself about the session it shows (its harness decides)."""
    claim = _CLAIMS.get(comm)
    return None if claim is None else claim(pid, comm, argv, token)


def pane_note(activity: Activity) -> str | None:
    """Why a pane showing ``activity`` shows less than it could, in its harness's words."""
    spec = SPECS.get(activity.key.harness)
    return None if spec is None or spec.pane_note is None else spec.pane_note(activity)


def normalize_hook(hook: NotifyHook) -> HookHint | Unmapped:
    """Normalize ``hook`` with its harness package; a harness without hooks maps nothing."""
    spec = SPECS.get(hook.harness)
    if spec is not None and spec.normalize is not None:
        return spec.normalize(hook)
    return unmapped(hook.harness, hook.payload, first_str(hook.payload, "hook_event_name"),
                    hook.at_ms)


def normalize(message: Inbound) -> Inbound | Unmapped:
    """Edge normalization: raw hook payloads become hints (or counted unmapped events)."""
    if isinstance(message, NotifyHook):
        return normalize_hook(message)
    return message


def http_refusal(hook: NotifyHook) -> str | None:
    """Why ``hook`` may not arrive over http (``None``: it may)."""
    spec = SPECS.get(hook.harness)
    event = first_str(hook.payload, "hook_event_name")
    if spec is None or event is None:
        return None
    why = spec.http_refused.get(event)
    return None if why is None else f"{event} cannot be an http hook: {why}"


#: The hook listener's view of the harnesses (passed to it by the daemon's wiring).
HOOKS: Final = HookIngress(routes=HOOK_ROUTES, http_refusal=http_refusal)
#: The pane mapper's view of the harnesses (passed to it by the daemon's wiring).
CLAIMS: Final = ProcessClaims(comms=CLAIM_COMMS, claim=process_claim)
