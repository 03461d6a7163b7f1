"""A request's ticket: the scopes its state lives in, the warnings it shows, the reset command it names."""

from __future__ import annotations

import calendar

from runguard.detectors.support.base import RequestSeen, ResponseKind, Verdict
from runguard.proxy.core.events import AgentIdentity, Api, Provider, RequestInfo
from runguard.proxy.core.ops import Scope
from runguard.proxy.guard.lineup.engine import Finding
from runguard.proxy.guard.ticket import CARRIED_CHARS, Ticket, scope_ids
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter

NOON = calendar.timegm((2026, 3, 14, 12, 0, 0))


def ticket(run_id: str = "run-1", thread: str = "", proxy_url: str | None = None) -> Ticket:
    request = RequestInfo(Api.CHAT, "gpt-4o-mini", False, AgentIdentity(None, "f"))
    ids = scope_ids("k_a/" + run_id, "k_a", "gpt-4o-mini", NOON, thread)
    seen = RequestSeen(run_id, "k_a", NOON, request, 128_000)
    return Ticket(run_id, "k_a", ids, seen, ChatAdapter(), tenant="k_a", proxy_url=proxy_url)


def warn(detector: str, reason: str, nudge: bool = False) -> Finding:
    return Finding(Verdict(detector, reason), blocking=False, response=ResponseKind.ERROR, nudge=nudge)


def test_scope_ids_name_the_run_the_key_its_model_its_day_and_the_thread() -> None:
    ids = scope_ids("k_a/run-1", "k_a", "gpt-4o-mini", NOON)
    assert (ids.run, ids.key, ids.key_model, ids.key_day) == ("k_a/run-1", "k_a", "k_a|gpt-4o-mini", "k_a|2026-03-14")
    assert ids.thread == ids.run  # no thread: the run's own
    assert scope_ids("k_a/run-1", "k_a", "m", NOON, "k_a/run-1/root/f").thread == "k_a/run-1/root/f"


def test_a_ticket_is_nested_only_in_a_thread_of_its_run() -> None:
    assert not ticket().nested
    assert ticket(thread="k_a/run-1/root/f").nested


def test_the_provider_is_the_upstream_when_it_is_not_the_dialect_s() -> None:
    plain = ticket()
    assert plain.provider is Provider.OPENAI
    plain.upstream = Provider.GEMINI  # Gemini's OpenAI-compatible Chat
    assert plain.provider is Provider.GEMINI and plain.adapter.provider is Provider.OPENAI


def test_the_warning_header_names_every_warning_the_carried_ones_and_the_notes_in_safe_ascii() -> None:
    t = ticket()
    assert t.warning_header() is None
    t.warnings.append(warn("context_pressure", "context at 72% of the window"))
    t.inspected = [warn("repeat_output", "the same answer twice", nudge=True)]
    t.carried = "loop_detector (previous response): same call 3 times"
    t.notes = ("X-RunGuard-Max-Requests: 500 ignored (the policy allows 100)",)
    header = t.warning_header()
    assert header is not None
    assert header.split("; ") == [
        "context_pressure: context at 72% of the window",
        "repeat_output (nudge): the same answer twice",
        "loop_detector (previous response): same call 3 times",
        "X-RunGuard-Max-Requests: 500 ignored (the policy allows 100)",
    ]


def test_the_warning_header_cannot_carry_a_line_break_or_non_ascii_and_is_bounded() -> None:
    t = ticket()
    t.warnings.append(warn("loop_detector", "caf\u00e9\r\nX-Injected: yes " + "x" * 2000))
    header = t.warning_header()
    assert header is not None and len(header) == 1000
    assert "\r" not in header and "\n" not in header and header.isascii()


def test_carried_text_marks_each_warning_as_the_previous_response_s_and_is_bounded() -> None:
    text = Ticket.carried_text([warn("loop_detector", "same call"), warn("nudged", "n" * 900, nudge=True)])
    assert text.startswith("loop_detector (previous response): same call; nudged (nudge) (previous response): ")
    assert len(text) == CARRIED_CHARS


def test_the_reset_hint_names_the_command_for_the_scope_that_tripped() -> None:
    t = ticket("-run odd", proxy_url="http://127.0.0.1:9000")
    run = t.reset_hint(Scope.RUN)
    assert run.startswith("Reset with: runguard-proxy reset --url http://127.0.0.1:9000")
    assert "-- '-run odd'" in run  # a run id that looks like an option is no option
    assert t.reset_hint(Scope.KEY) == "Reset with: runguard-proxy reset --url http://127.0.0.1:9000 --key k_a"
    key_model = t.reset_hint(Scope.KEY_MODEL)
    assert key_model.startswith("It closes after its cooldown, or: ") and "--model gpt-4o-mini" in key_model
