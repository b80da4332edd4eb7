"""``install-hooks hermes`` on a realistic ``config.yaml``: merged into the user's hooks, comments
kept, idempotent, exactly reversible; a config without hooks, and the layouts it refuses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from actors.harnesses.hermes import hooks as hermes_hooks
from actors.harnesses.hermes import install as hermes_install
from tests.support.install import EXE, run_install

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
    from actors.core.install.config_edit import HookTarget, InstallError

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
