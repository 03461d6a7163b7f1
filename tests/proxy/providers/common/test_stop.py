"""The text of a stop completion: the summary, or JSON the request's schema accepts."""

from __future__ import annotations

import orjson

from runguard.proxy.core.events import AgentIdentity, Api, OutputSchema, RequestInfo
from runguard.proxy.providers.base import StopNotice
from runguard.proxy.providers.common.stop import stop_text

NOTICE = StopNotice("loop", "run-7", "tool 'search' repeated 3 times", "Reset with: runguard-proxy reset run-7")


def _request(schema: OutputSchema | None) -> RequestInfo:
    return RequestInfo(Api.CHAT, "m", False, AgentIdentity(None, "f" * 16), output_schema=schema)


def test_without_a_schema_the_text_is_the_summary_without_the_reset_command() -> None:
    assert stop_text(NOTICE, _request(None)) == NOTICE.summary
    assert "reset" not in (stop_text(NOTICE, _request(None)) or "").lower()


def test_with_a_schema_the_text_is_an_instance_carrying_the_summary() -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}, "score": {"type": "integer"}},
        "required": ["answer", "score"],
        "additionalProperties": False,
    }
    text = stop_text(NOTICE, _request(OutputSchema(schema, "out")))
    assert text is not None
    value = orjson.loads(text)
    assert set(value) == {"answer", "score"} and isinstance(value["score"], int)
    assert NOTICE.summary in value["answer"]


def test_any_json_object_wanted_gets_the_summary_as_a_message() -> None:
    text = stop_text(NOTICE, _request(OutputSchema({}, None, "json_object")))
    assert text is not None and orjson.loads(text) == {"message": NOTICE.summary}


def test_a_schema_no_instance_satisfies_gives_none() -> None:
    impossible = {"type": "string", "enum": ["a"], "minLength": 2}
    assert stop_text(NOTICE, _request(OutputSchema(impossible, "out"))) is None
