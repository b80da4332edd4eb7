"""install-hooks' rules every harness shares, on real files with user content: a symlink
followed, ``--dry-run``, ``--events``, ``--http`` for Claude Code only, a comment written since
kept by uninstall, each harness's ``--owner`` rule, the installed events equal to what each
hooks module maps, links planted at its file names, config dirs others can write in, bounded
backups, bad paths. Each harness's own file format: ``tests/harnesses/<harness>/test_install.py``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest

from actors.cli import hook_client
from actors.cli import install as install_hooks
from actors.core.install.config_edit import HookTarget
from actors.core.session.harness import Normalizer
from actors.harnesses.catalog import HOOKS
from actors.harnesses.claude_code import hooks as claude_hooks
from actors.harnesses.claude_code import install as claude_install
from actors.harnesses.codex import hooks as codex_hooks
from actors.harnesses.codex import install as codex_install
from actors.harnesses.cursor import hooks as cursor_hooks
from actors.harnesses.cursor import install as cursor_install
from actors.harnesses.gemini import hooks as gemini_hooks
from actors.harnesses.gemini import install as gemini_install
from actors.harnesses.hermes import hooks as hermes_hooks
from actors.harnesses.hermes import install as hermes_install
from actors.harnesses.opencode import hooks as opencode_hooks
from actors.harnesses.opencode import install as opencode_install
from actors.harnesses.pi import hooks as pi_hooks
from actors.harnesses.pi import install as pi_install
from messages.common import Harness
from messages.evidence import HookHint, NotifyHook
from tests.support.install import CODEX_USER, EXE, USER_SETTINGS, ours, run_install, snapshot

CLAUDE_EVENTS = claude_hooks.INSTALLED_EVENTS
CODEX_EVENTS = codex_hooks.INSTALLED_EVENTS
CURSOR_EVENTS = cursor_hooks.INSTALLED_EVENTS


# --------------------------------------------------------------------------------------------
# Options and file handling every harness shares (shown on Claude Code's settings.json; each
# harness's own file format: tests/harnesses/<harness>/test_install.py)


def test_symlinked_settings_stay_a_symlink(homes: dict[str, Path]) -> None:
    real = homes["claude"].parent / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text(USER_SETTINGS)
    homes["claude"].mkdir()
    link = homes["claude"] / "settings.json"
    link.symlink_to(real)
    assert run_install("claude-code") == 0
    assert link.is_symlink()
    assert "hooks" in json.loads(real.read_text())
    assert run_install("claude-code", "--uninstall") == 0
    assert link.is_symlink() and real.read_text() == USER_SETTINGS


def test_dry_run_writes_nothing(homes: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    settings = homes["claude"] / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS)
    assert run_install("claude-code", "--dry-run") == 0
    assert snapshot(settings.parent) == {"settings.json": USER_SETTINGS.encode()}
    out = capsys.readouterr().out
    assert "would change" in out and "+" in out and "hook --harness claude-code" in out


def test_events_option_limits_the_install(homes: dict[str, Path]) -> None:
    assert run_install("claude-code", "--events", "SessionStart,Stop") == 0
    hooks = json.loads((homes["claude"] / "settings.json").read_text())["hooks"]
    assert set(hooks) == {"SessionStart", "Stop"}


def test_http_is_claude_only(capsys: pytest.CaptureFixture[str], homes: dict[str, Path]) -> None:
    assert run_install("codex", "--http") == 1
    assert "--http is only for Claude Code" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# What is written since the install is kept by uninstall (each harness's own CLI rewriting its
# file: tests/harnesses/<harness>/test_install.py)


@pytest.mark.parametrize(
    ("harness", "name", "mine"),
    [
        ("hermes", "config.yaml", "model:\n  default: gpt-mock\n"),
        ("codex", "config.toml", CODEX_USER),
    ],
)
def test_a_comment_written_since_the_install_is_kept_by_uninstall(
    homes: dict[str, Path], harness: str, name: str, mine: str
) -> None:
    # The rest means what the backup means: the backup's bytes would drop the comment.
    config = homes["hermes" if harness == "hermes" else "codex"] / name
    config.parent.mkdir()
    config.write_text(mine)
    assert run_install(harness, *(["--trust"] if harness == "codex" else [])) == 0
    config.write_text("# my note, written after the install\n" + config.read_text())
    assert run_install(harness, "--uninstall") == 0
    assert config.read_text() == "# my note, written after the install\n" + mine


# --------------------------------------------------------------------------------------------
# The owner rule (--owner) in each harness's commands (an entry written without one: each
# harness's test_install.py)


def _owner_of(command: str) -> str:
    """The ``--owner`` rule the hook client will parse out of an installed command."""
    args = hook_client.parse_args(shlex.split(command)[2:])
    assert args.errors == [], command
    return args.owner


def test_each_harness_command_carries_its_owner_rule(homes: dict[str, Path]) -> None:
    assert run_install("claude-code") == 0
    claude = json.loads((homes["claude"] / "settings.json").read_text())["hooks"]
    for event in CLAUDE_EVENTS:
        (entry,) = ours(claude[event])
        assert entry["command"].endswith(" --owner env:CLAUDE_PID"), event
        assert _owner_of(entry["command"]) == "env:CLAUDE_PID"

    assert run_install("codex") == 0
    notify = tomllib.loads((homes["codex"] / "config.toml").read_text())["notify"]
    assert notify[4:] == ["--owner", "parent"]
    codex = json.loads((homes["codex"] / "hooks.json").read_text())["hooks"]
    assert {_owner_of(h["command"]) for e in CODEX_EVENTS for h in ours(codex[e])} == {"parent"}

    assert run_install("cursor") == 0
    cursor = json.loads((homes["home"] / ".cursor" / "hooks.json").read_text())["hooks"]
    for event in CURSOR_EVENTS:
        (entry,) = cursor[event]
        assert entry == {"command": "'/opt/pw bin/paneward' hook --harness cursor --owner none"}
        assert _owner_of(entry["command"]) == "none"


# --------------------------------------------------------------------------------------------
# What is installed is what the harness's hooks module maps


def _minimal_payload(harness: str, event: str) -> dict[str, Any]:
    session = "conversation_id" if harness == "cursor" else "session_id"
    return {"hook_event_name": event, session: "s-1"}


def _installed(harness: str, homes: dict[str, Path]) -> list[str]:
    """The events a fresh install-hooks made the harness send, read from what it wrote."""
    if harness in ("opencode", "pi"):
        where = {
            "opencode": homes["home"] / ".config" / "opencode" / "plugin" / "paneward.js",
            "pi": homes["home"] / ".pi" / "agent" / "extensions" / "paneward.ts",
        }[harness]
        line = next(x for x in where.read_text().splitlines() if x.startswith("const PW_EVENTS"))
        return list(json.loads(line.partition("new Set(")[2].rpartition(");")[0]))
    if harness == "hermes":
        import yaml

        return list(yaml.safe_load((homes["hermes"] / "config.yaml").read_text())["hooks"])
    where = {
        "claude-code": homes["claude"] / "settings.json",
        "codex": homes["codex"] / "hooks.json",
        "cursor": homes["home"] / ".cursor" / "hooks.json",
        "gemini": homes["home"] / ".gemini" / "settings.json",
    }[harness]
    return list(json.loads(where.read_text())["hooks"])


#: Every harness with hooks: (id, what its hooks module says install-hooks installs, what it maps).
HOOKED: list[tuple[Harness, tuple[str, ...], Normalizer, dict[str, Any]]] = [
    ("claude-code", claude_hooks.INSTALLED_EVENTS, claude_hooks.normalize,
     {**claude_hooks.EVENT_HINTS, "Notification": None}),
    ("codex", codex_hooks.INSTALLED_EVENTS, codex_hooks.normalize, codex_hooks.HOOK_HINTS),
    ("cursor", cursor_hooks.INSTALLED_EVENTS, cursor_hooks.normalize, cursor_hooks.EVENT_HINTS),
    ("hermes", hermes_hooks.INSTALLED_EVENTS, hermes_hooks.normalize, hermes_hooks.EVENT_HINTS),
    ("gemini", gemini_hooks.INSTALLED_EVENTS, gemini_hooks.normalize, gemini_hooks.EVENT_HINTS),
    ("opencode", opencode_hooks.INSTALLED_EVENTS, opencode_hooks.normalize,
     opencode_hooks.EVENT_HINTS),
    ("pi", pi_hooks.INSTALLED_EVENTS, pi_hooks.normalize, pi_hooks.EVENT_HINTS),
]


def test_every_harness_with_hooks_is_compared() -> None:
    assert {h for h, *_ in HOOKED} == set(HOOKS.routes) == set(install_hooks.INSTALLERS)


@pytest.mark.parametrize(("harness", "events", "normalize", "mapped"), HOOKED)
def test_installed_events_are_exactly_the_mapped_ones_and_all_normalize(
    homes: dict[str, Path],
    harness: Harness,
    events: tuple[str, ...],
    normalize: Normalizer,
    mapped: dict[str, Any],
) -> None:
    assert run_install(harness) == 0
    installed = _installed(harness, homes)
    # A fresh file: the same events, in the same order, and exactly the ones the hooks module
    # maps (an event it maps but does not install would be dead code; the reverse, a cost).
    assert installed == list(events)
    assert set(installed) == set(mapped)
    for event in installed:
        hook = NotifyHook(
            harness=harness,
            payload=_minimal_payload(harness, event),
            at_ms=1_000,
            observed_at_ms=1_000,
        )
        assert isinstance(normalize(hook), HookHint), (harness, event)


def test_installed_event_lists_are_derived_from_the_hook_tables() -> None:
    assert (*claude_hooks.EVENT_HINTS, "Notification") == claude_hooks.INSTALLED_EVENTS
    assert {"Elicitation", "ElicitationResult"} <= set(claude_hooks.INSTALLED_EVENTS)
    assert tuple(codex_hooks.HOOK_HINTS) == codex_hooks.INSTALLED_EVENTS
    assert install_hooks.INSTALLERS == {
        "claude-code": claude_install.INSTALLER,
        "codex": codex_install.INSTALLER,
        "cursor": cursor_install.INSTALLER,
        "hermes": hermes_install.INSTALLER,
        "gemini": gemini_install.INSTALLER,
        "opencode": opencode_install.INSTALLER,
        "pi": pi_install.INSTALLER,
    }
    # --http keeps the events Claude Code refuses over http as command hooks.
    wanted = claude_install.entries(
        HookTarget(EXE, "http://127.0.0.1:1/hook/claude-code", "t"), CLAUDE_EVENTS, http=True
    )
    commands = {e for e, entry in wanted.items() if entry["type"] == "command"}
    assert commands == set(CLAUDE_EVENTS) & claude_hooks.HTTP_REFUSED_EVENTS == {"SessionStart"}


# --------------------------------------------------------------------------------------------
# Files another user could plant: the temporary file and the backups


def _planted(config: Path, kind: str, victim: Path) -> list[Path]:
    """Plant ``kind`` links at every name a predictable install-hooks could open in ``config``
    in the next minute: ``.settings.json.paneward-tmp-<this pid>`` and
    ``settings.json.paneward-backup-<UTC second>Z`` (and ``….absent``)."""
    now = int(time.time())
    names = [f".settings.json.paneward-tmp-{os.getpid()}"]
    for second in range(now - 1, now + 60):
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(second))
        names += [f"settings.json.paneward-backup-{stamp}Z",
                  f"settings.json.paneward-backup-{stamp}Z.absent"]
    planted = []
    for i, name in enumerate(names):
        link = config / name
        if kind == "symlink":
            link.symlink_to(victim.with_name(f"{victim.name}-{i}"))  # dangling: exists() is False
        else:
            os.link(victim, link)
        planted.append(link)
    return planted


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
@pytest.mark.parametrize("existing", [False, True])
def test_links_planted_at_predictable_names_are_never_written_through(
    homes: dict[str, Path], tmp_path: Path, kind: str, existing: bool
) -> None:
    config = homes["claude"]
    config.mkdir()
    if existing:
        (config / "settings.json").write_text(USER_SETTINGS)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / "victim"
    victim.write_text("the attacker's inode\n")
    planted = _planted(config, kind, victim)
    assert run_install("claude-code") == 0
    assert run_install("claude-code", "--uninstall") == 0
    assert run_install("claude-code") == 0
    # Nothing was written through a planted name, and settings.json is a new inode of ours.
    assert victim.read_text() == "the attacker's inode\n"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["victim"]
    settings = config / "settings.json"
    assert not settings.is_symlink() and settings.stat().st_ino != victim.stat().st_ino
    assert ours(json.loads(settings.read_text())["hooks"]["Stop"])
    # A planted link is left as it is (a hard link may be pruned as a backup: the victim's
    # inode is untouched either way).
    assert all(p.is_symlink() if kind == "symlink" else not p.exists() or p.samefile(victim)
               for p in planted)


@pytest.mark.parametrize(
    ("mode", "gid", "why"),
    [
        (0o777, None, "is writable by every user (mode 0777)"),
        (0o1777, None, "is writable by every user (mode 1777)"),
        (0o775, 54321, "is writable by its group (gid 54321, mode 0775), which is not your own"),
    ],
)
def test_a_config_dir_other_users_can_write_is_refused_with_the_reason(
    homes: dict[str, Path], capsys: pytest.CaptureFixture[str], mode: int, gid: int | None,
    why: str,
) -> None:
    config = homes["claude"]
    config.mkdir()
    (config / "settings.json").write_text(USER_SETTINGS)
    if gid is not None:
        os.chown(config, -1, gid)
    config.chmod(mode)
    before = snapshot(config)
    assert run_install("claude-code") == 1
    err = capsys.readouterr().err
    assert err.startswith(f"paneward install-hooks: {config} {why}")
    assert "refusing to write in it" in err and err.count("\n") == 1
    assert snapshot(config) == before and sorted(p.name for p in config.iterdir()) == [
        "settings.json"
    ]


def test_a_config_dir_of_another_user_is_refused(
    homes: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    if os.getuid() != 0:
        pytest.skip("giving a directory to another uid needs root")  # pragma: no cover
    config = homes["claude"]
    config.mkdir()
    os.chown(config, 54321, -1)
    assert run_install("claude-code") == 1
    assert capsys.readouterr().err == (
        f"paneward install-hooks: {config} belongs to uid 54321, not to you (uid 0): that user "
        "could replace the files paneward writes there; refusing to write in it\n"
    )
    assert list(config.iterdir()) == []


def test_a_group_writable_config_dir_of_the_users_private_group_is_accepted(
    homes: dict[str, Path],
) -> None:
    private = install_hooks._private_gid()
    if private is None:
        pytest.skip("this user has no private group")  # pragma: no cover
    config = homes["claude"]
    config.mkdir()
    os.chown(config, -1, private)
    config.chmod(0o775)
    assert run_install("claude-code") == 0


def test_the_shared_dir_rule() -> None:
    from actors.core.install.config_edit import shared_dir_problem

    dir_mode = stat.S_IFDIR
    assert shared_dir_problem("/d", 1000, 1000, dir_mode | 0o755, 1000, 1000) is None
    assert shared_dir_problem("/d", 0, 0, dir_mode | 0o755, 1000, 1000) is None  # root's
    assert shared_dir_problem("/d", 1000, 1000, dir_mode | 0o775, 1000, 1000) is None
    assert shared_dir_problem("/d", 1000, 100, dir_mode | 0o775, 1000, 1000) is not None
    assert shared_dir_problem("/d", 1000, 1000, dir_mode | 0o775, 1000, None) is not None
    assert shared_dir_problem("/d", 1000, 1000, dir_mode | 0o757, 1000, 1000) is not None
    assert shared_dir_problem("/d", 1001, 1000, dir_mode | 0o700, 1000, 1000) is not None


# --------------------------------------------------------------------------------------------
# Backups: bounded; the output


def _backup_names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".paneward-backup-" in p.name)


def test_repeated_runs_keep_two_backups_per_file_at_most(homes: dict[str, Path]) -> None:
    config = homes["claude"]
    config.mkdir()
    settings = config / "settings.json"
    settings.write_text(USER_SETTINGS)
    for n in range(4):
        assert run_install("claude-code", "--executable", f"/opt/pw{n}/paneward") == 0
        assert len(_backup_names(config)) <= 2
        assert run_install("claude-code", "--uninstall") == 0
        assert len(_backup_names(config)) <= 2
        assert settings.read_text() == USER_SETTINGS  # the original bytes, every time
    kept = _backup_names(config)
    assert len(kept) == 2
    # The one uninstall restores from (paneward-free) and the file before the last write.
    contents = [(config / name).read_text() for name in kept]
    assert USER_SETTINGS in contents and any("paneward" in c for c in contents)


# --------------------------------------------------------------------------------------------
# Bad paths: one line, exit 1, never a hang or a traceback

_PANEWARD = Path(sys.executable).with_name("paneward")


async def _install(config: Path, *prefix: str) -> tuple[int, str]:
    """``paneward install-hooks claude-code`` in its own process (a FIFO would hang it)."""
    argv = [*prefix, os.fspath(_PANEWARD), "install-hooks", "claude-code", "--config-dir",
            os.fspath(config), "--executable", EXE]
    with anyio.fail_after(30):
        done = await anyio.run_process(argv, check=False)
    assert done.stdout == b"" or done.returncode == 0
    return done.returncode, done.stderr.decode()


async def test_a_fifo_in_place_of_the_settings_file_is_refused_at_once(tmp_path: Path) -> None:
    config = tmp_path / "claude"
    config.mkdir()
    os.mkfifo(config / "settings.json")
    code, err = await _install(config)
    assert (code, err) == (
        1,
        f"paneward install-hooks: {config}/settings.json is not a regular file; "
        "refusing to read or replace it\n",
    )
    assert stat.S_ISFIFO((config / "settings.json").lstat().st_mode)


async def test_a_symlink_loop_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "claude"
    config.mkdir()
    (config / "settings.json").symlink_to(config / "loop")
    (config / "loop").symlink_to(config / "settings.json")
    code, err = await _install(config)
    assert code == 1
    assert err == f"paneward install-hooks: {config}/settings.json is a symbolic-link loop\n"


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) missing")
async def test_a_read_only_directory_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "claude"
    config.mkdir()
    (config / "settings.json").write_text("{}\n")
    config.chmod(0o555)
    try:
        # Without CAP_DAC_OVERRIDE (root has it here), the directory's mode applies.
        code, err = await _install(config, "setpriv", "--bounding-set=-all", "--inh-caps=-all")
    finally:
        config.chmod(0o755)
    assert code == 1
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"paneward install-hooks: cannot write {config}/")
    assert err.endswith(": Permission denied\n")
    assert (config / "settings.json").read_text() == "{}\n"
