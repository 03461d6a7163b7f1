"""Model tables: price per token and context window, by longest name prefix.

The shipped tables live in `runguard.config` (pricing.yaml, models.yaml); a
user file extends or overrides them. Lookups are cached per model name.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from runguard.config.loader import load_yaml
from runguard.detectors.frozen import frozen
from runguard.proxy.events import Usage


@frozen
class Price:
    """USD per 1M tokens."""

    input: float
    cached_input: float
    output: float

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_tokens, usage.input_tokens)
        fresh = usage.input_tokens - cached
        return (fresh * self.input + cached * self.cached_input + usage.output_tokens * self.output) / 1_000_000


def _load(shipped: str, extra: str | None) -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(resources.files("runguard.config").joinpath(shipped).read_text("utf-8"))
    if extra:
        user = load_yaml(Path(extra).read_text("utf-8")) or {}
        data["models"] = {**data.get("models", {}), **(user.get("models") or {})}
        data["default"] = user.get("default", data["default"])
    return data


def _longest_prefix(table: dict[str, Any], model: str) -> Any | None:
    name = model.lower().removeprefix("models/")
    best = max((prefix for prefix in table if name.startswith(prefix.lower())), key=len, default=None)
    return table[best] if best is not None else None


def _price(raw: dict[str, float]) -> Price:
    return Price(float(raw["input"]), float(raw.get("cached_input", raw["input"])), float(raw["output"]))


class ModelTables:
    def __init__(self, pricing_file: str | None = None, models_file: str | None = None) -> None:
        pricing = _load("pricing.yaml", pricing_file)
        windows = _load("models.yaml", models_file)
        self._prices = {name: _price(raw) for name, raw in pricing["models"].items()}
        self._default_price = _price(pricing["default"])
        self._windows = {name: int(size) for name, size in windows["models"].items()}
        self._default_window = int(windows["default"])
        self._price_cache: dict[str, Price] = {}
        self._window_cache: dict[str, int] = {}

    def price(self, model: str) -> Price:
        found = self._price_cache.get(model)
        if found is None:
            found = _longest_prefix(self._prices, model) or self._default_price
            if len(self._price_cache) > 4096:  # model names come from clients: stay bounded
                self._price_cache.clear()
            self._price_cache[model] = found
        return found

    def window(self, model: str) -> int:
        found = self._window_cache.get(model)
        if found is None:
            found = _longest_prefix(self._windows, model) or self._default_window
            if len(self._window_cache) > 4096:
                self._window_cache.clear()
            self._window_cache[model] = found
        return found

    def cost(self, model: str, usage: Usage | None) -> float:
        return 0.0 if usage is None else self.price(model).cost(usage)
