from __future__ import annotations

from pathlib import Path

import pytest

from runguard.proxy.events import Usage
from runguard.proxy.pricing import ModelTables


def test_longest_prefix_wins_and_cached_tokens_are_cheaper() -> None:
    tables = ModelTables()
    assert tables.price("gpt-4o-mini-2024-07-18").input == pytest.approx(0.15)
    assert tables.price("gpt-4o-2024-08-06").input == pytest.approx(2.50)
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cached_tokens=500_000)
    assert tables.cost("gpt-4o", usage) == pytest.approx(0.5 * 2.5 + 0.5 * 1.25 + 10.0)
    assert tables.window("models/gemini-2.5-flash") == 1_048_576
    assert tables.window("unknown-model") == 128_000


def test_user_tables_extend_the_shipped_ones(tmp_path: Path) -> None:
    pricing = tmp_path / "pricing.yaml"
    pricing.write_text("models:\n  my-model: {input: 1, output: 2}\n")
    tables = ModelTables(str(pricing))
    assert tables.cost("my-model-v2", Usage(1_000_000, 1_000_000)) == pytest.approx(3.0)
    assert tables.price("gpt-4o").output == pytest.approx(10.0)
