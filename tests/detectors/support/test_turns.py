"""Results paired with the calls they answer, and a turn's signature."""

from __future__ import annotations

from runguard.detectors.support.turns import (
    acknowledges,
    is_wait,
    paired_results,
    result_uniq,
    tool_work,
    turn_signature,
)
from runguard.proxy.core.events import HandoffKind, RequestInfo
from tests.detectors.harness import call, handoff, request, response, result


def test_results_pair_with_calls_by_id_else_by_name_in_order() -> None:
    calls = [call("a", {"n": 1}, "x"), call("b", {}, "y")]
    req = request(prior_calls=calls, new_results=[result("b", "rb", "y"), result("a", "ra", "x")])
    assert [(c.call_id if c else None, r.content) for c, r in paired_results(req)] == [("y", "rb"), ("x", "ra")]
    gemini = [call("a", {"n": 1}), call("a", {"n": 2})]
    req = request(prior_calls=gemini, new_results=[result("a", "first"), result("a", "second")])
    assert [c.arguments if c else None for c, _ in paired_results(req)] == ['{"n": 1}', '{"n": 2}']
    req = request(prior_calls=[], new_results=[result(None, "orphan", "z")])
    assert paired_results(req)[0][0] is None


def test_turn_signature_covers_calls_and_results_and_ignores_order() -> None:
    a, b = call("get", {"k": "a"}, "1"), call("get", {"k": "b"}, "2")
    results = [result("get", "A", "1"), result("get", "B", "2")]
    one = turn_signature(request(prior_calls=[a, b], new_results=results))
    other = turn_signature(request(prior_calls=[b, a], new_results=results[::-1]))
    changed = turn_signature(request(prior_calls=[a, b], new_results=[result("get", "A2", "1"), results[1]]))
    assert one is not None and other is not None and changed is not None
    assert one[0] == other[0]
    assert one[0] != changed[0]
    assert turn_signature(request()) is None


def test_turn_signature_is_the_same_on_a_second_call_and_for_an_equal_request() -> None:
    def build() -> RequestInfo:
        calls = [call("web_search", {"query": "vector database benchmarks"}, "c1"), call("read_url", {"u": "x"}, "c2")]
        return request(
            prior_calls=calls, new_results=[result("web_search", "hits", "c1"), result("read_url", "page", "c2")]
        )

    req = build()
    first = turn_signature(req)
    assert first is not None
    assert turn_signature(req) == first
    assert turn_signature(req) is first
    other = build()
    assert other == req and other.derived == {}
    assert turn_signature(other) == first


def test_a_transfer_only_turn_has_no_signature() -> None:
    transfer = call("transfer_to_writer", {}, "t1")
    assert (
        turn_signature(request(prior_calls=[transfer], new_results=[result("transfer_to_writer", "{}", "t1")])) is None
    )


def test_a_result_is_named_by_its_call_id_else_by_where_it_sits() -> None:
    req = request(prior_calls=[call("get", {})], new_results=[result("get", "a")])
    assert result_uniq(req, result("get", "a", "c1"), 0) == result_uniq(req, result("other", "b", "c1"), 5)
    assert result_uniq(req, result("get", "a"), 0) != result_uniq(req, result("get", "a"), 1)


def test_a_wait_is_a_wait_named_call_with_only_numbers() -> None:
    assert is_wait(call("wait", {"seconds": 10}))
    assert is_wait(call("sleep_ms", {"ms": 500.5}))
    assert not is_wait(call("wait", {"until": "done"}))  # waits for something named: not only time
    assert not is_wait(call("await_job", {"seconds": 10}))
    assert not is_wait(call("sleep", "ten seconds"))


def test_an_acknowledgement_is_a_short_success_without_a_word_of_failure() -> None:
    assert acknowledges(result("write", "File written successfully."))
    assert acknowledges(result("send", '{"status": "sent"}'))
    assert not acknowledges(result("write", "Error: file not written"))
    assert not acknowledges(result("write", "queued, will be sent later"))
    assert not acknowledges(result("write", "ok " + "x" * 300))  # longer: it says more than done
    assert not acknowledges(result("search", "3 results about kubernetes"))


def test_tool_work_leaves_out_transfers_and_delegations() -> None:
    search, transfer = call("search", {"q": "x"}, "c1"), call("transfer_to_writer", {}, "c2")
    delegate = call("delegate_task_to_member", {"member": "writer"}, "c3")
    plain = response(tool_calls=[search, transfer, delegate])
    assert tool_work(plain) == [search, delegate]  # a delegation is work unless the response says it is one
    delegated = response(
        tool_calls=[search, transfer, delegate], handoffs=[handoff("writer", HandoffKind.DELEGATE, "c3")]
    )
    assert tool_work(delegated) == [search]
