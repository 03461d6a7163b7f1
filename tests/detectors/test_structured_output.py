"""`structured_output`: answers that keep failing the demanded JSON schema, judged by the real validator
(`runguard.proxy.core.schema`, jsonschema)."""

from __future__ import annotations

import json
from typing import Any

from runguard.detectors.structured_output import StructuredOutput
from tests.detectors.harness import RunSimulator, Step, call, first_trip, request, response, shows

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
GOOD = json.dumps({"answer": "42"})
BAD = "The answer is 42."


def answer(text: str, schema: dict[str, Any] | None = SCHEMA) -> Step:
    return Step(request(output_schema=schema), response(text=text))


async def test_four_failed_answers_out_of_four_stop_the_run() -> None:
    sim = RunSimulator([StructuredOutput()])
    results = await sim.run([answer(BAD) for _ in range(5)])
    assert first_trip(results) == 4
    assert "4 of the last 4 answers" in results[3].one("structured_output").reason
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


async def test_an_answer_of_the_wrong_type_fails_like_prose() -> None:
    sim = RunSimulator([StructuredOutput()])
    wrong = json.dumps({"answer": 42})  # parses, has the key, but the schema wants a string
    assert first_trip(await sim.run([answer(wrong) for _ in range(4)])) == 4


async def test_a_schema_the_validator_cannot_use_judges_nothing() -> None:
    # The request's own schema is broken (an unknown type): neither the model's failure nor a pass.
    sim = RunSimulator([StructuredOutput()])
    broken = {"type": "objekt"}
    assert first_trip(await sim.run([answer(GOOD, schema=broken) for _ in range(6)])) is None
    assert first_trip(await sim.run([answer(BAD) for _ in range(4)])) == 4  # judged answers still count
