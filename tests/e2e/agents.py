"""Hand-written agent loops over the real SDKs, and upstream scripts that drive them.

An agent loop sends the conversation, runs the tool calls the model asks for,
appends the results, and goes again until the model answers with text. The
scripted upstream decides what the "model" says from the request it gets, so
a test can make it loop (same soft error every time), spiral, or finish.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
from agents import OpenAIChatCompletionsModel, OpenAIResponsesModel
from google import genai
from google.genai import types

from tests.e2e import payloads
from tests.support.upstream import Received, Reply

Tool = Callable[[str, dict[str, Any]], str]


def sdk_model(
    kind: str, client: openai.AsyncOpenAI, model: str = "gpt-4o"
) -> OpenAIResponsesModel | OpenAIChatCompletionsModel:
    """An openai-agents model on `client`: the Responses API for "responses", else Chat Completions."""
    if kind == "responses":
        return OpenAIResponsesModel(model=model, openai_client=client)
    return OpenAIChatCompletionsModel(model=model, openai_client=client)


def soft_error_tool(name: str, args: dict[str, Any]) -> str:
    """A tool stuck in a soft failure: the same answer whatever it is asked."""
    return json.dumps({"status": "partial_parse_error", "data": None, "request_id": str(args)})


def progressing_tool(name: str, args: dict[str, Any]) -> str:
    """A tool whose answer changes every time (polling a job that advances)."""
    return json.dumps({"status": "running", "progress": args.get("attempt")})


APPROACHES = (
    "read the totals table",
    "scan footer lines for amounts",
    "OCR every region then sum",
    "look near the signature block",
    "compare with purchase order",
    "search headings mentioning balance due",
)


def chat_script(
    steps: int, tool: str = "parse_document", usage: tuple[int, int] = (50, 10)
) -> Callable[[Received], Reply]:
    """Ask for `tool` with new arguments each turn; answer in text after `steps` turns."""

    def script(received: Received) -> Reply:
        body = received.json()
        turn = sum(1 for m in body["messages"] if m["role"] == "tool")
        if turn >= steps:
            return Reply.json(payloads.chat_completion("Done.", usage=usage))
        # Each retry words its approach differently (not a near-identical spiral), so what
        # repeats is only the tool's soft error: the signal `non_progress` exists for.
        args = json.dumps({"document": "invoice.pdf", "approach": APPROACHES[turn % len(APPROACHES)], "attempt": turn})
        return Reply.json(payloads.chat_completion(tool_calls=[(f"call_{turn}", tool, args)], usage=usage))

    return script


async def chat_agent(
    client: openai.AsyncOpenAI, tool: Tool, max_steps: int = 12, model: str = "gpt-4o-mini", **create: Any
) -> str:
    """Run the loop until a text answer; exceptions (the stop) propagate."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You extract data. Use parse_document."},
        {"role": "user", "content": "Extract the invoice total."},
    ]
    for _ in range(max_steps):
        completion = await client.chat.completions.create(model=model, messages=messages, **create)  # type: ignore[arg-type]
        message = completion.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = tool(call.function.name, json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    raise AssertionError("the agent did not finish within max_steps")


def gemini_script(
    steps: int, tool: str = "parse_document", usage: tuple[int, int] = (7, 3), model: str = "gemini-2.5-flash"
) -> Callable[[Received], Reply]:
    """Ask for `tool` with new arguments each turn; answer in text after `steps` turns (`model`: the model the
    responses name)."""

    def script(received: Received) -> Reply:
        body = received.json()
        turn = sum(1 for c in body["contents"] for p in c["parts"] if "functionResponse" in p)
        if turn >= steps:
            return Reply.json(payloads.gemini_response("Done.", usage=usage, model=model))
        call = (tool, {"fragment": f"page {turn}", "attempt": turn})
        return Reply.json(payloads.gemini_response(calls=[call], usage=usage, model=model))

    return script


async def gemini_agent(client: genai.Client, tool: Tool, max_steps: int = 12, model: str = "gemini-2.5-flash") -> str:
    contents: list[types.Content] = [types.Content(role="user", parts=[types.Part(text="Extract the invoice total.")])]
    declaration = types.FunctionDeclaration(
        name="parse_document", description="parse", parameters=types.Schema(type=types.Type.OBJECT)
    )
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[declaration])])
    for _ in range(max_steps):
        response = await client.aio.models.generate_content(model=model, contents=contents, config=config)
        calls = response.function_calls or []
        if not calls:
            return response.text or ""
        assert response.candidates and response.candidates[0].content
        contents.append(response.candidates[0].content)
        parts = [
            types.Part(
                function_response=types.FunctionResponse(
                    name=call.name, response={"result": tool(call.name or "", dict(call.args or {}))}
                )
            )
            for call in calls
        ]
        contents.append(types.Content(role="user", parts=parts))
    raise AssertionError("the agent did not finish within max_steps")
