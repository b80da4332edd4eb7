"""Shared test configuration: asyncio only (aiosqlite cannot run on trio)."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator

import pluggy
import pytest

from tests.tmux_helpers import TmuxServer


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, bool]]:
    return ("asyncio", {"debug": True})


@pytest.fixture
def server() -> Iterator[TmuxServer]:
    """A private tmux server (``tmux -L pw-<random>``) with one session; only it is killed."""
    srv = TmuxServer()
    srv.start()
    try:
        yield srv
    finally:
        srv.kill()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    """Under CI a skipped test is a failure: nothing may pass by not running."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, which must run every test: {report.longrepr}"
