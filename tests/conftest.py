"""Shared test configuration: asyncio only (aiosqlite cannot run on trio)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, bool]]:
    return ("asyncio", {"debug": True})
