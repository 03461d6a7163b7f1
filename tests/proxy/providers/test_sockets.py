"""`sockets`: the socket protocols are reached through the registry and the specs, never by a provider's name."""

from __future__ import annotations

from runguard.proxy.core.events import Api, Provider
from runguard.proxy.providers import openai_realtime, registry
from runguard.proxy.providers.openai_responses import socket
from runguard.proxy.providers.openai_responses.spec import SPEC as RESPONSES


def test_a_realtime_path_of_openai_s_upstream_opens_its_sessions_and_no_other_does() -> None:
    table = registry.REGISTRY
    for path in ("/v1/realtime", "/openai/realtime/", "/v1/realtime"):
        assert table.sessions_at(Provider.OPENAI, path) is openai_realtime.SESSIONS
    assert table.sessions_at(Provider.GEMINI, "/v1/realtime") is None
    assert table.sessions_at(Provider.OPENAI, "/v1/responses") is None
    sessions = openai_realtime.SESSIONS
    assert (sessions.api(), sessions.model({"deployment": "voice"}), sessions.model({})) == (
        Api.REALTIME,
        "voice",
        "realtime",
    )


def test_a_session_s_tokens_count_in_openai_s_encoding_and_an_unknown_api_s_by_characters() -> None:
    table = registry.REGISTRY
    assert table.encoding(Api.REALTIME, "gpt-realtime") == "o200k_base"
    assert table.encoding(Api.RESPONSES, "gpt-4-turbo") == "cl100k_base"
    assert table.encoding(Api.GEMINI, "gemini-2.5-flash") is None
    assert table.encoding(Api.OTHER, "gpt-4o") is None


def test_only_the_responses_api_has_a_websocket_mode() -> None:
    assert RESPONSES.socket is socket
    assert [spec.name for spec in registry.APIS if spec.socket is not None] == [Api.RESPONSES]
    created = RESPONSES.socket.create('{"type": "response.create", "stream_id": "a", "model": "m"}')
    assert created is not None and created.lane == "a" and created.ending is None
