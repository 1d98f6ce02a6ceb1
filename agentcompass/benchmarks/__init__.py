"""Built-in benchmarks (``shell_tasks``), imported lazily through the registry.

The parameter checks are shared with the harnesses (kept there so both packages use one implementation).
"""

from __future__ import annotations

from ..harnesses import check_param_keys, dict_param, float_param, int_param, str_list_param, str_param

__all__ = ["check_param_keys", "dict_param", "float_param", "int_param", "str_list_param", "str_param"]
