"""``install-hooks pi``: what the real Pi writes into its settings between install and
uninstall is kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support import agents
from tests.support.install import files, no_paneward_left, run_agent, run_install


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
