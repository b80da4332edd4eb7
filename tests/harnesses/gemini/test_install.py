"""``install-hooks gemini`` on the real settings file a user had (tests/fixtures/gemini/): the
user's hooks kept, idempotent, exactly reversible; hooks enabled, and only that removed; what
the real Gemini CLI writes between install and uninstall is kept.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from actors.harnesses.gemini import hooks as gemini_hooks
from tests.support import FIXTURES, agents
from tests.support.install import files, no_paneward_left, run_agent, run_install


def test_gemini_install_on_a_real_settings_file_round_trips(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gemini = home / ".gemini"
    gemini.mkdir()
    # The lab's settings.json, with the user's own loggers on 11 events.
    original = (FIXTURES / "gemini" / "settings.json.written").read_bytes()
    (gemini / "settings.json").write_bytes(original)
    assert run_install("gemini") == 0
    said = capsys.readouterr().out
    assert "without asking" in said and "only the events paneward needs" in said
    data = json.loads((gemini / "settings.json").read_text())
    command = "'/opt/pw bin/paneward' hook --harness gemini --owner parent"
    for event in gemini_hooks.INSTALLED_EVENTS:
        groups = data["hooks"][event]
        assert groups[-1] == {"hooks": [{"name": "paneward", "type": "command",
                                         "command": command, "timeout": 5000}]}
        assert groups[0]["hooks"][0]["name"] == f"log-{event}"  # the user's, first and kept
    assert "paneward" not in json.dumps(data["hooks"]["AfterModel"])
    assert data["hooksConfig"] == {"enabled": True, "notifications": True}
    before = files(gemini)
    assert run_install("gemini") == 0
    assert files(gemini) == before  # idempotent
    assert run_install("gemini", "--uninstall") == 0
    assert (gemini / "settings.json").read_bytes() == original


def test_gemini_install_enables_hooks_and_uninstall_removes_only_that(home: Path) -> None:
    assert run_install("gemini") == 0
    settings = home / ".gemini" / "settings.json"
    assert json.loads(settings.read_text())["hooksConfig"] == {"enabled": True}
    text = settings.read_text().replace('"hooksConfig"', '"model": "m",\n  "hooksConfig"')
    settings.write_text(text)  # the user adds a setting after the install
    assert run_install("gemini", "--uninstall") == 0
    assert json.loads(settings.read_text()) == {"model": "m"}


# --------------------------------------------------------------------------------------------
# What the real Gemini CLI writes between install and uninstall is kept


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
