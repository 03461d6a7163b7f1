"""`Adapting`: the adapters' shared half reads a whole response through its API's reader, answers a stop only
when a stop text can be built, and writes errors through its API's replies."""

from __future__ import annotations

import dataclasses
from typing import Any

from runguard.proxy.core.events import Api, OutputSchema, RequestInfo, ResponseInfo
from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.providers.common.adapting import Adapting
from runguard.proxy.providers.common.conversation import failed_request


def _read(data: dict[str, Any]) -> ResponseInfo:
    return ResponseInfo(text=str(data.get("said")))


def _error(notice: StopNotice, status: int) -> Synthetic:
    return Synthetic(status, {}, notice.detector.encode())


def _stream_error(message: str, code: str) -> bytes:
    return f"{code}: {message}".encode()


class Toy(Adapting):
    read_object = _read
    errors = _error
    stream_error = _stream_error

    def stop_answer(self, notice: StopNotice, request: RequestInfo, text: str) -> Synthetic:
        return Synthetic(200, {}, text.encode())


NOTICE = StopNotice("spiral", "run-1", "the same call again")


def test_a_whole_response_is_read_from_its_object_and_anything_else_is_a_parse_error() -> None:
    assert Toy().parse_response(b'{"said": "hi"}').text == "hi"
    assert Toy().parse_response(b"[1]").parse_error
    assert Toy().parse_response(b"not json").parse_error


def test_errors_and_stream_errors_are_the_api_s() -> None:
    assert Toy().error_response(NOTICE, stream=True, status=418) == Synthetic(418, {}, b"spiral")
    assert Toy().stream_error_event("gone", "upstream_error") == b"upstream_error: gone"


def test_a_stop_is_answered_only_when_a_text_for_it_can_be_built() -> None:
    plain = dataclasses.replace(failed_request(Api.CHAT, None), parse_error=None)
    stop = Toy().stop_response(NOTICE, plain)
    assert stop is not None and stop.status == 200 and b"spiral" in stop.body
    impossible = OutputSchema({"type": "object", "not": {}}, "never")  # no instance satisfies it
    assert Toy().stop_response(NOTICE, dataclasses.replace(plain, output_schema=impossible)) is None
