"""What paneward knows about one harness, as plain data: the shape every harness package fills.

Each package under :mod:`actors.harnesses` declares one :class:`HarnessSpec` (its ``SPEC``);
:mod:`actors.harnesses.catalog` collects them, and everything that lists or wires harnesses
reads the catalog: the hook listener's routes, the reducer's proofs, ``install-hooks`` (its
choices, its installers), the daemon's discovery actors, ``paneward wrap``'s command table and
the help texts. Pure: a spec holds data and pure functions; the I/O of a harness -- its
discovery actors, its config edits -- lives beside it in the package and the spec reaches it
through factories that import it only when called (importing the catalog loads no I/O).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from actors.core.session.pane_map import Binding
from messages.activity import Activity, Unmapped
from messages.common import Harness, Source
from messages.evidence import HookHint, NotifyHook

if TYPE_CHECKING:  # config_edit imports this module (through actors.core.ingress.http)
    from actors.core.install.config_edit import Installer

__all__ = [
    "PROVABLE",
    "Discovery",
    "DiscoveryActor",
    "HarnessSpec",
    "HookIngress",
    "Normalizer",
    "PaneNote",
    "ProcessBinder",
    "ProcessBinders",
    "Proof",
    "ProofTable",
    "Provable",
    "axis_of",
]

Normalizer = Callable[[NotifyHook], HookHint | Unmapped]
#: (pid, comm, argv, start token) -> what that process proves by itself about its session.
ProcessBinder = Callable[[int, str, Sequence[str], "str | None"], Binding | None]
#: The activity a pane shows -> why that pane shows less than it could (``None``: nothing to say).
PaneNote = Callable[[Activity], "str | None"]


#: The axis values a harness declares it can (or cannot) prove: presence ``running``; turn
#: ``working``, ``idle``, ``needs_input``; attention ``turn_done``, ``failed``. (``unknown`` and
#: ``persisted`` need no proof: they are what is shown without one.)
Provable = Literal["running", "working", "idle", "needs_input", "turn_done", "failed"]
PROVABLE: Final[tuple[Provable, ...]] = (
    "running", "working", "idle", "needs_input", "turn_done", "failed"
)
_AXIS: Final[Mapping[Provable, str]] = {
    "running": "presence",
    "working": "turn",
    "idle": "turn",
    "needs_input": "turn",
    "turn_done": "attention",
    "failed": "attention",
}
#: What the reducer is handed (:func:`actors.core.session.reducer.reduce`, ``proof_table``): per
#: harness id, per :data:`Provable` value, the evidence sources that prove it. Plain data, built by
#: :mod:`actors.harnesses.catalog` (``PROOF_TABLE``) from every package's declaration.
ProofTable = Mapping[str, Mapping[str, frozenset[str]]]


def axis_of(value: Provable) -> str:
    """The axis a :data:`Provable` value belongs to (``presence``, ``turn``, ``attention``)."""
    return _AXIS[value]


@dataclass(frozen=True, slots=True)
class Proof:
    """Whether one harness can prove one axis value, and from which evidence.

    ``sources`` are the evidence sources (``messages.common.Source``) that prove ``value`` for
    this harness; empty: it cannot prove it, and the reducer never publishes it for that
    harness (it stays ``unknown``). ``how`` says which events or files prove it, or why it
    cannot (shown by ``paneward status --proofs`` and the README's evidence table).
    """

    value: Provable
    sources: tuple[Source, ...]
    how: str


class DiscoveryActor(Protocol):
    """What a :class:`Discovery` factory returns: an actor the daemon supervises (the shape of
    :class:`actors.runtime.mailbox.Actor`, which core does not import) with counters for
    ``paneward status --counters``."""

    async def run(self, host: Any) -> None:
        """Run until cancelled, sending evidence to ``host`` (the supervisor)."""

    def statistics(self) -> object:
        """A point-in-time copy of its counters."""


@dataclass(frozen=True, slots=True)
class Discovery:
    """One discovery actor of a harness, started by ``paneward run`` (unless
    ``--no-discovery``) in the order the catalog and the spec list them.

    ``name`` is its key in ``status --counters`` and, with ``-`` for ``_``, its actor name;
    ``start(home)`` builds it for the harness's own directory ``home`` (``None``: the
    directory its environment names, e.g. ``$CODEX_HOME`` or ``~/.codex``), importing its
    module only then.
    """

    name: str
    start: Callable[[Path | None], DiscoveryActor]


@dataclass(frozen=True, slots=True, kw_only=True)
class HarnessSpec:
    """One harness, as its package declares it: the only place a harness is registered (one
    more line in :mod:`actors.harnesses.catalog` lists the package).

    ``summary`` says what it gives paneward (``status --proofs``); ``sources`` names the
    evidence sources (``messages.common.Source``) that are its own; ``normalize`` maps the
    harness's native hook payloads to hints (``None``: it sends none); ``http_refused`` maps
    an event name to why it can never arrive as an ``http`` hook; ``process_binding`` says what
    one of its processes (a comm in ``binding_comms``) proves by itself when the pane mapper
    finds no owner (``None``: nothing); ``proofs`` declares, for
    every :data:`PROVABLE` value, whether the harness can prove it and from which source
    (tests/test_design.py checks that each package declares all of them, once); ``pane_note``
    says why a pane showing one of its sessions shows less than it could (``paneward status``);
    ``installer`` returns what ``paneward install-hooks <id>`` does (its ``install`` module,
    imported when called; ``None``: nothing to install); ``discovery`` its discovery actors,
    ``home_env`` the environment variables that move the home they read (``install-service``
    writes the ones set into the unit, as a service does not get the shell's environment);
    ``wrap_commands`` the program names ``paneward wrap`` reports as this harness (and
    ``paneward wrap --aliases`` aliases).
    """

    id: Harness
    summary: str
    sources: tuple[Source, ...] = ()
    normalize: Normalizer | None = None
    http_refused: Mapping[str, str] = field(default_factory=dict)
    binding_comms: frozenset[str] = frozenset()
    process_binding: ProcessBinder | None = None
    proofs: tuple[Proof, ...] = ()
    pane_note: PaneNote | None = None
    installer: Callable[[], Installer] | None = None
    discovery: tuple[Discovery, ...] = ()
    home_env: tuple[str, ...] = ()
    wrap_commands: tuple[str, ...] = ()

    def proofs_by_value(self) -> Mapping[str, frozenset[str]]:
        """``proofs`` as the reducer reads it: value -> the sources that prove it."""
        return {proof.value: frozenset(proof.sources) for proof in self.proofs}


@dataclass(frozen=True, slots=True)
class HookIngress:
    """What the hook listener needs to know of the harnesses (it knows none itself).

    ``routes`` maps the ``/hook/<id>`` path segment to the harnesses that send hook payloads;
    ``http_refusal(hook)`` says why a payload may not arrive over http (``None``: it may).
    Built by :mod:`actors.harnesses.catalog` (``HOOKS``) and handed to the listener by the
    daemon's wiring.
    """

    routes: Mapping[str, Harness]
    http_refusal: Callable[[NotifyHook], str | None]


@dataclass(frozen=True, slots=True)
class ProcessBinders:
    """What the pane mapper needs to know of the harnesses: which process names can prove
    something by their command line (``comms``), and what one proves (``bind``). Built by
    :mod:`actors.harnesses.catalog` (``BINDERS``)."""

    comms: AbstractSet[str]
    bind: ProcessBinder
