"""The price tables of named OpenAI-compatible upstreams (`upstreams.compatible.<name>.prices`).

A compatible service (OpenRouter, Groq, a vLLM of one's own) serves models the shipped tables do not know,
or knows at other prices, so each is priced by its own table only: a model its table names is priced
there (the exact name, case aside, or that name followed by version tokens, `-2024-08-06`, `@001`); any
other model is **unpriced**: its cost is unknown, never taken from another upstream's row nor counted as a
price of zero. An unpriced response adds nothing to a run's or a key's spend, so budget caps cannot stop on
it; token and step caps hold as for any request. Its record keeps no cost (NULL in the store, `unpriced`), so
`runguard-proxy runs`, `show`, the admin API and the dashboard show it as unpriced (`spend`), never as $0.

Requests to the built-in providers are priced by the shipped tables (`pricing.ModelTables`): a model they
do not know is unpriced the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

from runguard.config import CompatibleUpstream, ModelPrice
from runguard.proxy.core.events import Usage
from runguard.proxy.guard.costs.pricing import Price, resolve


def _price(row: ModelPrice) -> Price:
    cached = row.cached_input if row.cached_input is not None else row.input
    return Price(row.input, cached, row.output)


def _find(table: Mapping[str, Price], model: str) -> Price | None:
    name = resolve(table, model)  # the shipped tables' rule: exact, or extended by version tokens only
    return table[name] if name is not None else None


class UpstreamPrices:
    """Each named upstream's price table (see the module docstring); empty when none is configured."""

    def __init__(self, upstreams: Mapping[str, CompatibleUpstream]) -> None:
        self._tables = {
            name: {model.lower(): _price(row) for model, row in upstream.prices.items()}
            for name, upstream in upstreams.items()
        }

    def covers(self, upstream: str) -> bool:
        """Whether `upstream` is a named upstream, priced by its own table only."""
        return upstream in self._tables

    def priced(self, upstream: str, model: str) -> bool:
        """Whether the named `upstream`'s table prices `model`."""
        return _find(self._tables.get(upstream, {}), model) is not None

    def cost(self, upstream: str, model: str, usage: Usage | None) -> float | None:
        """The USD cost of `usage` of `model` on the named `upstream`; None when unpriced (and it used tokens:
        nothing used costs nothing, as `pricing.ModelTables.bill` says)."""
        if usage is None or not (usage.input_tokens or usage.output_tokens):
            return 0.0
        price = _find(self._tables.get(upstream, {}), model)
        return price.cost(usage) if price is not None else None


def spend(usd: float | None, unpriced: int | bool = 0) -> str:
    """A spend as the views write it: `$0.0123`; `$0.0123 + unpriced` when `unpriced` (a count, or a flag) of
    its requests have no price; `unpriced` (never `$0.0000`) for one request whose cost is NULL (`usd` None) or
    a sum of unpriced requests alone."""
    if usd is None:
        return "unpriced"
    if not unpriced:
        return f"${usd:,.4f}"
    return f"${usd:,.4f} + unpriced" if usd > 0 else "unpriced"
