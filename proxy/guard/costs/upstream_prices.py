"""The price tables of named OpenAI-compatible upstreams (`upstreams.compatible.<name>.prices`).

A compatible service (OpenRouter, Groq, a vLLM of one's own) serves models the shipped tables do not know,
or knows at other prices, so each is priced by its own table only: a model its table names is priced
there (the exact name, case aside, or that name followed by version tokens, `-2024-08-06`, `@001`); any
other model is **unpriced**: its cost is unknown, never taken from another upstream's row nor counted as a
price of zero. An unpriced response adds nothing to a run's or a key's spend, so budget caps cannot stop on
it; token and step caps hold as for any request. The records, `runguard-proxy runs` and the dashboard show
such a run as unpriced (`priced`), never as $0.

Requests to the built-in providers are priced by the shipped tables (`pricing.ModelTables`): a model they
do not know is unpriced too, shown so when the views are given the tables (`shipped`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from runguard.config.compatible import CompatibleUpstream, ModelPrice
from runguard.config.settings import Settings
from runguard.proxy.core.events import Usage
from runguard.proxy.guard.costs.pricing import ModelTables, Price, resolve


def _price(row: ModelPrice) -> Price:
    cached = row.cached_input if row.cached_input is not None else row.input
    return Price(row.input, cached, row.output)


def _find(table: Mapping[str, Price], model: str) -> Price | None:
    name = resolve(table, model)  # the shipped tables' rule: exact, or extended by version tokens only
    return table[name] if name is not None else None


class UpstreamPrices:
    """Each named upstream's price table (see the module docstring); empty when none is configured."""

    def __init__(self, upstreams: Mapping[str, CompatibleUpstream], shipped: ModelTables | None = None) -> None:
        self._shipped = shipped  # the built-in providers' tables: None, every model of theirs counts as priced
        self._tables = {
            name: {model.lower(): _price(row) for model, row in upstream.prices.items()}
            for name, upstream in upstreams.items()
        }

    def covers(self, upstream: str) -> bool:
        """Whether `upstream` is a named upstream, priced by its own table only."""
        return upstream in self._tables

    def priced(self, upstream: str, model: str) -> bool:
        """Whether `model` has a price on `upstream`: its own table for a named upstream, else the shipped
        tables (when given)."""
        table = self._tables.get(upstream)
        if table is not None:
            return _find(table, model) is not None
        return self._shipped is None or self._shipped.price(model) is not None

    def cost(self, upstream: str, model: str, usage: Usage | None) -> float | None:
        """The USD cost of `usage` of `model` on the named `upstream`; None when unpriced."""
        price = _find(self._tables.get(upstream, {}), model)
        if price is None:
            return None
        return price.cost(usage) if usage is not None else 0.0


def shipped_prices(settings: Settings) -> UpstreamPrices:
    """The prices the views judge by: each named upstream's table, and the shipped tables as configured."""
    return UpstreamPrices(settings.upstreams.compatible, ModelTables(settings.pricing_file, settings.models_file))


def spend(usd: float, unpriced: bool) -> str:
    """A spend as the views write it: `$0.0123`, `$0.0123 + unpriced` when some requests have no price, and
    `unpriced` (never `$0.0000`) when none of them has one."""
    if not unpriced:
        return f"${usd:,.4f}"
    return f"${usd:,.4f} + unpriced" if usd > 0 else "unpriced"


def any_unpriced(prices: UpstreamPrices, served: Iterable[Sequence[str]]) -> bool:
    """Whether any (provider, model) a run's requests went to has no price (`UpstreamPrices.priced`)."""
    return any(not prices.priced(provider, model) for provider, model in served)
