"""`structured_output`: answers that keep failing the demanded JSON schema."""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest

import runguard.proxy
from runguard.detectors.structured_output import StructuredOutput
from runguard.proxy.events import OutputSchema
from tests.detectors.harness import RunSimulator, Step, call, first_trip, request, response, shows

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
GOOD = json.dumps({"answer": "42"})
BAD = "The answer is 42."


@pytest.fixture(autouse=True)
def schema_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny stand-in for `runguard.proxy.schema` (required keys of a JSON object only)."""

    def validate(schema: dict[str, Any], text: str) -> bool:
        try:
            value = json.loads(text)
        except ValueError:
            return False
        return isinstance(value, dict) and all(key in value for key in schema.get("required", []))

    def to_json_schema(output: OutputSchema) -> dict[str, Any]:
        return output.schema

    module = types.ModuleType("runguard.proxy.schema")
    module.validate = validate  # type: ignore[attr-defined]
    module.to_json_schema = to_json_schema  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "runguard.proxy.schema", module)
    monkeypatch.setattr(runguard.proxy, "schema", module, raising=False)


def answer(text: str, schema: dict[str, Any] | None = SCHEMA) -> Step:
    return Step(request(output_schema=schema), response(text=text))


async def test_four_failed_answers_out_of_four_stop_the_run() -> None:
    sim = RunSimulator([StructuredOutput()])
    results = await sim.run([answer(BAD) for _ in range(5)])
    assert first_trip(results) == 4
    assert "4 of the last 4 answers" in results[3].one("structured_output").verdict.reason
    assert [p["y"] for p in shows(results[3].one("structured_output"), "series")["series"]] == [0.0] * 4


async def test_the_rate_counts_over_the_recent_answers() -> None:
    sim = RunSimulator([StructuredOutput()])
    results = await sim.run([answer(GOOD), answer(BAD), answer(BAD), answer(BAD), answer(BAD)])
    # 3/4 = 75% after the 4th, 4/5 = 80% after the 5th.
    assert first_trip(results) == 5


async def test_mostly_valid_answers_pass() -> None:
    sim = RunSimulator([StructuredOutput()])
    script = [GOOD, BAD, GOOD, BAD, GOOD, GOOD, BAD, GOOD, GOOD, GOOD, BAD, GOOD]
    assert first_trip(await sim.run([answer(text) for text in script])) is None


async def test_tool_call_turns_and_requests_without_a_schema_are_not_judged() -> None:
    sim = RunSimulator([StructuredOutput()])
    steps = [Step(request(output_schema=SCHEMA), response(text=BAD, tool_calls=[call("search")])) for _ in range(5)]
    steps += [answer(BAD, schema=None) for _ in range(5)]
    assert first_trip(await sim.run(steps)) is None
