"""Model cost from a price table the user passes in ``model_params`` (or a recipe does):

    price_per_million: {input: 2.5, output: 10.0, cached_input: 1.25}

in any currency, per million tokens. ``cached_input`` defaults to ``input``. Cost of a usage is
``(prompt - cached) * input + cached * cached_input + completion * output``, over a million.
The key is for the engine only: it never goes into an upstream request body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from .._errors import ConfigError
from .._validate import check_number
from ..records import Usage

PRICE_PARAM = "price_per_million"
#: per million tokens; far above any real price, low enough that no cost overflows.
MAX_PRICE = 1e6
_KEYS = ("input", "output", "cached_input")


class PriceTable(msgspec.Struct, frozen=True):
    """Prices per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cached_input: float | None = None

    def cost(self, usage: Usage) -> float:
        """What ``usage`` cost."""
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        total = ((usage.prompt_tokens - cached) * self.input + cached * cached_price
                 + usage.completion_tokens * self.output)
        return round(total / 1e6, 9)


def parse_price_table(value: Any) -> PriceTable:
    """``{input, output, cached_input}`` -> PriceTable; ConfigError naming the field otherwise."""
    field = f"model_params.{PRICE_PARAM}"
    if not isinstance(value, Mapping):
        raise ConfigError(f"Model param `{PRICE_PARAM}` must be a mapping with keys {', '.join(_KEYS)}, "
                          f"got {value!r}.", field=field)
    unknown = sorted(set(value) - set(_KEYS))
    if unknown:
        raise ConfigError(f"Model param `{PRICE_PARAM}` has unknown key {unknown[0]!r}; allowed: "
                          f"{', '.join(_KEYS)}.", field=f"{field}.{unknown[0]}")
    for k, v in value.items():
        check_number(v, f"{field}.{k}", ge=0, le=MAX_PRICE, what="a price")
    return PriceTable(input=float(value.get("input", 0.0)), output=float(value.get("output", 0.0)),
                      cached_input=float(value["cached_input"]) if "cached_input" in value else None)
