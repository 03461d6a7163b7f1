"""The text of a synthetic stop completion."""

from __future__ import annotations

from runguard.proxy.core import schema
from runguard.proxy.core.events import RequestInfo
from runguard.proxy.providers.answers import StopNotice


def stop_text(notice: StopNotice, request: RequestInfo) -> str | None:
    """The notice's summary, or JSON valid for the schema the request demands (None when none can be built).

    The model reads this text, so it says what stopped and why, never how an
    operator resets (a command the model might try to run). An agent with an
    output type fails on plain text (openai-agents raises ModelBehaviorError),
    so a stop must parse as its output type or not be sent.
    """
    if request.output_schema is None:
        return notice.summary
    return schema.instance_for(request.output_schema, notice.summary)
