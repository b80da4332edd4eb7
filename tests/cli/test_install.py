"""install-hooks on real files with user content: preserved, idempotent, exactly reversible."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest

import messages
from actors.cli import hook_client
from actors.cli import install as install_hooks
from actors.cli import main as cli
from actors.core.install.config_edit import HookTarget, InstallError, is_paneward_command
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
from actors.sources.hook_listener import HookListener
from messages.common import Harness
from messages.evidence import HookHint, NotifyHook
from tests import support
from tests.support import agents
from tests.support.install import EXE, files, run_install
from tests.support.sinks import ListSink

CLAUDE_EVENTS = claude_hooks.INSTALLED_EVENTS
CODEX_EVENTS = codex_hooks.INSTALLED_EVENTS
CURSOR_EVENTS = cursor_hooks.INSTALLED_EVENTS
install_claude_settings = claude_install.install_settings
install_codex_config = codex_install.install_config

FIXTURES = support.FIXTURES / "hooks"

USER_SETTINGS = """{
    "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
    "env": {"FOO": "bär"},
    "hooks": {
        "Stop": [
            {"matcher": "", "hooks": [{"type": "command", "command": "say done"}]}
        ],
        "PreCompact": [{"hooks": [{"type": "command", "command": "backup.sh"}]}]
    },
    "model": "opus"
}"""  # 4-space indent, inline objects, no trailing newline: not what json.dumps writes


def ours(entries: list[Any]) -> list[Any]:
    return [
        h
        for group in entries
        for h in group.get("hooks", [])
        if is_paneward_command(h.get("command")) or h.get("type") == "http"
    ]


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    claude = tmp_path / "claude-config"
    codex = tmp_path / "codex-home"
    state = tmp_path / "state"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", os.fspath(claude))
    monkeypatch.setenv("CODEX_HOME", os.fspath(codex))
    monkeypatch.setenv("PANEWARD_STATE_DIR", os.fspath(state))
    monkeypatch.setenv("HOME", os.fspath(tmp_path / "home"))
    monkeypatch.setenv("HERMES_HOME", os.fspath(tmp_path / "hermes-home"))
    for name in ("GEMINI_CLI_HOME", "XDG_CONFIG_HOME", "PI_CODING_AGENT_DIR"):
        monkeypatch.delenv(name, raising=False)
    return {"claude": claude, "codex": codex, "state": state, "home": tmp_path / "home",
            "hermes": tmp_path / "hermes-home"}


# --------------------------------------------------------------------------------------------
# Claude Code settings.json


def test_claude_install_preserves_user_content_is_idempotent_and_reversible(
    homes: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    settings = homes["claude"] / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS)
    settings.chmod(0o640)

    assert run_install("claude-code") == 0
    installed = json.loads(settings.read_text())
    user = json.loads(USER_SETTINGS)
    for key in ("permissions", "env", "model"):
        assert installed[key] == user[key]
    assert installed["hooks"]["PreCompact"] == user["hooks"]["PreCompact"]
    # The user's own Stop hook is first and untouched; ours is appended as its own group.
    assert installed["hooks"]["Stop"][0] == user["hooks"]["Stop"][0]
    for event in CLAUDE_EVENTS:
        assert ours(installed["hooks"][event]) == [
            {
                "type": "command",
                "command": "'/opt/pw bin/paneward' hook --harness claude-code"
                " --owner env:CLAUDE_PID",
                "timeout": 10,
            }
        ], event
    assert stat.S_IMODE(settings.stat().st_mode) == 0o640
    backups = sorted(settings.parent.glob("settings.json.paneward-backup-*"))
    assert len(backups) == 1 and backups[0].read_text() == USER_SETTINGS
    out = capsys.readouterr().out
    assert "merged paneward's hooks into it (backup:" in out

    before_second = snapshot(settings.parent)
    assert run_install("claude-code") == 0
    assert snapshot(settings.parent) == before_second  # no write, no new backup
    assert "already installed; nothing to do" in capsys.readouterr().out

    assert run_install("claude-code", "--uninstall") == 0
    assert settings.read_text() == USER_SETTINGS  # byte for byte, odd formatting and all
    assert "original bytes restored from backup" in capsys.readouterr().out


def test_claude_uninstall_after_user_edit_keeps_their_edit(homes: dict[str, Path]) -> None:
    settings = homes["claude"] / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS)
    assert run_install("claude-code") == 0
    edited = json.loads(settings.read_text())
    edited["model"] = "sonnet"  # Claude or the user changed something since
    settings.write_text(json.dumps(edited, indent=2) + "\n")
    assert run_install("claude-code", "--uninstall") == 0
    expected = json.loads(USER_SETTINGS)
    expected["model"] = "sonnet"
    assert json.loads(settings.read_text()) == expected


def test_claude_absent_file_is_created_then_removed(homes: dict[str, Path]) -> None:
    settings = homes["claude"] / "settings.json"
    assert run_install("claude-code") == 0
    assert set(json.loads(settings.read_text())["hooks"]) == set(CLAUDE_EVENTS)
    assert run_install("claude-code", "--uninstall") == 0
    assert not settings.exists()


def test_claude_http_keeps_session_start_a_command_and_creates_token(
    homes: dict[str, Path],
) -> None:
    settings = homes["claude"] / "settings.json"
    assert run_install("claude-code", "--http", "--http-port", "47999") == 0
    token_path = homes["state"] / "http-token"
    token = token_path.read_text().strip()
    assert len(token) >= 40
    assert stat.S_IMODE(token_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600  # it holds the token
    hooks = json.loads(settings.read_text())["hooks"]
    assert ours(hooks["SessionStart"])[0]["type"] == "command"
    for event in set(CLAUDE_EVENTS) - {"SessionStart"}:
        assert ours(hooks[event]) == [
            {
                "type": "http",
                "url": "http://127.0.0.1:47999/hook/claude-code",
                "headers": {"X-Paneward-Token": token},
                "timeout": 10,
            }
        ]
    # Switching back to command hooks rewrites ours in place (no duplicates).
    assert run_install("claude-code") == 0
    hooks = json.loads(settings.read_text())["hooks"]
    assert all(len(ours(hooks[e])) == 1 and ours(hooks[e])[0]["type"] == "command" for e in hooks)
    # The same token is reused by a later --http install.
    assert run_install("claude-code", "--http", "--http-port", "47999") == 0
    assert token_path.read_text().strip() == token


async def test_http_token_written_by_install_is_accepted_by_the_listener(
    homes: dict[str, Path],
) -> None:
    assert run_install("claude-code", "--http") == 0
    listener = HookListener(HOOKS, socket_path=homes["state"] / "rt" / "hook.sock", http_port=0)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            tg.start_soon(listener.run, ListSink())
            await listener.wait_listening()
            assert listener.http_port is not None
            tg.cancel_scope.cancel()


def test_invalid_json_is_refused_untouched(
    homes: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    settings = homes["claude"] / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"hooks": {,}}')
    assert run_install("claude-code") == 1
    assert settings.read_text() == '{"hooks": {,}}'
    assert "is not valid JSON" in capsys.readouterr().err
    assert list(settings.parent.iterdir()) == [settings]


def test_wrong_shape_is_refused() -> None:
    target = HookTarget(EXE)
    with pytest.raises(InstallError, match='"hooks" is a list'):
        install_claude_settings('{"hooks": []}', target)
    with pytest.raises(InstallError, match=r"hooks\.Stop is a str"):
        install_claude_settings('{"hooks": {"Stop": "x"}}', target)


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


# --------------------------------------------------------------------------------------------
# Codex config.toml + hooks.json


def test_codex_chains_the_users_notify_and_restores_it_exactly(
    homes: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    homes["codex"].mkdir()
    config = homes["codex"] / "config.toml"
    original = (FIXTURES / "config.toml").read_text()
    config.write_text(original)
    user_notify = tomllib.loads(original)["notify"]

    assert run_install("codex") == 0
    text = config.read_text()
    data = tomllib.loads(text)
    assert data["notify"] == [
        EXE,
        "hook",
        "--harness",
        "codex",
        "--owner",
        "parent",
        "--forward-json",
        json.dumps(user_notify),
    ]
    before = tomllib.loads(original)
    assert {k: v for k, v in data.items() if k != "notify"} == {
        k: v for k, v in before.items() if k != "notify"
    }
    assert "# paneward-original: notify = " in text
    out = capsys.readouterr().out
    assert "found your notify" in out and "chained it" in out
    hooks = json.loads((homes["codex"] / "hooks.json").read_text())["hooks"]
    assert set(hooks) == set(CODEX_EVENTS)

    first = snapshot(homes["codex"])
    assert run_install("codex") == 0
    assert snapshot(homes["codex"]) == first

    assert run_install("codex", "--uninstall") == 0
    assert config.read_text() == original
    assert not (homes["codex"] / "hooks.json").exists()


def test_codex_multiline_notify_and_no_notify(homes: dict[str, Path]) -> None:
    target = HookTarget(EXE)
    multi = '# top\nmodel = "m"\nnotify = [\n  "a", # x\n  "b]",\n]\n\n[tui]\nx = 1\n'
    installed, _ = install_codex_config(multi, target)
    assert installed is not None
    assert tomllib.loads(installed)["notify"][-1] == json.dumps(["a", "b]"])
    assert tomllib.loads(installed)["tui"] == {"x": 1}
    restored, _ = codex_install.uninstall_config(installed)
    assert restored == multi

    bare = 'model = "m"\n\n[tui]\nx = 1\n'
    installed, note = install_codex_config(bare, target)
    assert installed is not None and "no notify was set" in note
    assert tomllib.loads(installed)["notify"] == [
        EXE, "hook", "--harness", "codex", "--owner", "parent"
    ]
    assert install_codex_config(installed, target)[0] is None
    restored, _ = codex_install.uninstall_config(installed)
    assert restored == bare


def test_codex_refuses_malformed_notify() -> None:
    with pytest.raises(InstallError, match="not a list of strings"):
        install_codex_config('notify = "say hi"\n', HookTarget(EXE))
    with pytest.raises(InstallError, match="not valid TOML"):
        install_codex_config("notify = [\n", HookTarget(EXE))


def test_codex_hooks_json_keeps_user_hooks(homes: dict[str, Path]) -> None:
    homes["codex"].mkdir()
    hooks_json = homes["codex"] / "hooks.json"
    original = (FIXTURES / "hooks.json").read_text()
    hooks_json.write_text(original)
    assert run_install("codex") == 0
    merged = json.loads(hooks_json.read_text())["hooks"]
    for event, groups in json.loads(original)["hooks"].items():
        assert merged[event][: len(groups)] == groups
    assert run_install("codex", "--uninstall") == 0
    assert hooks_json.read_text() == original


async def test_installed_codex_notify_runs_end_to_end(
    homes: dict[str, Path], tmp_path: Path
) -> None:
    """Run the installed notify argv exactly as Codex would (payload appended as last arg)."""
    homes["codex"].mkdir()
    out = tmp_path / "user-notify.out"
    user = [sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write(sys.argv[-1])"]
    config = homes["codex"] / "config.toml"
    await anyio.Path(config).write_text(f"notify = {json.dumps([*user, os.fspath(out)])}\n")
    executable = os.fspath(Path(sys.executable).with_name("paneward"))
    assert cli.main(["install-hooks", "codex", "--executable", executable]) == 0
    notify = tomllib.loads(await anyio.Path(config).read_text())["notify"]
    payload = (FIXTURES / "notify.jsonl").read_text().splitlines()[0]
    payload_arg = json.loads(payload)["argv"][-1]
    sock = tmp_path / "rt" / "hook.sock"
    received: list[object] = []
    done = anyio.Event()

    class Sink(ListSink):
        def deliver_nowait(self, message: messages.Inbound) -> None:
            received.append(message)
            done.set()

    with anyio.fail_after(30):
        listener = HookListener(HOOKS, socket_path=sock)
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.run, Sink())
            await listener.wait_listening()
            result = await anyio.run_process(
                [*notify, payload_arg],
                env={**os.environ, "PANEWARD_SOCKET": os.fspath(sock)},
                check=False,
            )
            assert result.returncode == 0
            await done.wait()
            tg.cancel_scope.cancel()
    assert await anyio.Path(out).read_text() == payload_arg
    assert getattr(received[0], "payload", None) == json.loads(payload_arg)


# --------------------------------------------------------------------------------------------
# The agent's own edits between install and uninstall: kept. Each harness rewrites its own
# file as the real CLI does it (the real CLI where it can run here).

def run_agent(argv: list[str | Path], env: dict[str, str]) -> str:
    done = subprocess.run(  # a short local command of the real CLI (no model, no network)
        [os.fspath(a) for a in argv], env={"PATH": os.environ["PATH"], **env},
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


CODEX_USER = """\
model = "gpt-mock"   # mine
[tui]
screen_reader_detection_done = true
"""


def _as_begin_end_block(installed: str) -> str:
    """The trust record in the form other paneward releases write: the tables, unmarked,
    between the ``TRUST_BEGIN`` and ``TRUST_END`` comment lines at the end of the file."""
    if codex_install.TRUST_BEGIN in installed:
        return installed
    at = installed.index("[hooks.state.")
    tables = re.sub(r"(?m)^(\[hooks\.state\..*\])  # paneward-trust.*$", r"\1", installed[at:])
    return (installed[:at] + codex_install.TRUST_BEGIN + "\n" + tables
            + codex_install.TRUST_END + "\n")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("form", ["marked tables", "begin-end block"])
def test_codex_uninstall_keeps_the_tables_the_real_codex_wrote_among_paneward_trust(
    homes: dict[str, Path], form: str
) -> None:
    codex = agents.agent("codex")
    homes["codex"].mkdir()
    config = homes["codex"] / "config.toml"
    config.write_text(CODEX_USER)
    assert run_install("codex", "--trust") == 0
    if form == "begin-end block":
        config.write_text(_as_begin_end_block(config.read_text()))
    env = {"HOME": os.fspath(homes["home"]), "CODEX_HOME": os.fspath(homes["codex"])}
    # The real Codex writes its config.toml (toml_edit): a new table goes at the end of the
    # file -- after paneward's trust tables, inside a begin/end block -- as the TUI's own
    # [tui.model_availability_nux] does.
    run_agent([codex, "mcp", "add", "pw-probe", "--", "/bin/echo", "hi"], env)
    written = config.read_text()
    assert written.index("[mcp_servers.pw-probe]") > written.rindex("[hooks.state.")
    if form == "begin-end block":
        assert written.index("[mcp_servers.pw-probe]") < written.index(codex_install.TRUST_END)
    mine = tomllib.loads(CODEX_USER) | {
        "mcp_servers": {"pw-probe": {"command": "/bin/echo", "args": ["hi"]}}
    }
    assert run_install("codex", "--uninstall") == 0
    text = config.read_text()
    assert tomllib.loads(text) == mine
    assert "paneward" not in text and "# mine" in text
    # Installed again over Codex's table: a re-run of --trust keeps it, --uninstall too.
    assert run_install("codex", "--trust") == 0
    assert run_install("codex", "--trust") == 0
    assert tomllib.loads(config.read_text())["mcp_servers"] == mine["mcp_servers"]
    assert run_install("codex", "--uninstall") == 0
    assert config.read_text() == text
    listed = json.loads(run_agent([codex, "mcp", "list", "--json"], env))
    assert [server["name"] for server in listed] == ["pw-probe"]


def test_codex_uninstall_keeps_codexs_own_hook_state_and_tui_tables_in_a_begin_end_block(
    homes: dict[str, Path],
) -> None:
    # The layout the real Codex leaves (simulated here, as its toml_edit writes it): its new
    # tables appended at the end of the file, just above the block's last comment line; one is
    # its own trust record for the user's hook, one a table of the TUI's own state.
    homes["codex"].mkdir()
    config = homes["codex"] / "config.toml"
    config.write_text(CODEX_USER)
    assert run_install("codex", "--trust") == 0
    block = _as_begin_end_block(config.read_text())
    codexs = (
        '[hooks.state."/elsewhere/hooks.json:stop:0:0"]\ntrusted_hash = "sha256:0000"\n\n'
        '[tui.model_availability_nux]\n"gpt-5.5" = 4\n'
    )
    end = block.index(codex_install.TRUST_END)
    config.write_text(block[:end] + "\n" + codexs + block[end:].rstrip("\n"))
    assert run_install("codex", "--uninstall") == 0
    text = config.read_text()
    assert "paneward" not in text
    assert tomllib.loads(text) == tomllib.loads(CODEX_USER + codexs)


def no_paneward_left(directory: Path) -> dict[str, bytes]:
    """:func:`~tests.support.install.files`; none of them mentions paneward any more."""
    found = files(directory)
    assert not [name for name, data in found.items() if b"paneward" in data]
    return found


def test_claude_uninstall_keeps_the_settings_claude_wrote_since(homes: dict[str, Path]) -> None:
    config = homes["claude"]
    config.mkdir()
    settings = config / "settings.json"
    settings.write_text(USER_SETTINGS)
    assert run_install("claude-code") == 0
    # Simulated (the real Claude Code writes settings.json from its TUI only: /model, an
    # "always allow" answer): Claude rewrites the whole file, JSON.stringify(settings, null, 2).
    data = json.loads(settings.read_text())
    data["model"] = "sonnet"
    data["permissions"]["allow"].append("Bash(echo hi)")
    data["enabledPlugins"] = {"pw-probe@local": True}
    settings.write_text(json.dumps(data, indent=2))
    assert run_install("claude-code", "--uninstall") == 0
    expected = json.loads(USER_SETTINGS)
    expected["model"] = "sonnet"
    expected["permissions"]["allow"].append("Bash(echo hi)")
    expected["enabledPlugins"] = {"pw-probe@local": True}
    assert json.loads(settings.read_text()) == expected
    no_paneward_left(config)


@pytest.mark.timeout(120)
def test_gemini_uninstall_keeps_the_settings_the_real_gemini_wrote_since(
    homes: dict[str, Path],
) -> None:
    gemini = agents.cli("gemini")
    config = homes["home"] / ".gemini"
    config.mkdir(parents=True)
    settings = config / "settings.json"
    settings.write_text('{\n  "ui": {"theme": "GitHub"}\n}\n')
    assert run_install("gemini") == 0
    env = {"HOME": os.fspath(homes["home"])}
    run_agent([gemini, "mcp", "add", "-s", "user", "pw-probe", "/bin/echo", "hi"], env)
    written = json.loads(settings.read_text())
    assert written["mcpServers"] == {"pw-probe": {"command": "/bin/echo", "args": ["hi"]}}
    assert run_install("gemini", "--uninstall") == 0
    assert json.loads(settings.read_text()) == {
        "ui": {"theme": "GitHub"},
        "mcpServers": {"pw-probe": {"command": "/bin/echo", "args": ["hi"]}},
    }
    no_paneward_left(config)


# A pipx-style path: Hermes's YAML dump folds a command this long over two lines.
LONG_EXE = "/home/someone/.local/share/pipx/venvs/paneward/bin/paneward"


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("had_hooks", "exe"), [(False, EXE), (True, EXE), (True, LONG_EXE)])
def test_hermes_uninstall_keeps_the_settings_the_real_hermes_wrote_since(
    homes: dict[str, Path], had_hooks: bool, exe: str
) -> None:
    import yaml

    hermes = agents.cli("hermes")
    config = homes["hermes"] / "config.yaml"
    config.parent.mkdir()
    mine = "model:\n  default: gpt-mock\n"
    if had_hooks:
        mine += "hooks:\n  on_session_start:\n    - command: /bin/echo mine\n      timeout: 5\n"
    config.write_text(mine)
    assert cli.main(["install-hooks", "hermes", "--executable", exe]) == 0
    # The real Hermes rewrites the whole file (a YAML dump: paneward's marker comment is gone,
    # a long command is folded).
    env = {"HOME": os.fspath(homes["home"]), "HERMES_HOME": os.fspath(homes["hermes"])}
    run_agent([hermes, "config", "set", "display.compact", "true"], env)
    assert "# added by paneward" not in config.read_text()
    assert yaml.safe_load(config.read_text())["display"] == {"compact": True}
    rewritten = config.read_bytes()
    assert (b"--harness\n" in rewritten) == (exe == LONG_EXE)  # folded
    # A re-run finds its entries in Hermes's layout: nothing to change.
    assert cli.main(["install-hooks", "hermes", "--executable", exe]) == 0
    assert config.read_bytes() == rewritten
    assert run_install("hermes", "--uninstall") == 0
    assert yaml.safe_load(config.read_text()) == yaml.safe_load(mine) | {
        "display": {"compact": True}
    }
    assert "paneward" not in config.read_text()


def test_hermes_uninstall_in_an_indentless_layout_removes_exactly_paneward_items() -> None:
    # A YAML dump without Hermes's IndentDumper (PyYAML's default) puts list items at their
    # key's column, and may fold a long command; a comment between items is the user's.
    ours = f"{LONG_EXE} hook --harness hermes --owner parent"
    text = (
        "hooks:\n"
        "  on_session_start:\n"
        "  - command: /bin/echo mine\n"
        "  # my note\n"
        f"  - command: {ours.replace(' --harness ', ' --harness' + chr(10) + '      ')}\n"
        "    timeout: 10\n"
        "  pre_llm_call:\n"
        f'  - {{command: "{ours}"}}\n'
        "model: x\n"
    )
    result, _ = hermes_install.uninstall_config(text)
    assert result == (
        "hooks:\n  on_session_start:\n  - command: /bin/echo mine\n  # my note\nmodel: x\n"
    )
    # An item sharing its line with others (a flow list) cannot be cut out line by line.
    inline = text.replace(f'  pre_llm_call:\n  - {{command: "{ours}"}}\n',
                          f'  pre_llm_call: [{{command: "{ours}"}}, {{command: mine}}]\n')
    with pytest.raises(InstallError, match="written inline"):
        hermes_install.uninstall_config(inline)


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


@pytest.mark.timeout(120)
def test_opencode_uninstall_keeps_the_files_the_real_opencode_wrote_since(
    homes: dict[str, Path],
) -> None:
    opencode = agents.cli("opencode")
    config = homes["home"] / ".config" / "opencode"
    assert run_install("opencode") == 0
    env = {"HOME": os.fspath(homes["home"])}
    run_agent([opencode, "mcp", "add", "pw-probe", "--url", "http://127.0.0.1:9/mcp"], env)
    wrote = {name: data for name, data in files(config).items() if b"paneward" not in data}
    assert "opencode.jsonc" in wrote
    assert run_install("opencode", "--uninstall") == 0
    assert no_paneward_left(config) == wrote


@pytest.mark.timeout(120)
def test_pi_uninstall_keeps_the_settings_the_real_pi_wrote_since(
    homes: dict[str, Path], tmp_path: Path
) -> None:
    pi = agents.cli("pi")
    config = homes["home"] / ".pi" / "agent"
    assert run_install("pi") == 0
    extension = tmp_path / "mine.ts"
    extension.write_text("export default function (pi) {}\n")
    run_agent([pi, "install", extension], {"HOME": os.fspath(homes["home"])})
    wrote = {name: data for name, data in files(config).items() if b"paneward" not in data}
    assert json.loads(wrote["settings.json"])["packages"]
    assert run_install("pi", "--uninstall") == 0
    assert no_paneward_left(config) == wrote


def test_cursor_uninstall_keeps_hooks_added_since_and_deletes_a_file_it_created(
    homes: dict[str, Path],
) -> None:
    cursor = homes["home"] / ".cursor"
    hooks_json = cursor / "hooks.json"
    assert run_install("cursor") == 0
    assert run_install("cursor", "--uninstall") == 0
    assert not hooks_json.exists()  # paneward created it: nothing else was in it
    assert run_install("cursor") == 0
    # Simulated (Cursor adds a hook the user writes in its settings): the file rewritten whole.
    data = json.loads(hooks_json.read_text())
    data["hooks"]["stop"].append({"command": "./mine.sh"})
    hooks_json.write_text(json.dumps(data, indent=2) + "\n")
    assert run_install("cursor", "--uninstall") == 0
    assert json.loads(hooks_json.read_text()) == {
        "version": 1, "hooks": {"stop": [{"command": "./mine.sh"}]}
    }


# --------------------------------------------------------------------------------------------
# Cursor


def test_cursor_hooks(homes: dict[str, Path]) -> None:
    cursor = homes["home"] / ".cursor"
    cursor.mkdir(parents=True)
    hooks_json = cursor / "hooks.json"
    original = json.dumps({"version": 1, "hooks": {"stop": [{"command": "./mine.sh"}]}}, indent=2)
    original += "\n"
    hooks_json.write_text(original)
    assert run_install("cursor") == 0
    data = json.loads(hooks_json.read_text())
    assert data["hooks"]["stop"] == [
        {"command": "./mine.sh"},
        {"command": "'/opt/pw bin/paneward' hook --harness cursor --owner none"},
    ]
    assert set(data["hooks"]) == set(CURSOR_EVENTS)
    first = snapshot(cursor)
    assert run_install("cursor") == 0
    assert snapshot(cursor) == first
    assert run_install("cursor", "--uninstall") == 0
    assert hooks_json.read_text() == original


def test_http_is_claude_only(capsys: pytest.CaptureFixture[str], homes: dict[str, Path]) -> None:
    assert run_install("codex", "--http") == 1
    assert "--http is only for Claude Code" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# The owner rule (--owner) and entries written by releases before it


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


OLD_CLAUDE = "'/old/paneward' hook --harness claude-code"  # written before --owner existed


def test_old_entry_without_owner_is_rewritten_in_place_and_uninstalled(
    homes: dict[str, Path],
) -> None:
    assert is_paneward_command(OLD_CLAUDE)
    settings = homes["claude"] / "settings.json"
    settings.parent.mkdir()
    user_stop = {"type": "command", "command": "say done"}
    old = {"type": "command", "command": OLD_CLAUDE, "timeout": 10}
    settings.write_text(
        json.dumps(
            {
                "model": "opus",
                "hooks": {
                    "Stop": [{"matcher": "", "hooks": [user_stop, old]}],
                    "SessionStart": [{"hooks": [old]}],
                },
            },
            indent=2,
        )
    )
    assert run_install("claude-code") == 0
    hooks = json.loads(settings.read_text())["hooks"]
    new = {
        "type": "command",
        "command": "'/opt/pw bin/paneward' hook --harness claude-code --owner env:CLAUDE_PID",
        "timeout": 10,
    }
    # Same group, same position: rewritten in place, not appended beside the stale one.
    assert hooks["Stop"] == [{"matcher": "", "hooks": [user_stop, new]}]
    assert hooks["SessionStart"] == [{"hooks": [new]}]
    assert all(ours(hooks[e]) == [new] for e in CLAUDE_EVENTS)

    assert run_install("claude-code", "--uninstall") == 0
    assert json.loads(settings.read_text()) == {
        "model": "opus",
        "hooks": {"Stop": [{"matcher": "", "hooks": [user_stop]}]},
    }
    # An old entry alone (no re-run since the upgrade) is removed by --uninstall as well.
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [old]}]}, "model": "x"}))
    assert run_install("claude-code", "--uninstall") == 0
    assert json.loads(settings.read_text()) == {"model": "x"}


def test_old_codex_notify_and_hooks_without_owner_are_upgraded_and_removed(
    homes: dict[str, Path],
) -> None:
    homes["codex"].mkdir()
    config = homes["codex"] / "config.toml"
    user = ["say", "done"]
    old_argv = ["/old/paneward", "hook", "--harness", "codex", "--forward-json", json.dumps(user)]
    config.write_text(
        'model = "m"\n'
        f"{codex_install.ORIGINAL_PREFIX}notify = {json.dumps(user)}\n"
        f"notify = {json.dumps(old_argv)}  {codex_install.NOTIFY_MARKER}\n"
    )
    hooks_json = homes["codex"] / "hooks.json"
    old_hook = {"type": "command", "command": "/old/paneward hook --harness codex", "timeout": 10}
    hooks_json.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [old_hook]}]}}))

    assert run_install("codex") == 0
    assert tomllib.loads(config.read_text())["notify"] == [
        *[EXE, "hook", "--harness", "codex", "--owner", "parent"],
        *["--forward-json", json.dumps(user)],
    ]
    stop = json.loads(hooks_json.read_text())["hooks"]["Stop"]
    assert stop == [
        {
            "hooks": [
                {
                    "type": "command",
                    "command": "'/opt/pw bin/paneward' hook --harness codex --owner parent",
                    "timeout": 10,
                }
            ]
        }
    ]
    assert run_install("codex", "--uninstall") == 0
    assert config.read_text() == f'model = "m"\nnotify = {json.dumps(user)}\n'
    assert "hooks" not in json.loads(hooks_json.read_text())


def test_old_cursor_entry_without_owner_is_rewritten_in_place(homes: dict[str, Path]) -> None:
    cursor = homes["home"] / ".cursor"
    cursor.mkdir(parents=True)
    hooks_json = cursor / "hooks.json"
    old = {"command": "/old/paneward hook --harness cursor"}
    hooks_json.write_text(json.dumps({"version": 1, "hooks": {"stop": [old, {"command": "x"}]}}))
    assert run_install("cursor") == 0
    stop = json.loads(hooks_json.read_text())["hooks"]["stop"]
    assert stop == [
        {"command": "'/opt/pw bin/paneward' hook --harness cursor --owner none"},
        {"command": "x"},
    ]
    assert run_install("cursor", "--uninstall") == 0
    remaining = json.loads(hooks_json.read_text())
    assert remaining == {"version": 1, "hooks": {"stop": [{"command": "x"}]}}


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


def test_the_output_names_each_file_once_and_no_trust_advice_with_trust(
    homes: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    homes["codex"].mkdir()
    (homes["codex"] / "config.toml").write_text(CODEX_USER)
    files = [homes["codex"] / "hooks.json", homes["codex"] / "config.toml"]
    for args in (["--dry-run"], [], ["--uninstall"], ["--dry-run", "--trust"], ["--trust"],
                 ["--trust"], ["--uninstall"]):
        assert run_install("codex", *args) == 0
        out = capsys.readouterr().out
        said = [line for line in out.splitlines() if not line.startswith(("+", "-", " ", "@"))]
        for path in files:
            assert sum(line.count(os.fspath(path)) for line in said) == 1, (args, out)
        advice = "`paneward install-hooks codex --trust` records that consent"
        assert (advice in out) == (args in (["--dry-run"], [])), (args, out)
    assert "(backup: config.toml.paneward-backup-" in out


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
