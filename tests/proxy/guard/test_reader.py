"""A response as the guard reads it: its usage reported or estimated (never zero), its cost, its error masked."""

from __future__ import annotations

import dataclasses

import pytest

from runguard.detectors.support.base import RequestSeen
from runguard.proxy.core.events import AgentIdentity, Api, RequestInfo, ResponseInfo, Usage
from runguard.proxy.guard.costs.pricing import ModelTables
from runguard.proxy.guard.costs.tokens import TokenEstimator
from runguard.proxy.guard.reader import ResponseReader
from runguard.proxy.guard.ticket import Ticket, scope_ids
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from tests.support.guards import guard_settings

NOW = 1_000_000.0


@pytest.fixture
def reader() -> ResponseReader:
    settings = guard_settings()
    return ResponseReader(ModelTables(settings.pricing_file, settings.models_file), TokenEstimator(), lambda: NOW + 2)


def ticket(**fields: object) -> Ticket:
    request = RequestInfo(Api.CHAT, "gpt-4o-mini", True, AgentIdentity(None, "f"), estimated_input_tokens=400)
    request = dataclasses.replace(request, **fields)  # type: ignore[arg-type]
    seen = RequestSeen("run-1", "k_a", NOW, request, 128_000)
    return Ticket("run-1", "k_a", scope_ids("k_a/run-1", "k_a", "gpt-4o-mini", NOW), seen, ChatAdapter())


def test_reported_usage_is_kept_and_priced(reader: ResponseReader) -> None:
    seen = reader.seen(ticket(), ResponseInfo(text="hi", usage=Usage(1000, 200)), 200, 0.5)
    assert seen.response.usage == Usage(1000, 200) and seen.now == NOW + 2 and seen.latency == 0.5
    assert seen.usd == pytest.approx(1000 * 0.15e-6 + 200 * 0.6e-6)  # gpt-4o-mini's prices


def test_a_successful_answer_without_usage_is_estimated_never_zero(reader: ResponseReader) -> None:
    seen = reader.seen(ticket(), ResponseInfo(text="The invoice total is 42 euros."), 200, 0.1)
    usage = seen.response.usage
    assert usage is not None and usage.estimated
    assert usage.input_tokens == 400 and usage.output_tokens > 0 and seen.usd > 0


@pytest.mark.parametrize("status", [None, 429, 500])
def test_a_failed_or_missing_answer_has_no_usage(reader: ResponseReader, status: int | None) -> None:
    seen = reader.seen(ticket(), ResponseInfo(text="partial"), status, 0.1)
    assert seen.response.usage is None and seen.usd == 0


def test_a_background_response_s_usage_waits_for_its_poll(reader: ResponseReader) -> None:
    seen = reader.seen(ticket(background=True), ResponseInfo(), 200, 0.1)
    assert seen.response.usage is None


def test_an_upstream_error_echoing_the_request_s_key_is_masked(reader: ResponseReader) -> None:
    t = ticket()
    t.credentials = lambda: ("sk-live-secret-123",)
    seen = reader.seen(t, ResponseInfo(error="Incorrect API key provided: sk-live-secret-123"), 401, 0.1)
    assert seen.response.error is not None and "sk-live-secret-123" not in seen.response.error


def test_a_model_no_table_knows_is_unpriced_and_adds_nothing(reader: ResponseReader) -> None:
    unknown = ticket(model="acme-coder-9")
    seen = reader.seen(unknown, ResponseInfo(text="hi", usage=Usage(1000, 200)), 200, 0.5)
    assert seen.usd == 0.0 and reader.cost(unknown, Usage(1000, 200)) is None
    assert reader.cost(unknown, None) == 0.0 and reader.cost(unknown, Usage(0, 0)) == 0.0  # nothing used, nothing owed
    assert reader.cost(ticket(), Usage(1000, 200)) == pytest.approx(1000 * 0.15e-6 + 200 * 0.6e-6)
    assert reader.unpriced(unknown, seen) and not reader.unpriced(
        ticket(), reader.seen(ticket(), seen.response, 200, 0.5)
    )
