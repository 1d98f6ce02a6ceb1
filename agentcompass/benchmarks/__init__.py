"""Built-in benchmarks (``shell_tasks``), imported lazily through the registry.

The parameter checks are shared with the harnesses (kept there so both packages use one implementation).
"""

from __future__ import annotations

from ..harnesses import (
    bool_param,
    check_param_keys,
    dict_param,
    float_param,
    int_param,
    str_list_param,
    str_param,
    truncate_middle,
)

__all__ = ["bool_param", "check_param_keys", "dict_param", "float_param", "int_param", "str_list_param", "str_param",
           "truncate_middle"]
