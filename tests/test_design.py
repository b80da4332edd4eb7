"""Tests that guard the design (docs/layout.md, docs/design.md), not a behaviour.

- ``actors/core`` holds pure decisions: importing any of its modules loads no event loop, no
  process or database library, and nothing of the layers above it (checked on ``sys.modules``
  in a fresh interpreter, so ``from anyio import X`` or an indirect import is caught too).
- A harness package never imports another one (a rule two harnesses share lives in core).
- ``paneward hook`` stays on the standard library.
- Every list of message types is derived from the one tagged union in ``messages.codec``.
- No silent table: every session message states its evidence source on its type, the router
  has a case for every inbound type (else ``assert_never``), the pid watcher handles exactly
  what it ``accepts``.
- Wide messages are keyword-only, so whoever builds one names its fields.
- Tests and benchmarks share helpers through ``tests/support/`` only: no module of tests/ or
  bench/ imports a test module.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import typing
from pathlib import Path

import anyio
import msgspec
import pytest

import messages
from actors.core.session import routing
from actors.core.session.reducer import SessionState, reduce
from messages.activity import OutboundMessage
from messages.codec import INBOUND_TYPES, OUTBOUND_TYPES, SESSION_TYPES, Inbound, Outbound
from messages.control import ControlMessage
from messages.evidence import EvidenceMessage
from tests.support import examples

ROOT = Path(__file__).resolve().parent.parent
ACTORS = ROOT / "actors"
HARNESSES = sorted(p.name for p in (ACTORS / "harnesses").iterdir() if (p / "__init__.py").exists())

#: What a pure module must not load: I/O and async libraries, and every layer above core.
BANNED_IN_CORE = (
    "anyio",
    "sniffio",
    "asyncio",
    "psutil",
    "aiosqlite",
    "sqlite3",
    "inotify_simple",
    "socket",
    "supervisor",
    "actors.runtime",
    "actors.sources",
    "actors.sinks",
    "actors.cli",
    "actors.harnesses",
)


def _modules_after_import(module: str) -> list[str]:
    """The modules a fresh interpreter holds after importing ``module``."""
    code = f"import sys, json, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    loaded: list[str] = json.loads(out)
    return loaded


def _banned(loaded: list[str], banned: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == b or m.startswith(b + ".") for b in banned))


CORE_MODULES = sorted(  # its sub-packages' modules too (reducer/)
    ".".join(("actors", "core", *p.relative_to(ACTORS / "core").with_suffix("").parts))
    .removesuffix(".__init__")
    for p in (ACTORS / "core").rglob("*.py")
    if p != ACTORS / "core" / "__init__.py"
)


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_modules_are_pure(module: str) -> None:
    assert _banned(_modules_after_import(module), BANNED_IN_CORE) == []


@pytest.mark.parametrize("harness", HARNESSES)
def test_harness_packages_do_not_import_each_other(harness: str) -> None:
    package = ACTORS / "harnesses" / harness
    modules = sorted(  # its sub-packages' modules too (codex/rollouts/)
        ".".join(("actors", "harnesses", harness, *p.relative_to(package).with_suffix("").parts))
        .removesuffix(".__init__")
        for p in package.rglob("*.py")
        if p != package / "__init__.py"
    )
    others = tuple(f"actors.harnesses.{h}" for h in HARNESSES if h != harness)
    loaded = _modules_after_import(", ".join([f"actors.harnesses.{harness}", *modules]))
    assert _banned(loaded, (*others, "actors.harnesses.catalog")) == []


def test_the_hook_client_needs_only_the_standard_library() -> None:
    loaded = _modules_after_import("actors.cli, actors.cli.hook_client")
    ours = {m for m in loaded if m.split(".")[0] in {"actors", "messages", "supervisor"}}
    assert ours == {
        "actors",
        "actors.cli",
        "actors.cli.hook_client",
        "actors.core",
        "actors.core.paths",
        "actors.core.procstat",
    }
    third_party = {"anyio", "msgspec", "psutil", "aiosqlite", "inotify_simple", "typing"}
    assert {m.split(".")[0] for m in loaded} & third_party == set()


# ------------------------------------------------------------------- the message catalog


def _leaves(base: type) -> set[type]:
    found: set[type] = set()
    sub: type
    for sub in base.__subclasses__():
        found |= _leaves(sub) or {sub}
    return found


def test_the_inbound_catalog_is_every_evidence_and_control_message_once() -> None:
    assert len(INBOUND_TYPES) == len(set(INBOUND_TYPES))
    assert set(INBOUND_TYPES) == _leaves(EvidenceMessage) | _leaves(ControlMessage)
    assert set(typing.get_args(Inbound)) == set(INBOUND_TYPES)
    assert set(SESSION_TYPES) <= set(INBOUND_TYPES)
    assert set(OUTBOUND_TYPES) == _leaves(OutboundMessage)
    assert set(typing.get_args(Outbound)) == set(OUTBOUND_TYPES)


def test_the_package_exports_every_message_type() -> None:
    for kind in (*INBOUND_TYPES, *OUTBOUND_TYPES):
        assert getattr(messages, kind.__name__) is kind
        assert kind.__name__ in messages.__all__


def test_the_reducer_and_the_router_handle_every_message_of_the_catalog() -> None:
    """No copied list can miss a type: each example of each type goes through the router,
    and each session message through the reducer, without a TypeError."""
    shown = {type(m) for m in examples.INBOUND}
    assert shown == set(INBOUND_TYPES), set(INBOUND_TYPES) - shown
    index = routing.RoutingIndex()
    key = messages.SessionKey("claude-code", "design")
    for message in examples.INBOUND:
        if isinstance(message, messages.NotifyHook):
            continue  # normalized at the edge, never routed raw
        list(index.deliveries(message))  # type: ignore[arg-type]
        if isinstance(message, SESSION_TYPES):
            reduce(SessionState(key=key), message)  # type: ignore[arg-type]


def test_every_session_message_states_its_source_on_its_type() -> None:
    """The reducer limits a claim by what its source can prove for the harness: a session
    message whose type states no source would be limited by nothing."""
    words = set(typing.get_args(messages.common.Source))
    for kind in SESSION_TYPES:
        if "source" in kind.__struct_fields__:  # HookHint: its harness module names it
            hints = typing.get_type_hints(kind)
            assert set(typing.get_args(hints["source"])) <= words, kind
        else:
            assert "source" in vars(kind), f"{kind.__name__} states no source"
            assert vars(kind)["source"] in words, kind


def test_the_router_refuses_a_message_it_has_no_case_for() -> None:
    """A type the router's match does not name fails loudly instead of going nowhere."""

    class Stray(msgspec.Struct, frozen=True):
        at_ms: int

    index = routing.RoutingIndex()
    with pytest.raises(AssertionError):
        index.route(Stray(1))  # type: ignore[arg-type]
    with pytest.raises(AssertionError):
        list(index.deliveries(Stray(1)))  # type: ignore[arg-type]


def test_the_pid_watcher_watches_the_owners_of_exactly_what_it_accepts() -> None:
    """``deliver_nowait`` handles the types of ``accepts``, and no other: each example that
    names a pid is watched iff its type is accepted (a ProcessSeen only when it claims a key)."""
    from actors.sources.pid_watcher import PidWatcher

    for message in examples.INBOUND:
        pid = getattr(message, "pid", None)
        if pid is None:
            continue
        watcher = PidWatcher(use_pidfd=False)
        watcher.deliver_nowait(message)  # type: ignore[arg-type]
        expected = type(message) in PidWatcher.accepts and getattr(message, "key", 1) is not None
        assert watcher.statistics().candidates == int(expected), type(message).__name__


def test_the_pane_mapper_accepts_what_the_pane_map_has_a_case_for() -> None:
    """One list: ``PaneMap.observe`` has a case for each type of ``Observed`` (the checker
    holds it to that: ``assert_never``), the mapper accepts exactly those, and the pane map
    counts anything else as ignored."""
    from actors.core.session import pane_map
    from actors.sources.pane_mapper import PaneMapper

    assert PaneMapper.accepts == pane_map.OBSERVED
    for message in examples.INBOUND:
        if type(message) not in pane_map.OBSERVED:
            seen = pane_map.PaneMap()
            assert seen.observe(message) == []  # type: ignore[arg-type]
            assert seen.ignored == 1, type(message).__name__


def test_listeners_accept_only_catalog_types() -> None:
    from actors.sources.pane_mapper import PaneMapper
    from actors.sources.pid_watcher import PidWatcher

    for listener in (PaneMapper, PidWatcher):
        assert set(listener.accepts) <= set(INBOUND_TYPES)


WIDE = 3  # more fields than this: keyword-only


_STRUCTS: list[type[msgspec.Struct]] = [
    *INBOUND_TYPES,
    *OUTBOUND_TYPES,
    messages.Evidence,
    messages.Attention,
    messages.SessionKey,
    messages.ExitInfo,
]


@pytest.mark.parametrize("kind", _STRUCTS, ids=lambda k: k.__name__)
def test_wide_messages_are_keyword_only(kind: type[msgspec.Struct]) -> None:
    parameters = inspect.signature(kind).parameters.values()
    if len(kind.__struct_fields__) > WIDE:
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters), kind


_QUICK_PROBE = """
import atexit, sys
def report():
    loaded = sorted(sys.modules)  # before json is imported to print them
    import json
    print(json.dumps(loaded), file=sys.stderr)
atexit.register(report)
sys.argv = ["paneward", *sys.argv[1:]]
from actors.cli import entry
sys.exit(entry())
"""


@pytest.mark.parametrize("argv", [["status"], ["status", "--json"], ["watch", "--json"]])
def test_status_and_watch_import_only_what_they_use(
    argv: list[str], tmp_path: Path
) -> None:
    """Short-lived commands start fast: with no daemon listening (exit 2) they have imported
    everything they would use; none of the daemon's libraries, not even argparse or typing."""
    env = {"PANEWARD_SOCKET": str(tmp_path / "hook.sock"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", _QUICK_PROBE, *argv], cwd=ROOT, env=env, capture_output=True,
        text=True, check=False,
    )
    assert done.returncode == 2, done.stderr
    bare = subprocess.run(
        [sys.executable, "-c", "import sys, json; print(json.dumps(sorted(sys.modules)))"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )
    # What this interpreter loads anyway (the development venv's editable finder: pathlib, json).
    preloaded = set(json.loads(bare.stdout)) - {"json", "json.decoder", "json.scanner",
                                                "json.encoder", "_json"}
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1])) - preloaded
    ours = {m for m in loaded if m.split(".")[0] in {"actors", "messages", "supervisor"}}
    assert ours == {
        "actors",
        "actors.cli",
        "actors.cli.quick",
        f"actors.cli.{argv[0]}",
        "actors.cli.common",
        "actors.cli.control_client",
        "actors.core",
        "actors.core.paths",
    }
    heavy = {"anyio", "msgspec", "psutil", "aiosqlite", "inotify_simple", "typing", "argparse"}
    heavy |= {"json", "socket", "selectors"}  # they print what the daemon sends, as it comes
    assert {m.split(".")[0] for m in loaded} & heavy == set()


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["status", "--json", "--all"],
        ["status", "--json", "--panes"],
        ["status", "--proofs"],
        ["status", "--counters", "--socket", "/x/hook.sock"],
        ["status", "--socket=/x/hook.sock"],
        ["watch"],
        ["watch", "--json", "--since", "12"],
        ["watch", "--since=0", "--socket", "/y"],
    ],
)
def test_the_quick_parser_agrees_with_argparse(argv: list[str]) -> None:
    from actors.cli.main import build_parser
    from actors.cli.quick import quick

    parsed = quick(argv)
    assert parsed is not None
    name, quick_args = parsed
    full = vars(build_parser(argv[0]).parse_args(argv))
    full.pop("subparser")  # how main() names the subcommand in a usage error
    assert name == full.pop("command") == argv[0]
    assert vars(quick_args) == full


@pytest.mark.parametrize(
    "argv", [["status", "--help"], ["watch", "--since", "-1"], ["status", "--jsn"], ["run"],
             ["watch", "--since"]]
)
def test_anything_else_goes_to_argparse(argv: list[str]) -> None:
    from actors.cli.quick import quick

    assert quick(argv) is None


def test_next_jumps_without_msgspec_or_the_reducer() -> None:
    """``paneward next`` sits on a key binding: the daemon decides the queue (``{"op": "status",
    "format": "queue"}``), so the jump loads neither msgspec nor the reducer."""
    code = (
        "import sys, json; import actors.cli.jump, actors.core.views.jump, actors.core.text; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    loaded = set(json.loads(done.stdout))
    heavy = {"msgspec", "actors.core.session.reducer", "actors.core.views.attention", "messages"}
    assert heavy & loaded == set()


# ------------------------------------------------------------ a harness is one package


def test_every_harness_package_has_its_catalog_line() -> None:
    """A package under actors/harnesses/ without its catalog line would be dead code."""
    from actors.harnesses import catalog

    listed = sorted(package.__name__.rpartition(".")[2] for package in catalog._PACKAGES)
    assert listed == HARNESSES


def test_the_wire_harness_ids_are_the_catalogs() -> None:
    """``messages.common.Harness`` is a type (the codec's and the checker's): it cannot grow at
    run time, so the run-time checks read the catalog, and this keeps the two equal."""
    from actors.harnesses import catalog

    assert set(typing.get_args(messages.Harness)) == {*catalog.SPECS, catalog.TERMINAL}
    assert typing.get_args(messages.Harness) == messages.common.HARNESSES


def test_every_source_word_is_one_harnesss_own_or_shared() -> None:
    """Each harness names its own evidence sources once; the words no harness owns are the
    shared ones (the host's PTY, OSC 7501, process identity, the store...), and each shared one
    the reducer limits is one some harness proves something from."""
    from actors.core.session.reducer import UNLIMITED_SOURCES
    from actors.harnesses import catalog

    words = set(typing.get_args(messages.common.Source))
    owner: dict[str, str] = {}
    for spec in catalog.SPECS.values():
        for source in spec.sources:
            assert source in words, (spec.id, source)
            assert source not in owner, (spec.id, source, owner.get(source))
            owner[source] = spec.id
    hook_sources = typing.get_args(typing.get_type_hints(messages.HookHint)["source"])
    assert set(hook_sources) <= set(owner)
    shared = words - set(owner)
    proven = {s for spec in catalog.SPECS.values() for p in spec.proofs for s in p.sources}
    assert shared - UNLIMITED_SOURCES <= proven
    assert shared >= UNLIMITED_SOURCES


def test_every_spec_installer_and_discovery_is_its_own() -> None:
    from actors.harnesses import catalog

    names: list[str] = []
    for spec in catalog.SPECS.values():
        if spec.installer is not None:
            assert spec.installer().harness == spec.id
        names.extend(d.name for d in spec.discovery)
    assert len(names) == len(set(names)), names


def test_a_spec_that_proves_from_another_harnesss_source_is_refused() -> None:
    from actors.core.session.harness import HarnessSpec, Proof
    from actors.harnesses import catalog

    thief: typing.Any = "thief"  # ids of throwaway harnesses: not words of messages.Harness
    proof = Proof("working", ("claude_hook",), "-")
    with pytest.raises(ValueError, match="not its own"):
        catalog.register(HarnessSpec(id=thief, summary="-", proofs=(proof,)))
    assert thief not in catalog.SPECS
    with pytest.raises(ValueError, match="belong to another harness"):
        catalog.register(HarnessSpec(id=thief, summary="-", wrap_commands=("claude",)))
    assert thief not in catalog.SPECS


#: A harness package as a newcomer writes one: hooks, an installer, a discovery actor. It is
#: registered with ``catalog.register`` (what its catalog line does) and nothing else is edited.
_CRUSH: dict[str, str] = {
    "__init__": '''
        """Crush: a throwaway harness (tests/test_design.py)."""

        from __future__ import annotations

        from pathlib import Path
        from typing import Any

        from actors.core.session.harness import Discovery, HarnessSpec, Proof
        from throwaway_crush import hooks


        def _installer() -> Any:
            from throwaway_crush import install

            return install.INSTALLER


        def _sessions(home: Path | None) -> Any:
            from throwaway_crush.sessions import CrushSessions

            return CrushSessions(home)


        SPEC = HarnessSpec(
            id="crush",
            summary="crush hooks and its sessions directory",
            sources=("crush_hook",),
            normalize=hooks.normalize,
            proofs=(
                Proof("running", ("crush_hook",), "the hook's parent"),
                Proof("working", ("crush_hook",), "prompt"),
                Proof("idle", ("crush_hook",), "stop"),
                Proof("needs_input", (), "Crush names no permission wait"),
                Proof("turn_done", ("crush_hook",), "stop"),
                Proof("failed", ("pid_probe",), "process evidence"),
            ),
            installer=_installer,
            discovery=(Discovery("crush_sessions", _sessions),),
            home_env=("CRUSH_HOME",),
            wrap_commands=("crush",),
        )
    ''',
    "hooks": '''
        from __future__ import annotations

        from actors.core.session.hints import first_str, unmapped
        from messages import HookHint, NotifyHook, SessionKey
        from messages.activity import Unmapped

        HINTS = {"prompt": "working", "stop": "completed", "ask": "needs_input"}


        def normalize(hook: NotifyHook) -> HookHint | Unmapped:
            event = first_str(hook.payload, "hook_event_name")
            session = first_str(hook.payload, "session_id")
            hint = HINTS.get(event or "")
            if event is None or session is None or hint is None:
                return unmapped(hook.harness, hook.payload, event, hook.at_ms)
            return HookHint(
                key=SessionKey(hook.harness, session), source="crush_hook", event=event,
                hint=hint, at_ms=hook.at_ms, observed_at_ms=hook.observed_at_ms, pid=hook.pid,
                start_token=hook.start_token,
            )
    ''',
    "install": '''
        from __future__ import annotations

        import os
        from pathlib import Path

        from actors.core.install.config_edit import Installer, own_file_edit

        MARKER = "# paneward: crush hook"


        def edits(config_dir, target, *, http, events):
            text = f"{MARKER}\\n{target.command('crush', 'parent')}\\n"
            return [own_file_edit(config_dir / "hooks.sh", text, MARKER)]


        INSTALLER = Installer(
            harness="crush",
            title="Crush",
            default_dir=lambda: Path(os.environ["CRUSH_HOME"]),
            default_dir_help="$CRUSH_HOME",
            edits=edits,
            notes=("Crush reads hooks.sh at its next start",),
        )
    ''',
    "sessions": '''
        from __future__ import annotations

        import anyio

        from actors.core.clock import now_ms
        from messages import NotifyHook


        class CrushSessions:
            """Reports the session named in <home>/current as prompted, once."""

            def __init__(self, home):
                self.home = home
                self.runs = 0

            def statistics(self):
                return {"runs": self.runs, "home": str(self.home)}

            async def run(self, host):
                self.runs += 1
                text = await anyio.Path(self.home / "current").read_text()
                now = now_ms()
                # deliver_nowait, as the hook listener hands over what it decoded: "crush" is
                # not a word of the wire type messages.common.Harness, which inject_nowait's
                # validation checks (a harness added for good adds its id there too).
                host.deliver_nowait(NotifyHook(
                    harness="crush", at_ms=now, observed_at_ms=now,
                    payload={"hook_event_name": "prompt", "session_id": text.strip()},
                ))
                await anyio.sleep_forever()
    ''',
}


#: The throwaway harness's id: not a word of ``messages.Harness`` (a type cannot grow at run
#: time; a harness added for good adds its id there, and test_the_wire_harness_ids_are_the_catalogs
#: says so when it is missing).
CRUSH: typing.Any = "crush"


@pytest.fixture
def crush(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> typing.Iterator[object]:
    """The throwaway harness package, on ``sys.path`` and registered in the catalog."""
    import importlib
    import textwrap

    from actors.harnesses import catalog

    package = tmp_path / "packages" / "throwaway_crush"
    package.mkdir(parents=True)
    for name, text in _CRUSH.items():
        (package / f"{name}.py").write_text(textwrap.dedent(text).lstrip())
    monkeypatch.syspath_prepend(str(tmp_path / "packages"))
    module = importlib.import_module("throwaway_crush")
    catalog.register(module.SPEC)
    try:
        yield module
    finally:
        catalog.unregister("crush")
        for name in [m for m in sys.modules if m.split(".")[0] == "throwaway_crush"]:
            del sys.modules[name]


def test_a_new_harness_is_installed(
    crush: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from actors.cli.main import main

    with pytest.raises(SystemExit):
        main(["install-hooks", "--help"])
    assert "crush" in capsys.readouterr().out
    home = tmp_path / "crush-home"
    home.mkdir(mode=0o700)
    argv = ["install-hooks", "crush", "--config-dir", str(home), "--executable", "/opt/paneward"]
    assert main(argv) == 0
    assert (home / "hooks.sh").read_text() == (
        "# paneward: crush hook\n/opt/paneward hook --harness crush --owner parent\n"
    )
    assert "Crush reads hooks.sh at its next start" in capsys.readouterr().out
    assert main([*argv, "--uninstall"]) == 0
    assert not (home / "hooks.sh").exists()


def _shown(sup: typing.Any, key: messages.SessionKey) -> messages.Activity | None:
    return next((a for a in sup.snapshot() if a.key == key), None)


async def test_a_new_harness_hook_reaches_the_reducer_with_its_proofs(crush: object) -> None:
    from actors.harnesses import catalog
    from actors.sources import procfs
    from supervisor import Supervisor
    from tests.support.polling import settle_until

    assert catalog.HOOKS.routes[CRUSH] == CRUSH  # the hook listener serves /hook/crush
    key = messages.SessionKey(CRUSH, "s1")
    token = procfs.probe(os.getpid())  # this process stands in for crush: the hook's owner

    def hook(event: str) -> messages.NotifyHook:
        return messages.NotifyHook(
            harness=CRUSH,
            payload={"hook_event_name": event, "session_id": "s1"},
            at_ms=examples.T,
            observed_at_ms=examples.T,
            pid=os.getpid(),
            start_token=token,
        )

    with anyio.fail_after(10):
        async with Supervisor() as sup:
            sup.deliver_nowait(hook("prompt"))
            await settle_until(lambda: getattr(_shown(sup, key), "turn", None) == "working")
            shown = _shown(sup, key)
            assert shown is not None
            assert shown.evidence.source == CRUSH + "_hook"
            # Crush cannot prove a permission wait (its proves): the reducer keeps it unknown.
            sup.deliver_nowait(hook("ask"))
            await settle_until(lambda: getattr(_shown(sup, key), "turn", None) == "unknown")


async def test_a_new_harness_discovery_is_started_by_the_daemon(
    crush: object, tmp_path: Path
) -> None:
    from actors.cli.daemon import DaemonConfig, start_discovery
    from actors.harnesses import catalog
    from supervisor import Supervisor
    from tests.support.polling import poll_until

    home = tmp_path / "crush-home"
    home.mkdir()
    (home / "current").write_text("s2\n")
    others = frozenset(
        d.name for spec in catalog.SPECS.values() if spec.id != CRUSH for d in spec.discovery
    )
    config = DaemonConfig(
        state_dir=tmp_path, socket_path=tmp_path / "hook.sock", homes={"crush": home},
        discovery_off=others,
    )
    key = messages.SessionKey(CRUSH, "s2")
    with anyio.fail_after(20):
        async with Supervisor() as sup:
            started = start_discovery(config, sup)
            assert list(started) == ["crush_sessions"]
            await poll_until(lambda: _shown(sup, key) is not None, "crush's session")
            assert started["crush_sessions"].statistics() == {"runs": 1, "home": str(home)}
            assert sup.statistics().actor_states["crush-sessions"] == "running"


def test_a_new_harness_home_reaches_the_service_unit(
    crush: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A service does not get the shell's environment: install-service writes the variable
    that moves crush's home into the unit."""
    from actors.cli.main import main

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("CRUSH_HOME", str(tmp_path / "crush-home"))
    assert main(["install-service", "--dry-run", "--no-tmux"]) == 0
    assert f'Environment="CRUSH_HOME={tmp_path}/crush-home"' in capsys.readouterr().out.splitlines()


def test_a_new_harness_is_wrapped_and_listed(
    crush: object, capsys: pytest.CaptureFixture[str]
) -> None:
    from actors.cli import status, wrap
    from actors.cli.main import main

    assert wrap.parse_args(["/usr/local/bin/crush", "--yolo"]).harness == CRUSH
    assert wrap.parse_args(["--harness", "crush", "--", "sh"]).harness == CRUSH
    assert "alias crush='paneward wrap -- crush'\n" in wrap.aliases()
    assert "crush" in wrap.usage()
    with pytest.raises(SystemExit):
        main(["wrap", "--help"])
    assert "crush" in capsys.readouterr().out
    assert "crush: crush hooks and its sessions directory" in status.format_proofs(
        status.proofs_json()
    )


# ------------------------------------------------------- the docs list what the catalog holds


def _doc(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def _rows(text: str, header: str) -> list[list[str]]:
    """The cells of each row of the Markdown table whose header line starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows: list[list[str]] = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def _ticked(cell: str) -> set[str]:
    import re

    return set(re.findall(r"`([^`]+)`", cell))


def _titled(cells: list[str]) -> dict[str, str]:
    """Row titles ("Claude Code (2.1.332)", "Hermes") -> the harness whose installer title
    they name."""
    from actors.harnesses import catalog

    titles = {installer.title: harness for harness, installer in catalog.INSTALLERS.items()}
    found: dict[str, str] = {}
    for cell in cells:
        name = cell.split(" (")[0]
        for title, harness in titles.items():
            if title == name or title.startswith(name + " "):
                found[cell] = harness
    return found


def test_the_docs_tables_list_every_harness_of_the_catalog() -> None:
    import re

    from actors.harnesses import catalog

    installable = set(catalog.INSTALLERS)
    wrappable = set(catalog.wrap_choices())
    # docs/hooks.md: the install-hooks usage and its table of files, one row per harness.
    hooks = _doc("docs/hooks.md")
    usage = re.findall(r"^    paneward install-hooks ([a-z|-]+)", hooks, re.MULTILINE)
    assert {h for line in usage for h in line.split("|")} == installable
    assert [r[0] for r in _rows(hooks, "| harness | files edited |")] == list(catalog.INSTALLERS)
    # docs/cli.md: install-hooks' choices.
    choices = re.search(r"`paneward install-hooks ([a-z\\|-]+) ", _doc("docs/cli.md"))
    assert choices is not None
    assert set(choices.group(1).split("\\|")) == installable
    # docs/cli.md: the variables install-service writes into the unit.
    from actors.core.install.service import PASSED_ENV

    unit = r"an `Environment=` line for each of (.*?) set when it runs"
    passed = re.search(unit, _doc("docs/cli.md"))
    assert passed is not None
    assert _ticked(passed.group(1)) == {*PASSED_ENV, *catalog.home_env()}
    # docs/tmux.md: the values of @paneward_harness.
    options = {r[0]: r[1] for r in _rows(_doc("docs/tmux.md"), "| option | values |")}
    assert _ticked(options["`@paneward_harness`"]) == wrappable
    # docs/wrap.md: --harness and the commands it infers.
    wrap = _doc("docs/wrap.md")
    listed = re.search(r"`--harness` \(`([a-z|-]+)`\)", wrap)
    assert listed is not None and set(listed.group(1).split("|")) == wrappable
    inferred = dict(re.findall(r"`([a-z-]+)` → `([a-z-]+)`", wrap))
    assert inferred == {c: catalog.wrap_harness(c) for c in catalog.wrap_commands()}
    # README: the evidence sources, the quick start, where the evidence comes from, the proofs.
    readme = _doc("README.md")
    prose = readme.replace("\n", " ")
    named = re.search(r"for coding agents \((.*?), any program in a PTY\)", prose)
    assert named is not None
    assert sorted(_titled(named.group(1).split(", ")).values()) == sorted(catalog.SPECS)
    honoured = re.search(r"Everything honours (.*?)\.", prose)
    assert honoured is not None and _ticked(honoured.group(1)) == set(catalog.home_env())
    fields = {r[0]: r[1] for r in _rows(readme, "| field | values |")}
    assert _ticked(fields["`evidence.source`"]) == set(typing.get_args(messages.common.Source))
    start = readme[readme.index("## From `pip install` to your own sessions") :]
    start = start[: start.index("```\n", start.index("```sh") + 5)]
    quick = set(re.findall(r"paneward install-hooks ([a-z-]+)", start))
    quick |= {h.strip() for h in re.findall(r"# also: (.*)", start)[0].split(",")}
    assert quick == installable
    evidence = _rows(readme, "| harness | source | how it is found |")
    assert set(_titled([r[0] for r in evidence]).values()) == installable
    assert {h for r in evidence for h in re.findall(r"install-hooks ([a-z-]+)", r[2])} == (
        installable
    )
    proofs = _rows(readme, "| harness | proves from | cannot prove |")
    assert sorted(_titled([r[0] for r in proofs]).values()) == sorted(catalog.SPECS)


# --------------------------------------------------------------------------------------------
# Prose: present tense about this repository, citing only what is in it


def _prose_files(root: Path) -> list[Path]:
    """The code and docs whose prose is checked: every Python file of the packages, the tests
    and the benchmarks, the README, docs/ and bench/RESULTS.md (one section per subject, its
    latest figures with their dates). The fixtures are captures of what agents write, not
    prose."""
    files = [root / "README.md", root / "supervisor.py", *sorted((root / "docs").glob("*.md"))]
    files.append(root / "bench" / "RESULTS.md")
    for folder in ("actors", "messages", "tests", "bench"):
        files += sorted(
            p for p in (root / folder).rglob("*.py") if "fixtures" not in p.relative_to(root).parts
        )
    return [p for p in files if p.exists()]


#: Phrases that narrate the code's history instead of saying what it does. Each is written so
#: that its own text here does not match it (``[y]``, ``[f]``). "was", "no longer" and "still"
#: are not on the list: they describe runtime facts ("a pid that no longer runs", "what was
#: queued"), which is present-tense prose about a program. The one allowed use of the first
#: phrase is the passive ("this set is used for", after is/are/be/been/being).
_HISTORY: tuple[str, ...] = (
    r"(?<!\bis )(?<!\bare )(?<!\bbe )(?<!\bbeen )(?<!\bbeing )\bused t[o]\b",
    r"\bas it alway[s] (?:was|did|has)\b",
    r"\bpreviousl[y]\b",
    r"\bformerl[y]\b",
    r"\bnow fixe[d]\b",
    r"\bbefore this chang[e]\b",
    r"(?<![-\w])(?:issu[e]|sessio[n]) #?\d+\b",  # an issue or a work session by number
)
#: Names of documents that are not in this repository (the design is docs/design.md).
_OUTSIDE: tuple[str, ...] = (
    r"\bDESIG[N]\b",
    r"\breferenc[e]/",
    r"seed-interna[l]s",
    r"\b[\w-]*ancho[r]s\b",
    r"/wor[k]/",  # a path on the developers' machine
)


def _prose_problems(root: Path) -> list[str]:
    """Every line of :func:`_prose_files` under ``root`` that narrates history, names a document
    outside the repository, cites a ``.md`` file the repository does not have, or cites a
    section (``§N``) other than one of docs/design.md's numbered sections."""
    import re

    denied = [re.compile(p, re.IGNORECASE) for p in _HISTORY] + [re.compile(p) for p in _OUTSIDE]
    design = root / "docs" / "design.md"
    sections = set(re.findall(r"^## (\d+)\.", design.read_text(), re.MULTILINE)) if (
        design.exists()
    ) else set()
    documents = {p.name for p in root.rglob("*.md") if ".venv" not in p.parts}
    problems: list[str] = []
    for path in _prose_files(root):
        where = path.relative_to(root)
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            found = [f"{m.group(0)!r}" for rx in denied for m in rx.finditer(line)]
            found += [
                f"{name} is not in the repository"
                for name in re.findall(r"(?<![\w.*/-])([\w-]+\.md)\b", line)
                if name not in documents
            ]
            for m in re.finditer(r"(\S*)\s*§\s*(\d+)", line):
                cited = m.group(1).rstrip(")")
                if not cited.endswith("design.md") or m.group(2) not in sections:
                    found.append(f"§{m.group(2)} is not a section of docs/design.md")
            problems += [f"{where}:{n}: {why}: {line.strip()}" for why in found]
    return problems


def test_prose_is_present_tense_and_cites_only_the_repository() -> None:
    """Code and docs say what IS: no narrated history (how the code behaved before, an issue or
    a work session by number), and every document they cite is in the repository (the design:
    docs/design.md §N)."""
    problems = _prose_problems(ROOT)
    assert not problems, "\n".join(problems)


def test_the_prose_check_finds_what_it_is_for(tmp_path: Path) -> None:
    """The check is not vacuous: a tree with one line of each kind yields exactly those lines,
    and the passive use and a cited section of docs/design.md pass."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "design.md").write_text("# Design\n\n## 1. Axes\n")
    (tmp_path / "actors").mkdir()
    lines = [
        "# the flush used" + " to take everything",  # history
        "# (see DESI" + "GN \u00a74)",  # outside document
        "# facts: reference" + "/hermes.md",  # outside folder and file
        "# fixed in issue" + " 12",  # issue number
        "# docs/design.md §9",  # no such section
        "# this set is used to skip backups",  # allowed: passive
        "# docs/design.md §1; docs/design.md",  # allowed: in the repo
    ]
    (tmp_path / "actors" / "x.py").write_text("\n".join(lines) + "\n")
    flagged = {int(p.split(":")[1]) for p in _prose_problems(tmp_path)}
    assert flagged == {1, 2, 3, 4, 5}


def _package_docstring_names(package: Path) -> tuple[set[str], str]:
    """What a package holds (its modules and sub-packages, public ones) and its docstring."""
    import ast

    children = {
        p.stem if p.is_file() else p.name
        for p in package.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()
    }
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    return {c for c in children if not c.startswith("_")}, doc


@pytest.mark.parametrize(
    "package",
    sorted(
        str(p.parent.relative_to(ROOT))
        for folder in ("actors", "messages")
        for p in (ROOT / folder).rglob("__init__.py")
    ),
)
def test_a_package_docstring_names_what_the_package_holds(package: str) -> None:
    """Each package's docstring lists its modules and sub-packages as they are (a module is
    named as ``name``, :mod:`.name` or :mod:`package.name`)."""
    import re

    children, doc = _package_docstring_names(ROOT / package)
    missing = sorted(c for c in children if not re.search(rf"(?<![\w-]){re.escape(c)}\b", doc))
    assert not missing, f"{package}/__init__.py's docstring does not name {missing}"


# --------------------------------------------------------------------------------------------
# Tests and benchmarks share helpers through tests/support/ only

#: What a test or bench module may import from tests/: the helpers and the shared fixtures.
_SHARED_TEST_MODULES = ("tests.support", "tests.conftest")


def _imported(where: Path, node: object) -> list[str]:
    """The modules (or module attributes) an import statement of the file ``where`` names,
    relative imports resolved against its package."""
    import ast

    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        package = where.parent.parts[: len(where.parent.parts) - node.level + 1]
        base = ".".join((*package, base) if base else package)
    return [f"{base}.{alias.name}" for alias in node.names]


def _shared(module: str) -> bool:
    return any(module == s or module.startswith(s + ".") for s in _SHARED_TEST_MODULES)


def _test_module_imports(root: Path) -> list[str]:
    """Every import, in a Python file of tests/ or bench/ (the fixtures aside: they are programs
    the tests run), of a module under tests/ other than :data:`_SHARED_TEST_MODULES` and their
    modules."""
    import ast

    found: list[str] = []
    for folder in ("tests", "bench"):
        for path in sorted((root / folder).rglob("*.py")):
            where = path.relative_to(root)
            if "fixtures" in where.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                found += [
                    f"{where}:{getattr(node, 'lineno', 0)}: imports {name}"
                    for name in _imported(where, node)
                    if (name == "tests" or name.startswith("tests.")) and not _shared(name)
                ]
    return found


def test_no_test_or_bench_module_imports_a_test_module() -> None:
    """What two test modules, or a benchmark and a test, share lives in tests/support/ (or is a
    fixture of tests/conftest.py): a test module is nobody's library."""
    problems = _test_module_imports(ROOT)
    assert not problems, "\n".join(problems)


def test_the_test_import_check_finds_what_it_is_for(tmp_path: Path) -> None:
    """The check is not vacuous: each way of importing a test module is found, the helpers and
    the fixtures' programs pass."""
    (tmp_path / "tests" / "cli").mkdir(parents=True)
    (tmp_path / "tests" / "fixtures").mkdir()
    (tmp_path / "bench").mkdir()
    lines = [
        "from tests.cli.test_jump import drawn",
        "import tests.sources.test_fleet_link",
        "from tests import test_design",
        "from . import test_jump",
        "from .test_jump import drawn",
        "from tests.support.tmux import drawn_text",
        "from tests import support",
        "import tests.support.sessions",
        "from tests.conftest import home",
    ]
    (tmp_path / "tests" / "cli" / "test_x.py").write_text("\n".join(lines) + "\n")
    (tmp_path / "bench" / "bench_x.py").write_text("from tests.cli import test_jump\n")
    (tmp_path / "tests" / "fixtures" / "fake.py").write_text("from tests.cli import test_jump\n")
    assert _test_module_imports(tmp_path) == [
        "tests/cli/test_x.py:1: imports tests.cli.test_jump.drawn",
        "tests/cli/test_x.py:2: imports tests.sources.test_fleet_link",
        "tests/cli/test_x.py:3: imports tests.test_design",
        "tests/cli/test_x.py:4: imports tests.cli.test_jump",
        "tests/cli/test_x.py:5: imports tests.cli.test_jump.drawn",
        "bench/bench_x.py:1: imports tests.cli.test_jump",
    ]
