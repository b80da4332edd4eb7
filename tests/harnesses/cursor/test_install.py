"""``install-hooks cursor`` on ``~/.cursor/hooks.json``: the user's hooks kept, idempotent,
exactly reversible, a file it created deleted; an entry written without ``--owner`` rewritten in
place."""

from __future__ import annotations

import json
from pathlib import Path

from actors.harnesses.cursor import hooks as cursor_hooks
from tests.support.install import run_install, snapshot

CURSOR_EVENTS = cursor_hooks.INSTALLED_EVENTS


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
