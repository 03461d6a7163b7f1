from __future__ import annotations

import pytest
from multidict import CIMultiDict, MultiDict

from runguard.proxy.core.events import Provider
from runguard.proxy.providers import credentials
from runguard.proxy.providers.credentials import Credential, claims, drop_unread, read, target_without_unread

OPENAI, GEMINI = Provider.OPENAI, Provider.GEMINI


def _read(provider: Provider, headers: dict[str, str] | list[tuple[str, str]], query: str = "") -> Credential:
    pairs = [tuple(p.split("=", 1)) for p in query.split("&") if p]
    return read(provider, CIMultiDict(headers), MultiDict(pairs))


def test_each_provider_is_keyed_where_it_reads_its_key() -> None:
    assert _read(OPENAI, {"Authorization": "Bearer sk-a"}).key == "sk-a"
    assert _read(OPENAI, {"api-key": "azure"}).key == "azure"  # Azure OpenAI's header
    assert _read(GEMINI, {"x-goog-api-key": "g"}).key == "g"
    assert _read(GEMINI, {}, "key=q").key == "q"
    assert _read(GEMINI, {}, "$key=q").key == "q"
    assert _read(GEMINI, {}, "access_token=t").key == "t"
    assert _read(GEMINI, {"Authorization": "Bearer ya29.oauth"}).key == "ya29.oauth"
    assert _read(OPENAI, {}).key is None


def test_a_credential_where_the_provider_does_not_read_it_is_not_the_key() -> None:
    assert _read(OPENAI, {"x-goog-api-key": "g", "x-api-key": "x"}, "key=q").key is None
    assert _read(GEMINI, {"api-key": "azure", "x-api-key": "x"}).key is None


def test_two_different_credentials_conflict_and_the_same_one_twice_does_not() -> None:
    assert _read(GEMINI, {"Authorization": "Bearer a", "x-goog-api-key": "b"}).conflict == (
        "Authorization",
        "x-goog-api-key",
    )
    assert _read(GEMINI, {"x-goog-api-key": "a"}, "key=b").conflict == ("x-goog-api-key", "?key=")
    assert _read(OPENAI, {"Authorization": "Bearer a", "api-key": "b"}).conflict
    assert _read(OPENAI, [("Authorization", "Bearer a"), ("Authorization", "Bearer b")]).conflict
    assert _read(GEMINI, {}, "key=a&key=b").conflict
    same = _read(GEMINI, {"Authorization": "Bearer a", "x-goog-api-key": " a "}, "key=a")
    assert same == Credential("a")


def test_another_authorization_scheme_is_a_credential_judged_whole() -> None:
    assert _read(OPENAI, {"Authorization": "Basic eHl6"}).key == "Basic eHl6"
    assert _read(OPENAI, {"Authorization": "Basic eHl6", "api-key": "k"}).conflict
    assert _read(OPENAI, {"Authorization": "Bearer "}).key is None


def test_a_browser_realtime_key_in_the_subprotocols_is_read() -> None:
    offered = ("realtime", "openai-insecure-api-key.sk-b")
    assert read(OPENAI, CIMultiDict(), MultiDict(), offered).key == "sk-b"
    assert read(OPENAI, CIMultiDict({"Authorization": "Bearer sk-a"}), MultiDict(), offered).conflict


def test_unread_credential_headers_are_dropped() -> None:
    headers = CIMultiDict({"Authorization": "Bearer a", "api-key": "a", "x-goog-api-key": "g", "x-api-key": "x"})
    drop_unread(OPENAI, headers)
    assert sorted(headers) == ["Authorization", "api-key"]
    headers = CIMultiDict({"Authorization": "Bearer a", "api-key": "z", "x-goog-api-key": "a"})
    drop_unread(GEMINI, headers)
    assert sorted(headers) == ["Authorization", "x-goog-api-key"]


def test_unread_query_credentials_are_dropped_the_rest_kept_byte_for_byte() -> None:
    assert target_without_unread(OPENAI, "/v1/x?a=%2F&key=q&b=2") == "/v1/x?a=%2F&b=2"
    assert target_without_unread(OPENAI, "/v1/x?%6Bey=q") == "/v1/x"
    assert target_without_unread(OPENAI, "/v1/x?access_token=t&monkey=1") == "/v1/x?monkey=1"
    assert target_without_unread(GEMINI, "/v1beta/m:g?key=q&alt=sse") == "/v1beta/m:g?key=q&alt=sse"
    assert target_without_unread(OPENAI, "/v1/x?api-version=1") == "/v1/x?api-version=1"


def test_a_gemini_key_s_place_claims_shared_paths_and_an_openai_request_parses_no_query() -> None:
    assert claims(CIMultiDict({"x-goog-api-key": "g"}), "", MultiDict()) == {"gemini_key"}
    assert claims(CIMultiDict(), "key=g", MultiDict({"key": "g"})) == {"gemini_key"}
    assert claims(CIMultiDict({"Authorization": "Bearer o", "api-key": "a"}), "", MultiDict()) == set()
    # Only `?key=` claims, as before specs: Google's other query credentials are read, not claiming.
    assert claims(CIMultiDict(), "access_token=t", MultiDict({"access_token": "t"})) == set()


class _NoQuery(dict[str, str]):
    def __contains__(self, name: object) -> bool:
        raise AssertionError("the query was parsed")


def test_a_query_that_names_no_claiming_place_is_not_parsed() -> None:
    assert claims(CIMultiDict({"Authorization": "Bearer o"}), "limit=5", _NoQuery()) == set()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw_query", "named"),
    [
        ("alt=json;key=K", ("?key=",)),
        ("alt=json;%24key=K&x=y", ("?$key=",)),
        ("a=1;b=2;access_token=T;oauth_token=O", ("?access_token=", "?oauth_token=")),
        ("key=K;alt=json", ("?key=",)),  # judged as `K;alt=json`, read as `K` by a server splitting on `;`
        ("alt=json;charset=utf-8", ()),
        ("alt=json&key=K", ()),
    ],
)
def test_credentials_after_a_semicolon_are_named(raw_query: str, named: tuple[str, ...]) -> None:
    assert credentials.after_semicolons(raw_query) == named
