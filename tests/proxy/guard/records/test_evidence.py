"""Record mode (`store.record_bodies`): a trip's evidence gets the text of the calls this request and its
response carry, abridged, matched by tool and arguments digest; other entries stay digests only."""

from __future__ import annotations

from runguard.detectors.support.base import Evidence, shown_call, shown_results
from runguard.detectors.support.normalize import call_args_digest
from runguard.proxy.core.events import AgentIdentity, Api, RequestInfo, ResponseInfo, ToolCall, ToolResult
from runguard.proxy.guard.records.evidence import ABRIDGED, with_content
from tests.detectors.harness import call, request, response, result

SEARCH = call("search", {"q": "invoice 7"}, "c1")


FOUND = result("search", {"rows": ["x" * 2000]}, "c1")


def test_calls_carried_back_get_their_arguments_and_results_abridged() -> None:
    seen = request(prior_calls=[SEARCH], new_results=[FOUND])
    evidence = {"summary": "same call", **Evidence(calls=shown_results(seen, 4)).as_json()}
    shown = with_content(evidence, seen, None)
    (entry,) = shown["calls"]
    assert entry["args"] == SEARCH.arguments
    assert entry["result"] == FOUND.content[:ABRIDGED] and len(entry["result"]) == ABRIDGED
    assert entry["args_digest"] == shown_call(SEARCH).args_digest  # the digests stay
    assert shown["summary"] == "same call"
    assert "args" not in evidence["calls"][0]  # the detector's evidence is not changed


def test_the_response_s_calls_get_their_arguments_only() -> None:
    fetch = call("fetch", {"url": "https://example.com/" + "p" * 900}, "c2")
    evidence = Evidence(batch=(shown_call(fetch),)).as_json()
    (entry,) = with_content(evidence, request(), response(tool_calls=[fetch]))["batch"]
    assert entry["args"] == fetch.arguments[:ABRIDGED]
    assert "result" not in entry


def test_earlier_calls_stay_digests_only() -> None:
    earlier = call("search", {"q": "invoice 6"}, "c0")
    evidence = Evidence(calls=(shown_call(earlier), shown_call(SEARCH, FOUND))).as_json()
    old, new = with_content(evidence, request(prior_calls=[SEARCH], new_results=[FOUND]), None)["calls"]
    assert "args" not in old and "result" not in old
    assert new["args"] == SEARCH.arguments


def test_evidence_without_calls_is_returned_as_it_was() -> None:
    evidence = {"summary": "spend", "value": 12.5, "limit": 10}
    shown = with_content(evidence, request(prior_calls=[SEARCH], new_results=[FOUND]), None)
    assert shown == evidence and shown is not evidence


def test_entries_that_are_not_calls_are_kept() -> None:
    evidence = {"calls": ["odd", {"tool": "search", "args_digest": shown_call(SEARCH).args_digest}]}
    odd, entry = with_content(evidence, request(prior_calls=[SEARCH], new_results=[FOUND]), None)["calls"]
    assert odd == "odd" and "args" in entry


SEARCH_CALL = ToolCall("search", '{"q": "overdue invoices"}', "c1")


FETCH = ToolCall("fetch", '{"url": "https://example.com/' + "x" * 900 + '"}', "c2")


def searching() -> RequestInfo:
    return RequestInfo(
        Api.CHAT,
        "gpt-4o-mini",
        False,
        AgentIdentity(None, "f"),
        prior_calls=(SEARCH_CALL,),
        new_results=(ToolResult("search", "c1", "no invoices found"),),
    )


def entry(call: ToolCall) -> dict[str, str]:
    return {"tool": call.name, "args_digest": call_args_digest(call)}


def test_calls_this_request_and_its_response_carry_get_their_text_abridged_others_stay_digests() -> None:
    earlier = {"tool": "search", "args_digest": "0000"}
    evidence = {"calls": [entry(SEARCH_CALL), earlier, "odd"], "batch": [entry(FETCH)], "count": 3}
    shown = with_content(evidence, searching(), ResponseInfo(tool_calls=(FETCH,)))
    searched, unknown, odd = shown["calls"]
    assert searched["args"] == SEARCH_CALL.arguments and searched["result"] == "no invoices found"
    assert unknown == earlier and odd == "odd" and shown["count"] == 3
    (fetched,) = shown["batch"]
    assert len(fetched["args"]) == ABRIDGED and "result" not in fetched  # not answered yet
    assert evidence["calls"][0] == entry(SEARCH_CALL)  # the detector's evidence is left as it was


def test_evidence_without_calls_is_returned_as_is() -> None:
    assert with_content({"usd": 1.5}, searching(), None) == {"usd": 1.5}
