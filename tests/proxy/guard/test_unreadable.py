"""`unreadable`: what is known of a request whose body cannot be read, and what may judge it."""

from __future__ import annotations

from runguard.config.settings import GuardSettings
from runguard.detectors.registry import default_detectors
from runguard.proxy.core.events import Api
from runguard.proxy.guard import unreadable
from runguard.proxy.guard.lineup.policy import Policy


def test_the_model_comes_from_the_path_else_from_a_plainly_spelled_field() -> None:
    body = b'{"messages":[{"role":"user","content":"\\ud83d"}],"model":"gpt-4o-mini","stream":true}'
    info = unreadable.request_info(Api.CHAT, "invalid JSON", body, model=None, stream=False)
    assert (info.model, info.parse_error, info.api, info.stream) == ("gpt-4o-mini", "invalid JSON", Api.CHAT, False)
    pathed = unreadable.request_info(Api.GEMINI, "x", body, model="gemini-2.5-flash", stream=True)
    assert (pathed.model, pathed.stream) == ("gemini-2.5-flash", True)
    quoted = b'{"messages":[{"content":"say \\"model\\": \\"evil\\""}]'
    assert unreadable.request_info(Api.CHAT, "x", quoted, model=None, stream=False).model == ""


def test_only_the_detectors_that_count_judge_an_unreadable_request() -> None:
    detectors = default_detectors()
    assert {d.name for d in detectors} >= unreadable.COUNTING  # every name is a real detector
    lineup = Policy(detectors, GuardSettings()).lineup("k", "gpt-4o-mini")
    kept = {armed.name for armed in unreadable.counting(lineup).armed}
    assert kept == unreadable.COUNTING & {armed.name for armed in lineup.armed}
    assert "max_requests" in kept and "budget" in kept and "spiral" not in kept


def test_the_record_names_the_parse_error_first() -> None:
    assert unreadable.record_error("invalid JSON: depth limit exceeded", None) == (
        "unreadable request: invalid JSON: depth limit exceeded"
    )
    assert unreadable.record_error("bad", "upstream said no") == "unreadable request: bad; upstream said no"
