"""``install-hooks claude-code`` on a real ``settings.json`` with user content: preserved,
idempotent, exactly reversible, a user's or Claude Code's own edits since kept; ``--http``
and its token; an entry written without ``--owner`` rewritten in place."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import anyio
import pytest

from actors.core.install.config_edit import HookTarget, InstallError, is_paneward_command
from actors.harnesses.catalog import HOOKS
from actors.harnesses.claude_code import hooks as claude_hooks
from actors.harnesses.claude_code import install as claude_install
from actors.sources.hook_listener import HookListener
from tests.support.install import EXE, USER_SETTINGS, no_paneward_left, ours, run_install, snapshot
from tests.support.sinks import ListSink

CLAUDE_EVENTS = claude_hooks.INSTALLED_EVENTS
install_claude_settings = claude_install.install_settings


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
