from __future__ import annotations

import pytest

from runguard.config.loader import ConfigError, load_settings


def _load(compatible: dict[str, object]) -> object:
    return load_settings(environ={}, cli={"upstreams": {"compatible": compatible}}).settings


def test_named_upstreams_with_and_without_prices() -> None:
    settings = _load(
        {
            "groq": {
                "url": "https://api.groq.com/openai/v1/",
                "prices": {"llama-3.1-8b": {"input": 0.05, "output": 0.08}},
            },
            "local-vllm": {"url": "http://vllm:8000"},
        }
    )
    groq, vllm = settings.upstreams.compatible["groq"], settings.upstreams.compatible["local-vllm"]  # type: ignore[attr-defined]
    assert groq.url == "https://api.groq.com/openai" and groq.prices["llama-3.1-8b"].output == 0.08
    assert vllm.url == "http://vllm:8000" and vllm.prices == {}


@pytest.mark.parametrize("name", ["v1", "v1beta", "v2", "openai", "gemini", "anthropic", "runguard", "projects"])
def test_a_name_that_would_shadow_a_route_is_refused_naming_the_key(name: str) -> None:
    with pytest.raises(ConfigError, match=rf"upstreams\.compatible\.{name}: the name '{name}' would shadow"):
        _load({name: {"url": "http://127.0.0.1:9"}})


@pytest.mark.parametrize("name", ["Groq", "a/b", "-x", "with space"])
def test_a_name_that_is_no_path_segment_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match=r"upstreams\.compatible"):
        _load({name: {"url": "http://127.0.0.1:9"}})


def test_a_bad_url_or_price_names_its_key() -> None:
    with pytest.raises(ConfigError, match=r"upstreams\.compatible\.groq\.url"):
        _load({"groq": {"url": "ftp://nowhere"}})
    with pytest.raises(ConfigError, match=r"upstreams\.compatible\.groq\.prices\.m\.input"):
        _load({"groq": {"url": "http://x", "prices": {"m": {"input": -1, "output": 1}}}})
