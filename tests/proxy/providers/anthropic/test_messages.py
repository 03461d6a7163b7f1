"""Reading an Anthropic request's conversation: blocks, tool results, media, earlier turns."""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.core.events import RequestInfo
from runguard.proxy.providers.anthropic.adapter import AnthropicAdapter
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.common.history import HistoryCache, HistorySlot
from runguard.proxy.providers.common.media import MEDIA_CHARS

SEARCH: Any = {"name": "search", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}


def parse(body: dict[str, Any], ctx: RequestContext | None = None) -> RequestInfo:
    info = AnthropicAdapter().parse_request(orjson.dumps(body), ctx or RequestContext())
    assert info.parse_error is None
    return info


def call(call_id: str, query: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "search", "input": {"q": query}}


def result(call_id: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def loop(steps: int) -> list[dict[str, Any]]:
    """A tool loop's messages: the question, then `steps` calls each answered."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find the invoice."}]
    for step in range(steps):
        messages.append(
            {"role": "assistant", "content": [{"type": "text", "text": "Searching."}, call(f"t{step}", "x")]}
        )
        messages.append({"role": "user", "content": [result(f"t{step}", f"no match {step}")]})
    return messages


def test_the_tail_is_the_last_assistant_turn_and_the_results_after_it() -> None:
    info = parse({"model": "claude-haiku-4-5", "tools": [SEARCH], "messages": loop(3)})
    assert info.assistant_turns == 3
    assert [(c.name, c.arguments, c.call_id) for c in info.prior_calls] == [("search", '{"q":"x"}', "t2")]
    assert [(r.name, r.call_id, r.content) for r in info.new_results] == [("search", "t2", "no match 2")]
    assert not info.new_user_turn
    assert info.message_count == 7


def test_a_string_system_and_text_blocks_name_the_same_agent() -> None:
    plain = parse({"model": "m", "system": "You are terse.", "messages": loop(1)})
    blocks = [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    cached = parse({"model": "m", "system": blocks, "messages": loop(1)})
    other = parse({"model": "m", "system": "You are verbose.", "messages": loop(1)})
    assert plain.agent.fingerprint == cached.agent.fingerprint != other.agent.fingerprint


def test_an_error_result_differs_from_a_success_with_the_same_words() -> None:
    messages = loop(1)
    messages[-1]["content"] = [result("t0", "service unavailable", is_error=True)]
    failed = parse({"model": "m", "messages": messages}).new_results[0]
    messages[-1]["content"] = [result("t0", "service unavailable")]
    passed = parse({"model": "m", "messages": messages}).new_results[0]
    assert passed.content == "service unavailable" and passed.value is None
    assert failed.value == {"is_error": True, "content": "service unavailable"}
    assert failed.content == '{"is_error":true,"content":"service unavailable"}'


def test_text_after_the_results_is_a_new_user_turn() -> None:
    messages = loop(1)
    messages[-1]["content"].append({"type": "text", "text": "Also check March."})
    info = parse({"model": "m", "messages": messages})
    assert info.new_user_turn and info.new_user_texts == ("Also check March.",)
    assert len(info.new_results) == 1


def test_a_screenshot_result_weighs_as_an_image_and_is_told_apart_by_its_bytes() -> None:
    def shot(data: str) -> list[dict[str, Any]]:
        source = {"type": "base64", "media_type": "image/png", "data": data}
        return [{"type": "text", "text": "screen:"}, {"type": "image", "source": source}]

    messages = loop(1)
    messages[-1]["content"] = [result("t0", shot("A" * 400_000))]
    first = parse({"model": "m", "messages": messages})
    messages[-1]["content"] = [result("t0", shot("B" * 400_000))]
    second = parse({"model": "m", "messages": messages})
    assert first.history_chars < 20_000  # not the 400k characters of base64
    assert first.history_chars >= MEDIA_CHARS
    assert first.new_results[0].content != second.new_results[0].content


def test_images_and_documents_in_a_question_are_weighed_and_root_the_run() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR" * 1000}}
    document = {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
    info = parse({"model": "m", "messages": [{"role": "user", "content": [image, document]}]})
    assert info.history_chars >= 2 * MEDIA_CHARS
    assert info.root_hash is not None  # no text: rooted by its media


def test_server_tool_blocks_are_not_calls_for_the_client() -> None:
    blocks = [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{"type": "web_search_result"}]},
        {"type": "text", "text": "Found it."},
    ]
    messages = [{"role": "user", "content": "q?"}, {"role": "assistant", "content": blocks}]
    info = parse({"model": "m", "messages": messages})
    assert info.prior_calls == ()
    assert info.history_chars > len("q?Found it.")  # the server blocks count toward the input


def test_thinking_counts_toward_the_input() -> None:
    thought = {"type": "thinking", "thinking": "x" * 4000, "signature": "sig"}
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [thought, call("t0", "y")]}]
    assert parse({"model": "m", "messages": messages}).history_chars > 4000


def test_a_long_conversation_resumed_from_a_checkpoint_reads_as_a_whole_one() -> None:
    cache = HistoryCache(1 << 24, min_body=1024)
    slot = HistorySlot(cache, "key", "run")
    body = {"model": "claude-haiku-4-5", "tools": [SEARCH], "messages": loop(30)}
    parse(body, RequestContext(history=slot))
    body["messages"] = loop(31)
    resumed = parse(body, RequestContext(history=slot))
    whole = parse(body)
    assert cache.resumed == 1
    assert resumed.prior_calls == whole.prior_calls and resumed.new_results == whole.new_results
    assert (resumed.message_count, resumed.history_chars, resumed.assistant_turns, resumed.root_hash) == (
        whole.message_count,
        whole.history_chars,
        whole.assistant_turns,
        whole.root_hash,
    )


def test_unreadable_bodies_are_forwarded_with_a_parse_error() -> None:
    info = AnthropicAdapter().parse_request(b"{not json", RequestContext())
    assert info.parse_error is not None
    odd = parse({"model": "m", "messages": [{"role": "user", "content": [1, None, {"type": "tool_result"}]}, "x"]})
    assert odd.new_results[0].call_id is None
