"""OpenTelemetry export: GenAI spans and metrics over OTLP (docs/opentelemetry.md).

  config.py      what export does, from `telemetry:` and the standard OTEL_* variables
  setup.py       one app's tracer and meter providers, exporters and lifetime (`install`)
  spans.py       the spans of a finished request: chat / generate_content, execute_tool, invoke_agent
  attributes.py  their attributes in the semantic conventions' names; content only on opt-in
  ids.py         which trace they join: the agent's `traceparent`, else the run's derived trace id
  turns.py       the agent turns and tool calls still open, per process and bounded
  meters.py      gen_ai.client.token.usage and gen_ai.client.operation.duration
  export.py      the bounded span queue in front of the batch processor, drops counted

The OpenTelemetry SDK is imported only when export is on.
"""
