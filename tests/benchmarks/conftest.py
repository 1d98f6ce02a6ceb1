"""Fixtures for benchmark tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentcompass.environments.local.provider import LocalProvider
from agentcompass.interfaces import ComponentContext

from .shell_tasks_helpers import LocalGrader


@pytest.fixture
async def grader() -> AsyncIterator[LocalGrader]:
    provider = LocalProvider({}, ComponentContext(run_id="test"))
    try:
        yield LocalGrader(provider)
    finally:
        await provider.aclose()
        assert provider.open_environments == 0
