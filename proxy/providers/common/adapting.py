"""What every adapter does alike, said once: `Adapting`, the tail of `base.Adapter` around an API's readers and
writers (a whole response read from its JSON object, a stop answer only when a stop text can be built, the
error and the stream's error event written by the API's replies)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from runguard.proxy.core.events import RequestInfo, ResponseInfo
from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.providers.common.jsonish import load_object
from runguard.proxy.providers.common.stop import stop_text


class Adapting:
    """The shared half of an adapter. A subclass names its API's functions as class attributes:
    `read_object` (a whole response's JSON object -> its record), `errors` ((notice, status) -> the error
    its SDK raises), `stream_error` ((message, code) -> the event that ends a stream early); and writes
    `stream_parser` and `stop_answer` (the stop completion for a stop text that could be built)."""

    read_object: ClassVar[Callable[[dict[str, Any]], ResponseInfo]]
    errors: ClassVar[Callable[[StopNotice, int], Synthetic]]
    stream_error: ClassVar[Callable[[str, str], bytes]]

    def parse_response(self, body: bytes) -> ResponseInfo:
        data, problem = load_object(body)
        if data is None:
            return ResponseInfo(parse_error=problem)
        return type(self).read_object(data)

    def error_response(self, notice: StopNotice, *, stream: bool, status: int = 429) -> Synthetic:
        return type(self).errors(notice, status)

    def stop_response(self, notice: StopNotice, request: RequestInfo) -> Synthetic | None:
        text = stop_text(notice, request)
        return self.stop_answer(notice, request, text) if text is not None else None

    def stop_answer(self, notice: StopNotice, request: RequestInfo, text: str) -> Synthetic:
        """The stop completion carrying `text` (the notice's summary, or JSON valid for the demanded schema)."""
        raise NotImplementedError

    def stream_error_event(self, message: str, code: str) -> bytes:
        return type(self).stream_error(message, code)
