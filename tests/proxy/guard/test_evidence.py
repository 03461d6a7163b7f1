"""Trip evidence with content (opt-in): the calls the tripping request and its response carry get their text."""

from __future__ import annotations

from runguard.detectors.normalize import call_args_digest
from runguard.proxy.core.events import AgentIdentity, Api, RequestInfo, ResponseInfo, ToolCall, ToolResult
from runguard.proxy.guard.evidence import ABRIDGED, with_content

SEARCH = ToolCall("search", '{"q": "overdue invoices"}', "c1")
FETCH = ToolCall("fetch", '{"url": "https://example.com/' + "x" * 900 + '"}', "c2")


def request() -> RequestInfo:
    return RequestInfo(
        Api.CHAT,
        "gpt-4o-mini",
        False,
        AgentIdentity(None, "f"),
        prior_calls=(SEARCH,),
        new_results=(ToolResult("search", "c1", "no invoices found"),),
    )


def entry(call: ToolCall) -> dict[str, str]:
    return {"tool": call.name, "args_digest": call_args_digest(call)}


def test_calls_this_request_and_its_response_carry_get_their_text_abridged_others_stay_digests() -> None:
    earlier = {"tool": "search", "args_digest": "0000"}
    evidence = {"calls": [entry(SEARCH), earlier, "odd"], "batch": [entry(FETCH)], "count": 3}
    shown = with_content(evidence, request(), ResponseInfo(tool_calls=(FETCH,)))
    searched, unknown, odd = shown["calls"]
    assert searched["args"] == SEARCH.arguments and searched["result"] == "no invoices found"
    assert unknown == earlier and odd == "odd" and shown["count"] == 3
    (fetched,) = shown["batch"]
    assert len(fetched["args"]) == ABRIDGED and "result" not in fetched  # not answered yet
    assert evidence["calls"][0] == entry(SEARCH)  # the detector's evidence is left as it was


def test_evidence_without_calls_is_returned_as_is() -> None:
    assert with_content({"usd": 1.5}, request(), None) == {"usd": 1.5}
