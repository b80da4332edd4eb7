"""``install-hooks hermes`` on a realistic ``config.yaml``: merged into the user's hooks, comments
kept, idempotent, exactly reversible; a config without hooks, and the layouts it refuses;
what the real Hermes rewrites between install and uninstall is kept, and an indentless layout
loses exactly paneward's items.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import pytest

from actors.cli import main as cli
from actors.core.install.config_edit import HookTarget, InstallError
from actors.harnesses.hermes import hooks as hermes_hooks
from actors.harnesses.hermes import install as hermes_install
from tests.support import agents
from tests.support.install import EXE, run_agent, run_install

HERMES_CONFIG: Final = """\
# Hermes settings (mine)
model:
  provider: custom
  base_url: http://127.0.0.1:9/v1   # the lab's mock
  default: mock-model

hooks:
  # my audit logger
  pre_tool_call:
    - command: /usr/local/bin/audit pre
      timeout: 5
      matcher: terminal
  on_session_end:
    - command: "/usr/local/bin/audit end"
display:
  compact: true
"""


def test_hermes_install_merges_into_the_users_hooks_and_round_trips(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hermes = home / ".hermes"
    hermes.mkdir()
    config = hermes / "config.yaml"
    config.write_text(HERMES_CONFIG)
    assert run_install("hermes") == 0
    said = capsys.readouterr().out
    assert "Allow this hook to run? [y/N]" in said and "HERMES_ACCEPT_HOOKS=1" in said
    import yaml

    data = yaml.safe_load(config.read_text())
    command = "'/opt/pw bin/paneward' hook --harness hermes --owner parent"
    mine = {"command": command, "timeout": 10}
    assert data["hooks"]["pre_tool_call"] == [
        {"command": "/usr/local/bin/audit pre", "timeout": 5, "matcher": "terminal"}, mine
    ]
    assert data["hooks"]["on_session_end"] == [{"command": "/usr/local/bin/audit end"}, mine]
    assert list(data["hooks"]) == [
        "pre_tool_call", "on_session_end",
        *[e for e in hermes_hooks.INSTALLED_EVENTS if e not in ("pre_tool_call", "on_session_end")],
    ]
    assert data["display"] == {"compact": True}
    text = config.read_text()
    assert "# my audit logger" in text and "# the lab's mock" in text  # comments kept
    # What Hermes itself reads: its parser takes our entries, commands shlex-split to argv.
    assert all(isinstance(e, dict) and e.get("command") for v in data["hooks"].values()
               for e in v)
    first = config.read_bytes()
    assert run_install("hermes") == 0
    assert config.read_bytes() == first  # idempotent
    assert run_install("hermes", "--uninstall") == 0
    assert config.read_text() == HERMES_CONFIG


def test_hermes_install_without_hooks_and_refusals(home: Path) -> None:
    from actors.core.install.config_edit import InstallError

    t = HookTarget(EXE)
    text, _ = hermes_install.install_config("model: {default: m}\n", t)
    assert text is not None and text.startswith("model: {default: m}\n\nhooks:  # added by")
    back, _ = hermes_install.uninstall_config(text)
    assert back == "model: {default: m}\n"
    with pytest.raises(InstallError, match="inline"):
        hermes_install.install_config("hooks: {}\n", t)
    with pytest.raises(InstallError, match="not valid YAML"):
        hermes_install.install_config("hooks: [\n", t)
    with pytest.raises(InstallError, match="inline"):
        hermes_install.install_config("hooks:\n  pre_llm_call: []\n", t)
    # A hermes hook from an older release (no --owner) is rewritten in place.
    old = 'hooks:\n  pre_llm_call:\n    - command: "/old/paneward hook --harness hermes"\n'
    new, _ = hermes_install.install_config(old, t, events=("pre_llm_call",))
    assert new == (
        "hooks:\n  pre_llm_call:\n"
        '    - command: "\'/opt/pw bin/paneward\' hook --harness hermes --owner parent"\n'
    )


# --------------------------------------------------------------------------------------------
# What the real Hermes writes between install and uninstall is kept


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
