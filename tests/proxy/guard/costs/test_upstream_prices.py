from __future__ import annotations

import pytest

from runguard.config.compatible import CompatibleUpstream, ModelPrice
from runguard.proxy.core.events import Usage
from runguard.proxy.guard.costs.upstream_prices import UpstreamPrices, spend

PRICES = UpstreamPrices(
    {
        "groq": CompatibleUpstream(
            url="https://api.groq.com/openai",
            prices={
                "llama-3.1-8b-instant": ModelPrice(input=0.05, output=0.08),
                "gpt-4o": ModelPrice(input=1, output=2, cached_input=0.5),
            },
        ),
        "vllm": CompatibleUpstream(url="http://vllm:8000"),
    }
)


def test_a_model_its_upstream_prices_is_priced_by_that_table() -> None:
    usage = Usage(1_000_000, 1_000_000)
    assert PRICES.cost("groq", "llama-3.1-8b-instant", usage) == pytest.approx(0.13)
    assert PRICES.cost("groq", "LLAMA-3.1-8b-instant", usage) == pytest.approx(0.13)
    assert PRICES.cost("groq", "gpt-4o-2024-08-06", Usage(1_000_000, 0, cached_tokens=1_000_000)) == pytest.approx(0.5)
    assert PRICES.cost("groq", "llama-3.1-8b-instant", None) == 0.0
    assert PRICES.cost("vllm", "qwen", None) == 0.0 and PRICES.cost("vllm", "qwen", Usage(0, 0)) == 0.0  # nothing used


@pytest.mark.parametrize(
    ("upstream", "model"),
    [("groq", "gpt-4o-mini"), ("groq", "llama-3.1-70b"), ("vllm", "gpt-4o"), ("vllm", "llama-3.1-8b-instant")],
)
def test_any_other_model_is_unpriced_never_another_table_s_row(upstream: str, model: str) -> None:
    assert PRICES.cost(upstream, model, Usage(10, 10)) is None


def test_upstreams_it_does_not_cover_are_priced_elsewhere() -> None:
    assert PRICES.covers("groq") and PRICES.covers("vllm") and not PRICES.covers("openai")


def test_a_spend_with_unpriced_requests_is_never_written_as_zero() -> None:
    assert spend(0.0123, False) == "$0.0123" and spend(0.0, False) == "$0.0000"
    assert spend(0.0123, True) == "$0.0123 + unpriced" and spend(0.0, True) == "unpriced"
    assert spend(0.5, 3) == "$0.5000 + unpriced" and spend(0.5, 0) == "$0.5000"  # a count of unpriced requests
    assert spend(None) == "unpriced"  # one request's NULL cost
