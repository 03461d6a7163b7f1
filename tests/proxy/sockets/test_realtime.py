from __future__ import annotations

from runguard.proxy.providers.openai_realtime.events import response_info


def test_a_done_response_s_calls_text_and_usage_are_read() -> None:
    info = response_info(
        {
            "id": "resp_1",
            "status": "completed",
            "output": [
                {"type": "message", "content": [{"type": "output_audio", "transcript": "hello"}, {"text": "hi"}]},
                {"type": "function_call", "name": "lookup", "call_id": "c1", "arguments": '{"id": 4}'},
                "not an item",
            ],
            "usage": {
                "input_tokens": 90,
                "output_tokens": 40,
                "input_token_details": {
                    "audio_tokens": 60,
                    "cached_tokens": 10,
                    "cached_tokens_details": {"text_tokens": 4, "audio_tokens": 6},
                },
                "output_token_details": {"audio_tokens": 30},
            },
        }
    )
    assert (info.response_id, info.text, info.complete, info.error) == ("resp_1", "hi", True, None)
    assert [(c.name, c.arguments, c.call_id) for c in info.tool_calls] == [("lookup", '{"id": 4}', "c1")]
    assert info.usage is not None
    assert (info.usage.input_tokens, info.usage.cached_tokens, info.usage.audio_input_tokens) == (90, 10, 60)
    assert (info.usage.output_tokens, info.usage.audio_output_tokens) == (40, 30)
    assert info.usage.cached_audio_tokens == 6


def test_a_failed_response_is_an_error_and_a_cancelled_one_an_interruption() -> None:
    failed = response_info({"status": "failed", "status_details": {"error": {"message": "server_error"}}})
    assert (failed.error, failed.complete) == ("server_error", False)
    cancelled = response_info({"status": "cancelled", "status_details": {"reason": "turn_detected"}})
    assert (cancelled.error, cancelled.complete, cancelled.finish_reason) == (None, False, "cancelled")
    assert response_info({"status": "failed"}).error == "response failed"
