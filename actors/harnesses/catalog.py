"""The harness catalog: every harness package's :class:`~actors.core.session.harness.HarnessSpec`.

Adding a harness is one package under ``actors/harnesses/<name>/`` (its ``SPEC``) and one
line in :data:`_PACKAGES`; everything that lists or wires harnesses reads the catalog when it
runs, and nothing else names a harness: the supervisor normalizes each raw
:class:`~messages.NotifyHook` with :func:`normalize` before routing (a hook's session key is
inside its payload) and hands :data:`PROOF_TABLE` (what each harness can prove) to the reducer; the
hook listener serves ``/hook/<harness>`` for the harnesses in :data:`HOOK_ROUTES` and refuses
what :func:`http_refusal` names; the pane mapper asks :data:`BINDERS`; ``install-hooks`` takes
its choices and installers from :data:`INSTALLERS`; ``paneward run`` starts every spec's
``discovery`` actors; ``paneward wrap`` maps a command to its harness with :func:`wrap_harness`
and lists :func:`wrap_choices`; ``status --proofs`` lists :data:`SPECS`.

The harness ids are also the wire type ``messages.common.Harness`` (a ``Literal``: the codec
checks it on every decoded message, and the type checker everywhere). A type cannot grow at run
time, so the run-time checks here use the catalog's own sets, and tests/test_design.py checks
that the ``Literal`` holds exactly the catalog's ids and :data:`TERMINAL`, and that
``messages.common.Source`` holds exactly the specs' ``sources`` and the shared ones.

:func:`register` adds a spec as the catalog line does (tests/test_design.py registers a
throwaway harness with it and sees it installed, routed, wrapped and listed). Pure: importing
the catalog loads no I/O (a spec's installer and discovery actors are imported when used).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, get_args

from actors.core.session.harness import (
    HarnessSpec,
    HookIngress,
    ProcessBinder,
    ProcessBinders,
    ProofTable,
)
from actors.core.session.hints import first_str, unmapped
from actors.core.session.pane_map import Binding
from actors.harnesses import claude_code, codex, cursor, gemini, hermes, opencode, pi
from messages.activity import Activity, Unmapped
from messages.codec import Inbound
from messages.common import Harness, Source
from messages.evidence import HookHint, NotifyHook

if TYPE_CHECKING:  # its module is the installers' (imported with the first of them)
    from actors.core.install.config_edit import Installer

__all__ = [
    "BINDERS",
    "BINDING_COMMS",
    "HOOKS",
    "HOOK_ROUTES",
    "INSTALLERS",
    "PROOF_TABLE",
    "SPECS",
    "TERMINAL",
    "home_env",
    "http_refusal",
    "normalize",
    "normalize_hook",
    "pane_note",
    "process_binding",
    "register",
    "unregister",
    "wrap_choices",
    "wrap_commands",
    "wrap_harness",
]

#: The catalog: one line per harness package, in the order everything lists them.
_PACKAGES: Final = (claude_code, codex, cursor, hermes, gemini, opencode, pi)

#: The harness id of a program no package knows (``paneward wrap`` of any other command).
TERMINAL: Final[Harness] = "terminal"

_SPECS: dict[str, HarnessSpec] = {}
_PROOF_TABLE: dict[str, Mapping[str, frozenset[str]]] = {}
_HOOK_ROUTES: dict[str, Harness] = {}
_BINDERS: dict[str, ProcessBinder] = {}
_WRAP: dict[str, Harness] = {}

#: Every harness with a package, by id (read-only; :func:`register` adds to it).
SPECS: Final[Mapping[str, HarnessSpec]] = MappingProxyType(_SPECS)
#: What each harness can prove (its package's ``PROOFS``), as the reducer is handed it
#: (``actors.core.session.reducer.reduce(..., proof_table=PROOF_TABLE)``: the supervisor's default
#: reducer).
PROOF_TABLE: Final[ProofTable] = MappingProxyType(_PROOF_TABLE)
#: Harnesses that send hook payloads (``/hook/<id>`` over http, ``--harness`` of the hook client).
HOOK_ROUTES: Final[Mapping[str, Harness]] = MappingProxyType(_HOOK_ROUTES)
#: Process names whose command line can prove something to the pane mapper (a live view).
BINDING_COMMS: Final = _BINDERS.keys()


class _Installers(Mapping[str, "Installer"]):
    """What ``install-hooks`` can install, by harness id, in catalog order: each spec's
    ``installer()`` (its ``install`` module is imported on first use, not with the catalog)."""

    def __getitem__(self, harness: str) -> Installer:
        spec = _SPECS[harness]
        if spec.installer is None:
            raise KeyError(harness)
        return spec.installer()

    def __iter__(self) -> Iterator[str]:
        return iter([h for h, spec in _SPECS.items() if spec.installer is not None])

    def __len__(self) -> int:
        return sum(1 for spec in _SPECS.values() if spec.installer is not None)


#: ``paneward install-hooks``' choices and what each does (a live view of the catalog).
INSTALLERS: Final[Mapping[str, Installer]] = _Installers()


def home_env() -> tuple[str, ...]:
    """Every spec's ``home_env``, in catalog order: the variables ``install-service`` passes
    into the unit besides paneward's own (:data:`actors.core.install.service.PASSED_ENV`)."""
    return tuple(name for spec in _SPECS.values() for name in spec.home_env)


def wrap_choices() -> tuple[str, ...]:
    """The harnesses ``paneward wrap --harness`` accepts: every spec's id, then
    :data:`TERMINAL`."""
    return (*_SPECS, TERMINAL)


def register(spec: HarnessSpec) -> None:
    """Add ``spec`` to the catalog, as its line in :data:`_PACKAGES` does at import.

    :raises ValueError: its id is taken (or is :data:`TERMINAL`); a process name it binds, a
        wrap command or a source of its own is another harness's; or it proves something from a
        source that is neither its own (``sources``) nor a shared one (a word of
        ``messages.common.Source`` no harness owns: the host's PTY, OSC 7501, process identity,
        ...). Nothing is added then.
    """
    if spec.id in _SPECS or spec.id == TERMINAL:
        raise ValueError(f"harness {spec.id!r} is registered already")
    owned = {s for other in _SPECS.values() for s in other.sources}
    taken = sorted(c for c in spec.binding_comms if c in _BINDERS)
    taken += sorted(c for c in spec.wrap_commands if c in _WRAP)
    taken += sorted(s for s in spec.sources if s in owned)
    if taken:
        raise ValueError(f"harness {spec.id!r}: {', '.join(taken)} belong to another harness")
    _add(spec)
    problem = _foreign_sources(spec)
    if problem is not None:
        unregister(spec.id)
        raise ValueError(problem)


def unregister(harness: str) -> None:
    """Remove what :func:`register` added for ``harness`` (a test's throwaway harness).

    :raises KeyError: ``harness`` is not registered.
    """
    spec = _SPECS.pop(harness)
    _PROOF_TABLE.pop(harness, None)
    _HOOK_ROUTES.pop(harness, None)
    for comm in spec.binding_comms:
        _BINDERS.pop(comm, None)
    for command in spec.wrap_commands:
        _WRAP.pop(command, None)


def _add(spec: HarnessSpec) -> None:
    _SPECS[spec.id] = spec
    if spec.proofs:
        _PROOF_TABLE[spec.id] = MappingProxyType(dict(spec.proofs_by_value()))
    if spec.normalize is not None:
        _HOOK_ROUTES[spec.id] = spec.id
    if spec.process_binding is not None:
        for comm in spec.binding_comms:
            _BINDERS[comm] = spec.process_binding
    for command in spec.wrap_commands:
        _WRAP[command] = spec.id


def _foreign_sources(spec: HarnessSpec) -> str | None:
    """Why ``spec`` may not prove from the sources it names (``None``: it may)."""
    owned = {s for other in _SPECS.values() for s in other.sources}
    shared = set(get_args(Source)) - owned
    foreign = {s for proof in spec.proofs for s in proof.sources} - set(spec.sources) - shared
    if foreign:
        return f"harness {spec.id!r} proves from sources not its own: {sorted(foreign)}"
    return None


def wrap_harness(command: str) -> Harness:
    """The harness ``paneward wrap`` reports for ``command`` (a program's base name): the one
    whose spec lists it in ``wrap_commands``, else :data:`TERMINAL`."""
    return _WRAP.get(command, TERMINAL)


def wrap_commands() -> list[str]:
    """Every program name a spec lists in ``wrap_commands``, in catalog order."""
    return list(_WRAP)


def process_binding(
    pid: int, comm: str, argv: Sequence[str], token: str | None
) -> Binding | None:
    """What a process proves by itself about the session it shows (its harness decides)."""
    binder = _BINDERS.get(comm)
    return None if binder is None else binder(pid, comm, argv, token)


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
BINDERS: Final = ProcessBinders(comms=BINDING_COMMS, bind=process_binding)


def _load() -> None:
    """Register every package of :data:`_PACKAGES` (at import)."""
    for package in _PACKAGES:
        _add(package.SPEC)
    for spec in _SPECS.values():  # once all are in: which sources are shared is known
        problem = _foreign_sources(spec)
        if problem is not None:  # pragma: no cover - a package's mistake: every run fails
            raise ValueError(problem)


_load()
