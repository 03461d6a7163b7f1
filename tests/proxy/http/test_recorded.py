"""What a request leaves in the records: its query without credentials, the upstream's words masked."""

from __future__ import annotations

from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from runguard.proxy.core.events import ResponseInfo
from runguard.proxy.http.recorded import credentials_of, masked, recorded


def test_a_recorded_body_keeps_no_query_credential_and_masks_the_echoed_ones() -> None:
    """`store.record_bodies` keeps the query, less every parameter that may hold a credential (Google's
    `access_token` and `oauth_token` as well as `key`), and the upstream's answer with the request's own
    credentials masked."""
    target = "/v1beta/models/gemini-2.5-flash:generateContent?alt=sse&access_token=ya29-opaque-token&key=AIzaKey1"
    request = make_mocked_request("POST", target, headers=CIMultiDict({"x-goog-api-key": "opaque-header-key"}))
    answer = b'{"error": "tokens ya29-opaque-token and opaque-header-key are not valid"}'
    kept = recorded(request, b"{}", answer, 400)
    assert kept.query == "alt=sse"
    assert b"ya29-opaque-token" not in kept.response and b"opaque-header-key" not in kept.response


def test_credentials_are_read_from_the_headers_and_from_a_query_that_may_name_one() -> None:
    plain = make_mocked_request(
        "POST", "/v1/chat/completions?alt=sse", headers=CIMultiDict({"Authorization": "Bearer sk-a"})
    )
    assert "sk-a" in credentials_of(plain)
    keyed = make_mocked_request("POST", "/v1beta/models/m:generateContent?key=AIzaQueryKey", headers=CIMultiDict())
    assert "AIzaQueryKey" in credentials_of(keyed)


def test_an_upstream_error_is_masked_and_a_response_without_one_is_unchanged() -> None:
    request = make_mocked_request("POST", "/v1/responses", headers=CIMultiDict({"Authorization": "Bearer sk-echoed-1"}))
    clean = ResponseInfo(text="fine")
    assert masked(clean, request) is clean
    said = masked(ResponseInfo(error="invalid key sk-echoed-1"), request).error
    assert said is not None and "sk-echoed-1" not in said
