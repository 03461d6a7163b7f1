"""The GenAI client metrics: `gen_ai.client.token.usage` and `gen_ai.client.operation.duration`.

Histograms with the semantic conventions' names, units, attributes and bucket
advice, recorded once per model request when it ends; the SDK aggregates
them in memory and its reader exports them every `metric_interval_seconds`.
"""

from __future__ import annotations

from opentelemetry.metrics import Meter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.util.types import Attributes

# The conventions' explicit bucket advice for each histogram.
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)


class GenAiMeters:
    def __init__(self, meter: Meter) -> None:
        self._tokens = meter.create_histogram(
            gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )

    def record(
        self, attributes: dict[str, str], input_tokens: int, output_tokens: int, seconds: float, error: str | None
    ) -> None:
        """One request: its tokens (only when the response reported usage) and its duration."""
        if input_tokens or output_tokens:
            self._tokens.record(input_tokens, {**attributes, gen_ai.GEN_AI_TOKEN_TYPE: "input"})
            self._tokens.record(output_tokens, {**attributes, gen_ai.GEN_AI_TOKEN_TYPE: "output"})
        timed: Attributes = {**attributes, "error.type": error} if error else attributes
        self._duration.record(seconds, timed)
