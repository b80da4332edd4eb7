"""``install-hooks codex --trust``: the trust hash is Codex's own command-hook hash, recorded for
paneward's entries only and removed exactly; checked against the real Codex 0.171.0
(``codex app-server`` ``hooks/list``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest

from actors.harnesses.codex import install as codex_install
from tests.support.agents import agent
from tests.support.install import run_install


def test_codex_trusted_hash_is_codexs_command_hook_hash() -> None:
    # Values Codex 0.171.0 reported as currentHash (hooks/list) for these exact entries.
    command = "/usr/local/bin/paneward hook --harness codex --owner parent"
    assert codex_install.trusted_hash("PreToolUse", command, 10) == (
        "sha256:b60c6007e512fd16b87200587431eb0acdc5709904e04b5dad7db95981c583e4"
    )
    assert codex_install.trusted_hash("SessionEnd", command, 3) == (
        "sha256:39068bac0aa8f80ad81f7c30bbf3179a11d4083c8a7decbb168aa45df17fac29"
    )


USER_CODEX: Final = """\
model = "gpt-mock"   # mine

[hooks.state."/elsewhere/hooks.json:stop:0:0"]
trusted_hash = "sha256:0000"
"""


def test_codex_trust_is_recorded_for_paneward_only_and_removed_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    codex = tmp_path / "codex-home"
    codex.mkdir()
    monkeypatch.setenv("CODEX_HOME", os.fspath(codex))
    monkeypatch.setenv("PANEWARD_STATE_DIR", os.fspath(tmp_path / "state"))
    (codex / "config.toml").write_text(USER_CODEX)
    user_hooks = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}
    (codex / "hooks.json").write_text(json.dumps(user_hooks))
    assert run_install("codex") == 0
    said = capsys.readouterr().out
    assert '"Hooks need review"' in said and "--trust" in said
    assert "# paneward-trust" not in (codex / "config.toml").read_text()
    assert run_install("codex", "--trust") == 0
    import tomllib

    state = tomllib.loads((codex / "config.toml").read_text())["hooks"]["state"]
    path = os.path.realpath(codex / "hooks.json")
    # Ours only: the user's Stop hook (group 0) stays for them to review; ours is group 1.
    assert f"{path}:stop:0:0" not in state
    assert state[f"{path}:stop:1:0"]["trusted_hash"].startswith("sha256:")
    assert len([k for k in state if k.startswith(path)]) == 7
    assert state["/elsewhere/hooks.json:stop:0:0"] == {"trusted_hash": "sha256:0000"}
    again = (codex / "config.toml").read_bytes()
    assert run_install("codex", "--trust") == 0 and (codex / "config.toml").read_bytes() == again
    assert run_install("codex", "--uninstall") == 0
    assert (codex / "config.toml").read_text() == USER_CODEX
    assert json.loads((codex / "hooks.json").read_text()) == user_hooks


def test_trust_is_codex_only(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_install("gemini", "--trust") == 1
    assert "--trust is only for Codex" in capsys.readouterr().err


def _hooks_list(codex_home: Path, cwd: Path) -> list[dict[str, Any]]:
    """``hooks/list`` from the real ``codex app-server`` (JSON-RPC over stdio)."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.fspath(codex_home.parent),
           "CODEX_HOME": os.fspath(codex_home)}
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"clientInfo": {"name": "paneward-test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [os.fspath(cwd)]}},
    ]
    with subprocess.Popen([os.fspath(agent("codex")), "app-server"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                          cwd=cwd, text=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            for request in requests:
                proc.stdin.write(json.dumps(request) + "\n")
                proc.stdin.flush()
            for line in proc.stdout:
                reply = json.loads(line)
                if reply.get("id") == 2:
                    hooks: list[dict[str, Any]] = reply["result"]["data"][0]["hooks"]
                    return hooks
        finally:
            proc.kill()
    raise AssertionError("codex app-server ended without answering hooks/list")


@pytest.mark.timeout(120)
def test_the_real_codex_trusts_paneward_entries_after_install_trust(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codex_home = tmp_path / "home" / ".codex"
    codex_home.mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    (codex_home / "hooks.json").write_text(json.dumps(
        {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}
    ))
    monkeypatch.setenv("CODEX_HOME", os.fspath(codex_home))
    monkeypatch.setenv("PANEWARD_STATE_DIR", os.fspath(tmp_path / "state"))
    assert run_install("codex") == 0
    untrusted = _hooks_list(codex_home, work)
    ours = [h for h in untrusted if "hook --harness codex" in h["command"]]
    assert len(ours) == 7 and {h["trustStatus"] for h in ours} == {"untrusted"}
    # Our hash is Codex's own, for every entry (SessionEnd included: written with 3 s).
    expected = codex_install.trust_keys(
        (codex_home / "hooks.json").read_text(), [os.path.realpath(codex_home / "hooks.json")]
    )
    assert {h["key"]: h["currentHash"] for h in ours} == expected
    assert run_install("codex", "--trust") == 0
    trusted = {h["key"]: h["trustStatus"] for h in _hooks_list(codex_home, work)}
    assert {trusted[k] for k in expected} == {"trusted"}
    user = next(h for h in untrusted if h["command"] == "say done")
    assert trusted[user["key"]] == "untrusted"  # the user's own hook still asks
