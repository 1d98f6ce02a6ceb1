"""Log parsers of SWE-bench Multilingual: JavaScript/TypeScript, Go, Rust, Java, C/C++, PHP and Ruby.

Each reproduces the official harness's parser for its test framework (``swebench`` 4.1.0), quirks included,
taking only the log. They are registered in :mod:`agentcompass.benchmarks.swebench.log_parsers` under the same names.
"""

from __future__ import annotations

# log_parsers first: its registration block imports .registry, whose modules need log_parsers.TestStatus.
import agentcompass.benchmarks.swebench.log_parsers  # noqa: F401
from agentcompass.benchmarks.swebench.lang_parsers.dispatch import INSTANCE_PARSER_NAMES, parser_name_for_instance
from agentcompass.benchmarks.swebench.lang_parsers.registry import LANG_PARSERS, LANG_REPO_TO_PARSER_NAME

__all__ = ["INSTANCE_PARSER_NAMES", "LANG_PARSERS", "LANG_REPO_TO_PARSER_NAME", "parser_name_for_instance"]
