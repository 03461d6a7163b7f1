"""Healthy agent runs over the real SDKs: a scripted model plan, tools that answer, loops that run them.

A plan is the model's side of a run: turn i's tool calls (one or a parallel
batch), then a text answer. The fake upstream reads which turn a request is
at from the conversation it carries and answers that turn's calls, in the
API's own format, streamed or not, with usage that grows with the request
(a quarter of its bytes, as input tokens): what detectors that read usage see
from a real model. The agent loops run the calls through `Tools` and send the
results back until the model answers in text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import openai
import orjson
from google import genai
from google.genai import types

from runguard.proxy.store.records import RequestRecord, TripRecord
from tests.e2e import payloads
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply, Script

Call = tuple[str, dict[str, Any]]
Plan = Sequence[Sequence[Call]]  # turn i's calls; after the last turn, a text answer
Tools = Callable[[str, dict[str, Any]], str]  # one call's result text
ANSWER = "All done."
MAX_STEPS = 120


def usage_of(received: Received) -> tuple[int, int]:
    """Input tokens as a real model would count them (about 4 bytes each), and a short output."""
    return max(1, len(received.body) // 4), 40


# -- the model's side: which turn a request is at, and that turn's answer ------------------------------


def chat_turn(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls"))


def responses_turn(body: dict[str, Any]) -> int:
    ids = {item["call_id"].rpartition("_")[0] for item in body["input"] if item.get("type") == "function_call"}
    return len(ids)


def gemini_turn(body: dict[str, Any]) -> int:
    return sum(1 for c in body["contents"] if c.get("role") == "model" and any("functionCall" in p for p in c["parts"]))


def _ids(turn: int, calls: Sequence[Call]) -> list[tuple[str, str, str]]:
    return [(f"call_{turn}_{i}", name, json.dumps(args)) for i, (name, args) in enumerate(calls)]


def chat_model(plan: Plan, answer: str = ANSWER) -> Callable[[Received], Reply]:
    def script(received: Received) -> Reply:
        body = received.json()
        turn = chat_turn(body)
        calls = _ids(turn, plan[turn]) if turn < len(plan) else None
        completion = payloads.chat_completion(answer, tool_calls=calls, usage=usage_of(received))
        if not body.get("stream"):
            return Reply.json(completion)
        return Reply.sse(chat_chunks(completion, bool((body.get("stream_options") or {}).get("include_usage"))))

    return script


def chat_chunks(completion: dict[str, Any], with_usage: bool) -> list[bytes]:
    """A Chat completion as the SSE chunks a streamed request gets."""
    message = completion["choices"][0]["message"]
    base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": completion["model"]}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": None if message.get("tool_calls") else ""}]
    for i, call in enumerate(message.get("tool_calls") or []):
        head = {"index": i, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"]}}
        head["function"]["arguments"] = ""
        deltas.append({"tool_calls": [head]})
        deltas.append({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]})
    if message.get("content"):
        deltas.append({"content": message["content"]})
    chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    finish = completion["choices"][0]["finish_reason"]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if with_usage:
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return [b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


def responses_model(plan: Plan, answer: str = ANSWER) -> Callable[[Received], Reply]:
    def script(received: Received) -> Reply:
        body = received.json()
        turn = responses_turn(body)
        done = payloads.response_object(answer, calls=_ids(turn, plan[turn]) if turn < len(plan) else None)
        done["id"] = f"resp_{turn}"
        done["usage"]["input_tokens"], done["usage"]["output_tokens"] = usage_of(received)
        done["usage"]["total_tokens"] = sum(usage_of(received))
        if not body.get("stream"):
            return Reply.json(done)
        return Reply.sse(responses_events(done))

    return script


def responses_events(done: dict[str, Any]) -> list[bytes]:
    """A finished Response as the events of a stream: each output item added, done, then completed."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**done, "status": "in_progress", "output": [], "usage": None}}
    ]
    for index, item in enumerate(done["output"]):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": done})
    return [
        f"event: {event['type']}\n".encode() + b"data: " + orjson.dumps({**event, "sequence_number": seq}) + b"\n\n"
        for seq, event in enumerate(events)
    ]


def gemini_model(plan: Plan, answer: str = ANSWER) -> Callable[[Received], Reply]:
    def script(received: Received) -> Reply:
        body = received.json()
        turn = gemini_turn(body)
        calls = [(name, args) for name, args in plan[turn]] if turn < len(plan) else None
        response = payloads.gemini_response(answer, calls=calls, usage=usage_of(received))
        if "streamGenerateContent" not in received.path:
            return Reply.json(response)
        return Reply.sse([b"data: " + orjson.dumps(response) + b"\r\n\r\n"])

    return script


# -- the agent's side: loops over the real SDKs ----------------------------------------------------------

SYSTEM = "You are a careful assistant. Use the tools to finish the task, then answer."


def tool_specs(plan: Plan) -> list[str]:
    return sorted({name for turn in plan for name, _ in turn})


def _chat_tools(names: list[str]) -> list[Any]:
    return [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}} for n in names
    ]


async def chat_agent(
    client: openai.AsyncOpenAI, tools: Tools, names: list[str], task: str, stream: bool = False
) -> str:
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
    for _ in range(MAX_STEPS):
        create: dict[str, Any] = {"model": "gpt-4o-mini", "messages": messages, "tools": _chat_tools(names)}
        if stream:
            text, calls = await _read_chat_stream(client, create)
        else:
            message = (await client.chat.completions.create(**create)).choices[0].message
            text = message.content or ""
            calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]  # type: ignore[union-attr]
        if not calls:
            return text
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                    for cid, name, args in calls
                ],
            }
        )
        for cid, name, args in calls:
            messages.append({"role": "tool", "tool_call_id": cid, "content": tools(name, json.loads(args))})
    raise AssertionError("the agent did not finish")


async def _read_chat_stream(
    client: openai.AsyncOpenAI, create: dict[str, Any]
) -> tuple[str, list[tuple[str, str, str]]]:
    stream = await client.chat.completions.create(**create, stream=True, stream_options={"include_usage": True})
    text, calls = "", {}
    async for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for delta in choice.delta.tool_calls or []:
                slot = calls.setdefault(delta.index, ["", "", ""])
                slot[0] = delta.id or slot[0]
                if delta.function:
                    slot[1] = delta.function.name or slot[1]
                    slot[2] += delta.function.arguments or ""
    return text, [(c[0], c[1], c[2]) for c in calls.values()]


async def responses_agent(
    client: openai.AsyncOpenAI, tools: Tools, names: list[str], task: str, stream: bool = False
) -> str:
    items: list[Any] = [{"role": "user", "content": task}]
    specs: list[Any] = [
        {"type": "function", "name": n, "parameters": {"type": "object", "properties": {}}, "strict": False}
        for n in names
    ]
    for _ in range(MAX_STEPS):
        if stream:
            async with client.responses.stream(model="gpt-4o", instructions=SYSTEM, input=items, tools=specs) as events:
                response = await events.get_final_response()
        else:
            response = await client.responses.create(model="gpt-4o", instructions=SYSTEM, input=items, tools=specs)
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return response.output_text
        for call in calls:
            items.append(
                {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments}
            )
        for call in calls:
            result = tools(call.name, json.loads(call.arguments))
            items.append({"type": "function_call_output", "call_id": call.call_id, "output": result})
    raise AssertionError("the agent did not finish")


async def gemini_agent(client: genai.Client, tools: Tools, names: list[str], task: str, stream: bool = False) -> str:
    contents: list[types.Content] = [types.Content(role="user", parts=[types.Part(text=task)])]
    declarations = [
        types.FunctionDeclaration(name=n, description=n, parameters=types.Schema(type=types.Type.OBJECT)) for n in names
    ]
    config = types.GenerateContentConfig(
        system_instruction=SYSTEM, tools=[types.Tool(function_declarations=declarations)]
    )

    def answer(call: types.FunctionCall) -> dict[str, Any]:
        return _as_object(tools(call.name or "", dict(call.args or {})))

    for _ in range(MAX_STEPS):
        text = await gemini_step(client, contents, config, stream, answer)
        if text is not None:
            return text
    raise AssertionError("the agent did not finish")


async def gemini_step(
    client: genai.Client,
    contents: list[types.Content],
    config: types.GenerateContentConfig,
    stream: bool,
    answer: Callable[[types.FunctionCall], dict[str, Any]],
) -> str | None:
    """One turn of a Gemini agent loop (gemini-2.5-flash, asked whole or streamed): the model's final text, or
    None when it called functions; then its turn and `answer`'s function responses are added to `contents`."""
    parts = await _gemini_parts(client, contents, config, stream)
    calls = [p.function_call for p in parts if p.function_call]
    if not calls:
        return "".join(p.text or "" for p in parts)
    contents.append(types.Content(role="model", parts=parts))
    contents.append(
        types.Content(
            role="user",
            parts=[
                types.Part(function_response=types.FunctionResponse(name=call.name, response=answer(call)))
                for call in calls
            ],
        )
    )
    return None


async def _gemini_parts(
    client: genai.Client, contents: list[types.Content], config: types.GenerateContentConfig, stream: bool
) -> list[types.Part]:
    """The parts of the model's next turn, asked whole or streamed (the chunks' parts joined)."""
    if stream:
        chunks = [
            c
            async for c in await client.aio.models.generate_content_stream(
                model="gemini-2.5-flash", contents=contents, config=config
            )
        ]
        return [
            p for c in chunks if c.candidates and c.candidates[0].content for p in c.candidates[0].content.parts or []
        ]
    response = await client.aio.models.generate_content(model="gemini-2.5-flash", contents=contents, config=config)
    assert response.candidates and response.candidates[0].content
    return list(response.candidates[0].content.parts or [])


def _as_object(text: str) -> dict[str, Any]:
    """A tool's JSON object answer as Gemini's function response; other text wrapped as {"result": text}."""
    try:
        value = json.loads(text)
    except ValueError:
        return {"result": text}
    return value if isinstance(value, dict) else {"result": text}


async def play(
    api: str,
    proxy: str,
    upstream: FakeUpstream,
    plan: Plan,
    tools: Tools,
    run_id: str,
    *,
    key: str = "sk-test-healthy",
    wrap: Callable[[Script], Script] = lambda model: model,
) -> str:
    """The plan played by the model of `api` ("chat", "responses" or "gemini", "-stream" for a streamed loop;
    through `wrap`) and run by an agent loop over its SDK with the API key `key`, to the answer (or the stop)."""
    kind, _, streamed = api.partition("-")
    names = tool_specs(plan)
    task = "Do the task."
    models = {"gemini": gemini_model, "chat": chat_model, "responses": responses_model}
    upstream.script = wrap(models[kind](plan))
    if kind == "gemini":
        client = genai.Client(
            api_key="test-key", http_options=types.HttpOptions(base_url=proxy, headers={"X-Run-Id": run_id})
        )
        return await gemini_agent(client, tools, names, task, stream=bool(streamed))
    openai_client = openai.AsyncOpenAI(base_url=proxy + "/v1", api_key=key, default_headers={"X-Run-Id": run_id})
    if kind == "chat":
        return await chat_agent(openai_client, tools, names, task, stream=bool(streamed))
    return await responses_agent(openai_client, tools, names, task, stream=bool(streamed))


# -- what the proxy recorded -----------------------------------------------------------------------------


def verdicts(sink: ListSink) -> set[tuple[str, str]]:
    """(detector, action) of every verdict recorded on a request or as a trip."""
    found = {(v.detector, v.action) for r in sink.records if isinstance(r, RequestRecord) for v in r.verdicts}
    return found | {(r.detector, r.action) for r in sink.records if isinstance(r, TripRecord)}


def blocks(sink: ListSink) -> set[str]:
    return {detector for detector, action in verdicts(sink) if action == "block"}


def warnings(sink: ListSink) -> set[str]:
    return {detector for detector, action in verdicts(sink) if action == "warn"}
