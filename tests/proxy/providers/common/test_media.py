"""Inline media weighed as a model counts it: a screenshot a tool returns is an image, not 150k tokens."""

from __future__ import annotations

import base64
import os
from typing import Any

import openai
import orjson
from agents import Agent, Runner, ToolOutputImage, function_tool, set_tracing_disabled

from runguard.proxy.core.events import RequestInfo
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.common import media
from runguard.proxy.providers.gemini.adapter import GeminiAdapter
from runguard.proxy.providers.gemini.contents import read_contents
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter
from runguard.proxy.providers.openai_responses.input import read_input
from tests.conftest import ProxyFactory, SdkClient
from tests.e2e import payloads
from tests.e2e.agents import sdk_model
from tests.e2e.faults import eventually, requests_of, trips_of
from tests.proxy.providers.common.forgiving import read_contents_forgiving, read_input_forgiving
from tests.proxy.providers.common.test_earlier_turns import assert_same
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply

set_tracing_disabled(True)


def screenshot(size: int = 600_000) -> str:
    """A PNG-sized data URL (random bytes: every screenshot is a different image)."""
    return "data:image/png;base64," + base64.b64encode(os.urandom(size)).decode()


def responses(*items: Any) -> RequestInfo:
    return ResponsesAdapter().parse_request(orjson.dumps({"model": "gpt-4o", "input": list(items)}), RequestContext())


def tool_turn(output: Any) -> RequestInfo:
    return responses(
        {"role": "user", "content": "What is on the screen?"},
        {"type": "function_call", "call_id": "c1", "name": "take_screenshot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": output},
    )


def test_a_payload_is_replaced_by_its_media_type_and_a_digest_and_counted() -> None:
    shot, other = screenshot(1000), screenshot(1000)
    value = {"parts": [{"type": "input_image", "image_url": shot}, {"type": "input_text", "text": "x"}], "n": 1}
    light, found = media.shed(value)
    assert found == 1
    assert light["parts"][0]["image_url"].startswith("data:image/png;xxh3=")
    assert light["parts"][1:] == value["parts"][1:] and light["n"] == 1
    assert value["parts"][0]["image_url"] == shot  # the parsed body is left as it was
    assert media.shed(other)[0] != media.shed(shot)[0]
    small = "data:text/plain,hello"
    assert media.shed(small) == (small, 0)
    assert media.shed({"url": "https://example.com/cat.png"}) == ({"url": "https://example.com/cat.png"}, 0)


def test_a_screenshot_tool_s_output_weighs_an_image_and_reads_as_what_it_shows() -> None:
    shot = screenshot()
    info = tool_turn([{"type": "input_image", "image_url": shot}])
    assert info.estimated_input_tokens < 1000  # it weighed 150k tokens
    (result,) = info.new_results
    assert len(result.content) < 200
    assert result.content != tool_turn([{"type": "input_image", "image_url": screenshot()}]).new_results[0].content
    assert result.content == tool_turn([{"type": "input_image", "image_url": shot}]).new_results[0].content
    by_url = tool_turn([{"type": "input_image", "image_url": "https://example.com/screen.png"}])
    assert by_url.estimated_input_tokens >= media.MEDIA_TOKENS
    assert tool_turn("plain text").new_results[0].content == "plain text"


def test_screenshots_in_earlier_turns_and_computer_use_items_weigh_images() -> None:
    history: list[Any] = [{"role": "user", "content": "Book the 9:40 train"}]
    for turn in range(6):
        history.append({"type": "computer_call", "call_id": f"c{turn}", "action": {"type": "click", "x": turn, "y": 1}})
        shot = {"type": "computer_screenshot", "image_url": screenshot(300_000)}
        history.append({"type": "computer_call_output", "call_id": f"c{turn}", "output": shot})
    history.append({"role": "user", "content": [{"type": "input_image", "image_url": screenshot(100_000)}]})
    info = responses(*history)
    assert 7 * media.MEDIA_TOKENS <= info.estimated_input_tokens < 8 * media.MEDIA_TOKENS


def test_text_with_an_image_by_url_in_a_user_message_counts_the_image() -> None:
    text = [{"type": "input_text", "text": "What breed is this?"}]
    with_image = [*text, {"type": "input_image", "image_url": "https://example.com/dog.jpg"}]
    grew = responses({"role": "user", "content": with_image}).estimated_input_tokens
    assert grew - responses({"role": "user", "content": text}).estimated_input_tokens == media.MEDIA_TOKENS
    chat = ChatAdapter().parse_request(
        orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}), RequestContext()
    )
    assert chat.estimated_input_tokens < 10


@function_tool
def take_screenshot() -> ToolOutputImage:
    """A screenshot of the browser."""
    return ToolOutputImage(image_url=screenshot(), detail="high")


def looking(received: Received) -> Reply:
    """The model asks for a screenshot three times, then answers."""
    looked = sum(1 for item in received.json()["input"] if item.get("type") == "function_call_output")
    if looked < 3:
        return Reply.json(payloads.response_object(calls=[(f"c{looked}", "take_screenshot", "{}")]))
    return Reply.json(payloads.response_object("The form is filled in."))


async def test_an_openai_agents_agent_whose_tool_returns_screenshots_is_not_stopped(
    make_proxy: ProxyFactory, sdk_client: SdkClient, upstream: FakeUpstream, sink: ListSink
) -> None:
    """Three screenshots of 800 KB each in its history; measured by their characters, the 2nd request
    looked like 200k tokens and was stopped by `context_window`."""
    upstream.script = looking
    client: openai.AsyncOpenAI = sdk_client(await make_proxy(), "sk-screens", {"X-Run-Id": "screens"})
    agent = Agent(name="browser", instructions="You use the browser.", tools=[take_screenshot])
    agent.model = sdk_model("responses", client)
    result = await Runner.run(agent, "Fill in the form.")
    assert result.final_output == "The form is filled in."
    await eventually(lambda: len(requests_of(sink)) == 4)
    assert [t.detector for t in trips_of(sink) if t.detector != "consecutive_same_tool"] == []  # it warns
    sent = upstream.received[-1].json()["input"]
    assert sum(len(orjson.dumps(item)) for item in sent) > 2_000_000  # the bytes went upstream unchanged


def test_chat_and_gemini_count_the_images_a_user_sends() -> None:
    def chat(content: Any) -> RequestInfo:
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": content}]}
        return ChatAdapter().parse_request(orjson.dumps(body), RequestContext())

    text = [{"type": "text", "text": "What breed is this?"}]
    image = {"type": "image_url", "image_url": {"url": screenshot(50_000)}}
    assert chat([*text, image]).estimated_input_tokens - chat(text).estimated_input_tokens == media.MEDIA_TOKENS
    photo = {"inlineData": {"mimeType": "image/jpeg", "data": base64.b64encode(os.urandom(50_000)).decode()}}

    def gemini(*parts: Any, earlier: bool) -> RequestInfo:
        contents: list[Any] = [{"role": "user", "parts": list(parts)}]
        if earlier:  # read by the fast pass over finished turns
            contents += [
                {"role": "model", "parts": [{"text": "A beagle."}]},
                {"role": "user", "parts": [{"text": "Sure?"}]},
            ]
        body = orjson.dumps({"contents": contents})
        return GeminiAdapter().parse_request(body, RequestContext(path_model="gemini-2.5-flash"))

    for earlier in (False, True):
        grew = gemini({"text": "What breed?"}, photo, earlier=earlier).estimated_input_tokens
        assert grew - gemini({"text": "What breed?"}, earlier=earlier).estimated_input_tokens == media.MEDIA_TOKENS


def test_the_fast_and_the_forgiving_reads_weigh_media_alike() -> None:
    shot = screenshot(2000)
    contents = [
        {"role": "user", "parts": [{"text": "Look"}, {"inline_data": {"mime_type": "image/png", "data": "AAAA"}}]},
        {"role": "model", "parts": [{"functionCall": {"name": "shot", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "shot", "response": {}}}, {"fileData": {}}]},
        {"role": "model", "parts": [{"text": "done"}]},
    ]
    assert_same(read_contents, read_contents_forgiving, contents)
    items = [
        {"role": "user", "content": [{"type": "input_image", "image_url": shot}]},
        {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_image", "image_url": shot}]},
        {"type": "computer_call_output", "call_id": "c2", "output": {"type": "computer_screenshot", "image_url": shot}},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
    ]
    assert_same(read_input, read_input_forgiving, items)


def test_a_first_message_of_media_alone_roots_its_conversation_by_what_it_holds() -> None:
    """No text to root the conversation by: its media do, told apart by their bytes."""

    def root(audio: str) -> str | None:
        voice = {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": audio, "format": "wav"}}]}
        body = {"model": "gpt-4o-audio-preview", "messages": [voice]}
        return ChatAdapter().parse_request(orjson.dumps(body), RequestContext()).root_hash

    first, second = (base64.b64encode(os.urandom(3000)).decode() for _ in range(2))
    assert root(first) == root(first) != root(second)
    assert root(first) is not None
    assert media.root_of([]) is None and media.root_of("") is None
