"""Synthetic Gemini responses: camelCase, status exactly 200 for success (wire-formats.md D).

google-genai raises `ClientError` on any status other than 200 and does not
retry by default; a 429 RESOURCE_EXHAUSTED is what a real quota error looks
like, and 400 FAILED_PRECONDITION (configurable) also stops clients that
turned retries on. Mid-stream errors need `error` as the first key.
"""

from __future__ import annotations

import orjson

from runguard.proxy.providers.answers import StopNotice, Synthetic

JSON = {"Content-Type": "application/json; charset=UTF-8"}
SSE = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
_STATUS = {400: "FAILED_PRECONDITION", 403: "PERMISSION_DENIED", 429: "RESOURCE_EXHAUSTED"}


def error_response(notice: StopNotice, status: int = 429) -> Synthetic:
    info = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": f"RUNGUARD_{notice.detector.upper()}",
        "domain": "runguard",
        "metadata": {"detector": notice.detector, "run_id": notice.run_id},
    }
    body = {
        "error": {
            "code": status,
            "message": notice.message,
            "status": _STATUS.get(status, "RESOURCE_EXHAUSTED"),
            "details": [info],
        }
    }
    return Synthetic(status, JSON, orjson.dumps(body))


def stop_response(model: str, text: str, *, stream: bool, json_array: bool = False) -> Synthetic:
    """One response with the text; streamed as one SSE event, or as a one-item JSON array (no alt=sse)."""
    body = orjson.dumps(
        {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {"promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0},
            "modelVersion": model,
        }
    )
    if stream and json_array:
        return Synthetic(200, JSON, b"[" + body + b"]")
    if stream:
        return Synthetic(200, SSE, b"data: " + body + b"\r\n\r\n")
    return Synthetic(200, JSON, body)


def stream_error_element(message: str, code: str, status: int = 502) -> bytes:
    """The error object that ends a stream mid-way (`error` its first key, as google-genai looks for it)."""
    return orjson.dumps({"error": {"code": status, "message": f"{message} ({code})", "status": "UNAVAILABLE"}})


def stream_error_event(message: str, code: str, status: int = 502) -> bytes:
    """The error object as an SSE event (`alt=sse`); a JSON-array stream takes `stream_error_element`."""
    return b"data: " + stream_error_element(message, code, status) + b"\r\n\r\n"
