"""Which release of the official SWE-bench harness our log parsers and grading follow (``grading_version``).

``5.0.2`` (the default) is the current release, used for SWE-bench Verified, Multilingual and the leaderboards;
``4.1.0`` is the last release that generates eval scripts from its specs table. The two differ in the pytest
parsers (names with spaces, `` - reason`` suffixes, ``SKIPPED [N]`` summaries) and in grading (truncated
parametrized ids, skipped tests, logs with no results, the test exit code); docs/swebench.md lists each rule.
"""

from __future__ import annotations

from typing import Any

from agentcompass._errors import ConfigError

V5 = "5.0.2"
V4 = "4.1.0"
GRADING_VERSIONS = (V5, V4)
DEFAULT_GRADING_VERSION = V5


def check_grading_version(value: Any, field: str = "grading_version") -> str:
    """``value`` if it is an allowed grading version (None: the default), else a ConfigError naming ``field``."""
    if value is None:
        return DEFAULT_GRADING_VERSION
    if value not in GRADING_VERSIONS:
        raise ConfigError(f"{field} must be one of {', '.join(map(repr, GRADING_VERSIONS))} (the official swebench "
                          f"release whose parsers and grading to follow), got {value!r}", field=field)
    return str(value)
