"""``install-hooks codex``: the user's ``notify`` chained and restored exactly, ``hooks.json``
merged; ``--trust``: the trust hash is Codex's own command-hook hash, recorded for paneward's
entries only and removed exactly, checked against the real Codex 0.171.0 (``codex app-server``
``hooks/list``); what the real Codex writes into ``config.toml`` between install and uninstall
is kept; entries written without ``--owner`` upgraded; the output names each file once.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, Final

import anyio
import pytest

import messages
from actors.cli import main as cli
from actors.core.install.config_edit import HookTarget, InstallError
from actors.harnesses.catalog import HOOKS
from actors.harnesses.codex import hooks as codex_hooks
from actors.harnesses.codex import install as codex_install
from actors.sources.hook_listener import HookListener
from tests import support
from tests.support import agents
from tests.support.agents import agent
from tests.support.install import CODEX_USER, EXE, run_agent, run_install, snapshot
from tests.support.sinks import ListSink

CODEX_EVENTS = codex_hooks.INSTALLED_EVENTS
install_codex_config = codex_install.install_config


FIXTURES = support.FIXTURES / "hooks"


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


# --------------------------------------------------------------------------------------------
# config.toml's notify and hooks.json; what the real Codex writes between install and
# uninstall is kept


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

    class SignallingSink(ListSink):
        def deliver_nowait(self, message: messages.Inbound) -> None:
            received.append(message)
            done.set()

    with anyio.fail_after(30):
        listener = HookListener(HOOKS, socket_path=sock)
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.run, SignallingSink())
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
