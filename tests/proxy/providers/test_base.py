"""The adapter interface's values: what a stop notice says to a model and to the people reading an error."""

from __future__ import annotations

from runguard.proxy.providers.base import RequestContext, StopNotice


def test_the_summary_names_run_detector_and_reason_and_no_reset_command() -> None:
    notice = StopNotice("max_requests", "run-1", "request 5 exceeds the limit of 4", "Reset with: cmd 'run-1'")
    assert notice.summary == "RunGuard stopped run run-1: max_requests: request 5 exceeds the limit of 4."
    assert "Reset" not in notice.summary
    assert notice.message == notice.summary + " Reset with: cmd 'run-1'"


def test_client_text_in_the_summary_is_made_printable() -> None:
    notice = StopNotice("loop", "run\x1b[31m", "tool 'a\nb' repeated")
    assert "\x1b" not in notice.summary and "\n" not in notice.summary
    assert notice.message == notice.summary  # no reset hint: nothing after the summary


def test_a_request_context_says_nothing_unless_told() -> None:
    ctx = RequestContext()
    assert (ctx.path_model, ctx.agent_header, ctx.stream_hint, ctx.json_array_stream, ctx.history) == (
        None,
        None,
        False,
        False,
        None,
    )
    assert dict(ctx.extra) == {}
