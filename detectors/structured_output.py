"""`structured_output`: a model that keeps failing the JSON schema the request demands.

Frameworks re-ask when the output does not validate (per step, times the
steps), so a schema the model cannot satisfy turns into a regeneration loop.
Only final answers are judged: responses with text and no tool calls, to
requests that carry an output schema.
"""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support.base import (
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    Point,
    ResponseSeen,
    Results,
    Verdict,
)
from runguard.proxy.core.events import OutputSchema
from runguard.proxy.core.ops import Push, Scope

WINDOW = 10  # latest judged responses the failure rate is taken over


class StructuredOutputConfig(DetectorConfig):
    min_responses: int = Field(
        4,
        ge=1,
        le=WINDOW,
        description="Judged responses (text answers to requests demanding a JSON schema) needed before "
        "the failure rate counts.",
        json_schema_extra={"tighten": "lower"},
    )
    max_failure_rate: float = Field(
        0.8,
        gt=0,
        le=1,
        description=f"Share of the last {WINDOW} judged responses failing to validate against the schema "
        "at which the run is stopped (checked when a response fails).",
        json_schema_extra={"tighten": "lower"},
    )


def _valid(output: OutputSchema, text: str) -> bool | None:
    """Whether the answer validates; None for a schema that cannot be used (not judged). A failure of
    the validator itself raises: the engine logs it and counts it as this detector's fault."""
    from runguard.proxy.core import schema

    return schema.validate(schema.to_json_schema(output), text)


class StructuredOutput(Detector[StructuredOutputConfig]):
    """After each final answer to a schema-demanding request: record pass or fail, judge the rate."""

    name = "structured_output"
    per_thread = True
    Config = StructuredOutputConfig

    def plan_response(self, seen: ResponseSeen, cfg: StructuredOutputConfig) -> Plan:
        output, response = seen.request.output_schema, seen.response
        if output is None or response.tool_calls or not response.text.strip():
            return {}
        if seen.upstream_failed or not response.complete:
            return {}  # a cut-off answer says nothing about the model and the schema
        valid = _valid(output, response.text)
        if valid is None:
            return {}
        return {"outcomes": Push(Scope.RUN, "outcomes", ("1" if valid else "0",), keep=WINDOW)}

    def check_response(self, seen: ResponseSeen, got: Results, cfg: StructuredOutputConfig) -> Verdict | None:
        outcomes = got.get("outcomes")
        if not isinstance(outcomes, tuple) or outcomes[-1] != "0" or len(outcomes) < cfg.min_responses:
            return None
        failed = outcomes.count("0")
        rate = failed / len(outcomes)
        if rate < cfg.max_failure_rate:
            return None
        return self.verdict(
            f"{failed} of the last {len(outcomes)} answers ({rate:.0%}) failed to validate against the "
            f"requested JSON schema (limit {cfg.max_failure_rate:.0%})",
            # The judged answers, oldest first: y 1 for one that validated, 0 for one that failed.
            shows=Evidence(
                series=tuple(Point(k, float(o)) for k, o in enumerate(outcomes, start=1) if o in ("0", "1")),
                value=round(rate, 3),
                limit=cfg.max_failure_rate,
            ),
            failed=failed,
            judged=len(outcomes),
            rate=round(rate, 3),
            schema=seen.request.output_schema.name if seen.request.output_schema else None,
        )
