"""``install-hooks opencode``: what the real OpenCode writes into its config between install
and uninstall is kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import agents
from tests.support.install import files, no_paneward_left, run_agent, run_install


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
