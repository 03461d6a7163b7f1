from __future__ import annotations

from pathlib import Path

import pytest

from runguard.config.loader import ConfigError
from runguard.proxy.core.events import Usage
from runguard.proxy.guard.costs.pricing import ModelTables


def test_dated_ids_have_their_model_s_row_and_cached_tokens_are_cheaper() -> None:
    tables = ModelTables()
    assert tables.price("gpt-4o-mini-2024-07-18").input == pytest.approx(0.15)
    assert tables.price("gpt-4o-2024-08-06").input == pytest.approx(2.50)
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cached_tokens=500_000)
    assert tables.cost("gpt-4o", usage) == pytest.approx(0.5 * 2.5 + 0.5 * 1.25 + 10.0)
    assert tables.window("models/gemini-2.5-flash") == 1_048_576
    assert tables.window("unknown-model") == 0  # no window known: no limit


@pytest.mark.parametrize("alias", ["gemini-flash-latest", "gemini-flash-lite-latest", "models/gemini-pro-latest"])
def test_gemini_s_latest_aliases_have_their_models_windows_and_prices(alias: str) -> None:
    tables = ModelTables()
    assert tables.window(alias) == 1_048_576
    assert tables.price(alias) != tables.price("unknown-model")


@pytest.mark.parametrize(("model", "output"), [("o3-pro-2025-06-10", 80.0), ("o1-pro", 600.0), ("gpt-5-pro", 120.0)])
def test_pro_models_are_priced_apart_from_their_families(model: str, output: float) -> None:
    """Priced as o3 (8 USD per 1M output tokens), an o3-pro run spent ten times what its budget counted."""
    assert ModelTables().price(model).output == pytest.approx(output)


@pytest.mark.parametrize(
    ("model", "prompt", "usd"),
    [
        ("gemini-2.5-pro", 200_000, 200_000 * 1.25e-6 + 10_000 * 10e-6),  # at the threshold: the short rates
        ("gemini-2.5-pro", 200_001, 200_001 * 2.5e-6 + 10_000 * 15e-6),  # past it: the whole request, output too
        ("gemini-3-pro-preview", 250_000, 250_000 * 4e-6 + 10_000 * 18e-6),
        ("gemini-1.5-pro-002", 130_000, 130_000 * 2.5e-6 + 10_000 * 10e-6),
        ("gemini-2.5-flash", 500_000, 500_000 * 0.3e-6 + 10_000 * 2.5e-6),  # no long-context rates
    ],
)
def test_a_prompt_past_a_model_s_long_context_threshold_is_charged_its_long_rates(
    model: str, prompt: int, usd: float
) -> None:
    assert ModelTables().cost(model, Usage(prompt, 10_000)) == pytest.approx(usd)


def test_long_context_cached_tokens_have_their_own_rate() -> None:
    usage = Usage(input_tokens=300_000, output_tokens=0, cached_tokens=100_000)
    assert ModelTables().cost("gemini-2.5-pro", usage) == pytest.approx(200_000 * 2.5e-6 + 100_000 * 0.625e-6)


@pytest.mark.parametrize(("model", "output"), [("o3-deep-research-2025-06-26", 40.0), ("o4-mini-deep-research", 8.0)])
def test_deep_research_models_are_priced_apart_from_their_families(model: str, output: float) -> None:
    """Priced as o3 (8 USD per 1M output tokens), an o3-deep-research run spent five times what its budget counted."""
    assert ModelTables().price(model).output == pytest.approx(output)


@pytest.mark.parametrize(
    ("model", "output"), [("gemini-2.5-flash-image-preview", 30.0), ("gemini-3-pro-image-preview", 120.0)]
)
def test_image_models_are_priced_apart_from_their_families(model: str, output: float) -> None:
    """Priced as gemini-2.5-flash (2.50 USD per 1M output tokens), an image agent spent twelve times its budget."""
    assert ModelTables().price(model).output == pytest.approx(output)


def test_a_user_table_may_give_long_context_rates(tmp_path: Path) -> None:
    pricing = tmp_path / "pricing.yaml"
    pricing.write_text(
        "models:\n  my-model: {input: 1, output: 2, long_context: {above_tokens: 1000, input: 3, output: 4}}\n"
    )
    tables = ModelTables(str(pricing))
    assert tables.cost("my-model", Usage(1000, 1000)) == pytest.approx(0.003)
    assert tables.cost("my-model", Usage(1001, 1000)) == pytest.approx((1001 * 3 + 1000 * 4) / 1e6)


def test_hosted_tool_calls_are_charged_per_call_beside_the_tokens() -> None:
    usage = Usage(1_000_000, 0, tool_calls=(("web_search", 30), ("file_search", 4), ("unpriced", 9)))
    assert ModelTables().cost("o3-deep-research", usage) == pytest.approx(10.0 + 30 * 0.01 + 4 * 0.0025)


def test_a_user_table_may_price_hosted_tools(tmp_path: Path) -> None:
    pricing = tmp_path / "pricing.yaml"
    pricing.write_text("tools:\n  web_search: 25\n")
    usage = Usage(0, 0, tool_calls=(("web_search", 2), ("file_search", 4)))
    assert ModelTables(str(pricing)).cost("gpt-4o", usage) == pytest.approx(2 * 0.025 + 4 * 0.0025)


@pytest.mark.parametrize(("tier", "factor"), [(None, 1.0), ("default", 1.0), ("flex", 0.5), ("priority", 2.0)])
def test_the_service_tier_scales_the_token_prices_not_the_tool_fees(tier: str | None, factor: float) -> None:
    usage = Usage(1_000_000, 0, tool_calls=(("web_search", 100),), service_tier=tier)
    assert ModelTables().cost("o3", usage) == pytest.approx(2.0 * factor + 1.0)


def test_audio_tokens_are_charged_at_their_own_rates_and_the_rest_as_text() -> None:
    usage = Usage(10_000, 2_000, cached_tokens=5_000, audio_input_tokens=8_000, audio_output_tokens=1_500)
    # 2k text tokens in (cached or not: the model has no cached rate), 8k heard; 500 text tokens out, 1.5k spoken.
    usd = (2_000 * 2.5 + 8_000 * 40 + 500 * 10 + 1_500 * 80) / 1e6
    assert ModelTables().cost("gpt-4o-audio-preview-2024-12-17", usage) == pytest.approx(usd)
    heard = Usage(1_000, 100, audio_input_tokens=1_000)
    assert ModelTables().cost("gemini-2.5-flash", heard) == pytest.approx((1_000 * 1.0 + 100 * 2.5) / 1e6)
    assert ModelTables().cost("gpt-4o", heard) == pytest.approx((1_000 * 2.5 + 100 * 10) / 1e6)  # no audio rates
    cached = Usage(3_000, 0, cached_tokens=3_000, audio_input_tokens=1_000)  # not said to be audio: text
    assert ModelTables().cost("gemini-2.5-flash", cached) == pytest.approx((2_000 * 0.075 + 1_000 * 1.0) / 1e6)


def test_cached_audio_tokens_cost_the_cached_audio_rate(tmp_path: Path) -> None:
    # A voice call's turn: 20k tokens in, 19k of them heard, 18.5k cached of which 18k audio; 500 out, 400 spoken.
    heard_and_spoken = {"audio_input_tokens": 19_000, "audio_output_tokens": 400}
    turn = Usage(20_000, 500, cached_tokens=18_500, cached_audio_tokens=18_000, **heard_and_spoken)
    text_in = 500 * 4.0 + 500 * 0.40
    heard = 1_000 * 32.0 + 18_000 * 0.40
    out = 100 * 16.0 + 400 * 64.0
    assert ModelTables().cost("gpt-realtime", turn) == pytest.approx((text_in + heard + out) / 1e6)
    # An entry without a cached audio rate: cached audio costs the audio input rate.
    pricing = tmp_path / "pricing.yaml"
    pricing.write_text("models:\n  voice: {input: 4, cached_input: 0.4, output: 16, audio: {input: 32, output: 64}}\n")
    assert ModelTables(str(pricing)).cost("voice", turn) == pytest.approx((text_in + 19_000 * 32.0 + out) / 1e6)
    # A breakdown past what was cached or heard is bounded by them.
    odd = Usage(20_000, 500, cached_tokens=100, audio_input_tokens=19_000, cached_audio_tokens=50_000)
    assert ModelTables().cost("gpt-realtime", odd) == pytest.approx(
        (1_000 * 4.0 + 18_900 * 32.0 + 100 * 0.40 + 500 * 16.0) / 1e6
    )


@pytest.mark.parametrize(
    ("model", "rates", "window"),
    [
        ("ft:gpt-4.1-mini-2025-04-14:acme:support:AbC123", (0.80, 0.20, 3.20), 1_047_576),
        ("ft:gpt-4o-2024-08-06:acme::B1", (3.75, 1.875, 15.00), 128_000),
        ("ft:gpt-4o-mini-2024-07-18:acme::C2", (0.30, 0.15, 1.20), 128_000),
        ("ft:o4-mini-2025-04-16:acme::D3", (4.00, 1.00, 16.00), 200_000),
    ],
)
def test_a_fine_tuned_model_has_its_own_rates_and_its_base_s_window(
    model: str, rates: tuple[float, float, float], window: int
) -> None:
    tables = ModelTables()
    price = tables.price(model)
    assert price is not None
    assert (price.input, price.cached_input, price.output) == pytest.approx(rates)
    assert tables.window(model) == window


def test_a_fine_tuned_model_with_no_rates_of_its_own_is_unpriced_with_its_base_s_window() -> None:
    """OpenAI bills a fine-tune at rates of its own: its base's (or any other) would be a guess."""
    tables = ModelTables()
    model = "ft:gpt-5-mini-2025-08-07:acme::E4"
    assert tables.price(model) is None
    assert tables.bill(model, Usage(1_000, 100)) is None
    assert tables.window(model) == 272_000


def test_a_table_may_give_a_fine_tuned_model_a_window_of_its_own(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text('models:\n  "ft:gpt-4.1-mini-2025-04-14:acme:short": 32000\n')
    tables = ModelTables(models_file=str(models))
    assert tables.window("ft:gpt-4.1-mini-2025-04-14:acme:short:AbC") == 32_000
    assert tables.window("ft:gpt-4.1-mini-2025-04-14:acme:long:XyZ") == 1_047_576


def test_a_name_no_table_knows_is_priced_and_sized_as_the_model_its_responses_name() -> None:
    tables = ModelTables()
    assert tables.price("prod-chat") == tables.price("unknown-model")  # an Azure deployment, before its answer
    tables.served("prod-chat", "gpt-4.1-mini-2025-04-14")
    assert tables.price("prod-chat").input == pytest.approx(0.40)
    assert tables.window("prod-chat") == tables.window("gpt-4.1-mini")
    tables.served("prod-chat", "gpt-4o-2024-11-20")  # the deployment now serves another model
    assert tables.price("prod-chat").input == pytest.approx(2.50)
    tables.served("my-router", "no-such-model")  # a served name no table knows either: nothing learnt
    assert tables.price("my-router") == tables.price("unknown-model")


def test_user_tables_extend_the_shipped_ones(tmp_path: Path) -> None:
    pricing = tmp_path / "pricing.yaml"
    pricing.write_text("models:\n  my-model: {input: 1, output: 2}\n")
    tables = ModelTables(str(pricing))
    assert tables.cost("my-model-v2", Usage(1_000_000, 1_000_000)) == pytest.approx(3.0)
    assert tables.price("gpt-4o").output == pytest.approx(10.0)


def test_a_user_table_with_only_a_default_replaces_the_default(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text("default: 32000\n")
    assert ModelTables(models_file=str(models)).window("unknown-model") == 32_000


@pytest.mark.parametrize(
    ("which", "text", "named"),
    [
        ("pricing_file", "- gpt-4o\n", "pricing_file: .* must be a mapping"),
        ("pricing_file", "gpt-4o: {input: 1, output: 2}\n", "pricing_file: .* must be a mapping"),
        ("pricing_file", "models:\n  my-model: {input: 1}\n", r"pricing_file: models\.my-model: expected"),
        ("pricing_file", "models:\n  my-model: {input: cheap, output: 2}\n", r"pricing_file: models\.my-model"),
        ("pricing_file", "default: {input: -1, output: 2}\n", r"pricing_file: default: prices must be"),
        (
            "pricing_file",
            "models:\n  m: {input: 1, output: 2, long_context: {input: 3, output: 4}}\n",
            r"pricing_file: models\.m: expected long_context: \{above_tokens",
        ),
        (
            "pricing_file",
            "models:\n  m: {input: 1, output: 2, long_context: {above_tokens: 9, input: 3}}\n",
            r"pricing_file: models\.m: expected long_context",
        ),
        (
            "pricing_file",
            "models:\n  m: {input: 1, output: 2, long_context: [1]}\n",
            r"pricing_file: models\.m: expected long_context",
        ),
        ("pricing_file", "tools:\n  web_search: lots\n", r"pricing_file: tools: expected .*web_search: 'lots'"),
        ("pricing_file", "tools: [web_search]\n", r"pricing_file: tools: expected a mapping"),
        ("pricing_file", "models:\n  m: {input: 1, output: 2, audio: {input: 9}}\n", r"models\.m: expected audio"),
        ("pricing_file", "service_tiers:\n  flex: -1\n", r"pricing_file: service_tiers: expected .*flex: -1"),
        ("models_file", "tools:\n  web_search: 25\n", r"models_file: .* must be a mapping .* optionally `default:`$"),
        ("models_file", "models:\n  my-model: 0\n", r"models_file: models\.my-model: expected"),
        ("models_file", "models:\n  my-model: [1]\n", r"models_file: models\.my-model: expected"),
        ("models_file", "models: {a: 1\n", "models_file: .* not valid YAML"),
    ],
)
def test_a_bad_user_table_is_refused_naming_the_setting(tmp_path: Path, which: str, text: str, named: str) -> None:
    path = tmp_path / "table.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=named):
        ModelTables(**{which: str(path)})


def test_a_user_table_that_cannot_be_read_is_refused_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="pricing_file: cannot read"):
        ModelTables(pricing_file=str(tmp_path / "missing.yaml"))
    binary = tmp_path / "models.yaml"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match=r"models_file: .* is not UTF-8"):
        ModelTables(models_file=str(binary))


@pytest.mark.parametrize(
    ("model", "rates"),
    [
        ("claude-haiku-4-5-20251001", (1.00, 0.10, 1.25, 2.00, 5.00)),
        ("claude-sonnet-4-6", (3.00, 0.30, 3.75, 6.00, 15.00)),
        ("claude-opus-4-5-20251101", (5.00, 0.50, 6.25, 10.00, 25.00)),
        ("claude-opus-4-20250514", (15.00, 1.50, 18.75, 30.00, 75.00)),
        ("claude-opus-4-1-20250805", (15.00, 1.50, 18.75, 30.00, 75.00)),
    ],
)
def test_claude_models_price_cache_reads_and_both_cache_writes_apart(
    model: str, rates: tuple[float, float, float, float, float]
) -> None:
    million = 1_000_000
    price = ModelTables().price(model)
    assert (price.input, price.cached_input, price.cache_write, price.cache_write_1h, price.output) == rates
    usage = Usage(
        4 * million, million, cached_tokens=million, cache_write_tokens=million, cache_write_1h_tokens=million
    )
    assert ModelTables().cost(model, usage) == pytest.approx(sum(rates))


def test_a_long_claude_prompt_is_charged_its_long_rates_cache_writes_too() -> None:
    usage = Usage(250_000, 1000, cached_tokens=100_000, cache_write_tokens=100_000)
    expected = (50_000 * 6.00 + 100_000 * 0.60 + 100_000 * 7.50 + 1000 * 22.50) / 1e6
    assert ModelTables().cost("claude-sonnet-4-5", usage) == pytest.approx(expected)


def test_cache_writes_cost_the_input_rate_where_a_table_names_no_write_rate(tmp_path: Path) -> None:
    assert ModelTables().cost("gpt-4o", Usage(1000, 0, cache_write_tokens=1000)) == pytest.approx(0.0025)
    pricing = tmp_path / "pricing.yaml"
    pricing.write_text("models:\n  my-model: {input: 1, output: 2, cache_write: 3, cache_write_1h: 4}\n")
    tables = ModelTables(str(pricing))
    assert tables.cost(
        "my-model", Usage(3000, 0, cache_write_tokens=1000, cache_write_1h_tokens=1000)
    ) == pytest.approx(0.008)
    pricing.write_text("models:\n  my-model: {input: 1, output: 2, cache_write: -3}\n")
    with pytest.raises(ConfigError, match=r"pricing_file: models\.my-model: prices must be"):
        ModelTables(str(pricing))


@pytest.mark.parametrize(
    ("model", "window", "output"),
    [
        ("gpt-4-1106-preview", 128_000, 30.0),  # GPT-4 Turbo, not gpt-4's 8,192 window and 60 USD
        ("gpt-4-0125-preview", 128_000, 30.0),
        ("gpt-4-turbo-2024-04-09", 128_000, 30.0),
        ("gpt-4-0613", 8_192, 60.0),
        ("gpt-4-32k-0613", 32_768, 120.0),
        ("o1-preview-2024-09-12", 128_000, 60.0),
        ("gpt-3.5-turbo-0125", 16_385, 1.5),
        ("gemini-2.5-flash-preview-05-20", 1_048_576, 2.5),
        ("gemini-2.0-flash-001", 1_048_576, 0.4),
        ("claude-sonnet-4-5-20250929", 200_000, 15.0),
        ("claude-sonnet-4-5@20250929", 200_000, 15.0),  # Vertex AI's id
        ("claude-3-5-sonnet-v2@20241022", 200_000, 15.0),
        ("claude-opus-5-5", 1_000_000, 20.0),
        ("google/gemini-3-pro-preview", 1_048_576, 12.0),  # a router's name: Gemini 3 Pro's window, not 128k
        ("openai/gpt-4o-mini", 128_000, 0.6),
    ],
)
def test_dated_and_versioned_ids_resolve_to_their_own_model(model: str, window: int, output: float) -> None:
    tables = ModelTables()
    price = tables.price(model)
    assert price is not None and price.output == pytest.approx(output)
    assert tables.window(model) == window


@pytest.mark.parametrize(
    "model", ["gpt-4o-mini-tts", "gpt-5-codex", "gpt-4.5-preview", "claude-opus-4-9", "claude-mythos-5-1", "o5-mini"]
)
def test_a_model_the_tables_do_not_know_is_unpriced_and_has_no_window(model: str) -> None:
    """A prefix of its name is another model's: its price could be ten times wrong, its window too small."""
    tables = ModelTables()
    assert tables.price(model) is None
    assert tables.window(model) == 0
    assert tables.bill(model, Usage(1_000_000, 1_000)) is None
    assert tables.cost(model, Usage(1_000_000, 1_000)) == 0.0  # adds nothing to a budget: not guessed


def test_a_user_default_prices_the_models_no_table_knows(tmp_path: Path) -> None:
    pricing = tmp_path / "pricing.yaml"
    pricing.write_text("default: {input: 1, output: 2}\n")
    tables = ModelTables(str(pricing))
    assert tables.bill("my-local-model", Usage(1_000_000, 1_000_000)) == pytest.approx(3.0)
    assert tables.price("gpt-4o") is not None and tables.price("gpt-4o").output == pytest.approx(10.0)
