"""Normalized, typed views of provider traffic.

Adapters (`runguard.proxy.providers.registry`) turn request and response bodies of every
provider API into these frozen records; detectors and the guard pipeline read
only these. Records hold hashes, counts and the small strings detectors need
(tool names, arguments, result text) and never the whole conversation.

Hashes are hex strings of `digest()` below: stable across processes and
replicas, so they can live in shared state.
"""

from __future__ import annotations

from dataclasses import field
from enum import StrEnum
from typing import Any, ClassVar

import xxhash

from runguard.proxy.core.frozen import frozen

MAX_DIGEST_BYTES = 16
DIGEST_SIZE = 8  # bytes of a `digest` by default


def digest(data: str | bytes, size: int = DIGEST_SIZE) -> str:
    """A short, stable content hash: `size` bytes (at most 16) of XXH3-128, as hex.

    Stable across processes and machines (unseeded), so hashes can live in
    shared state. Not cryptographic: it tells contents apart, it guards
    nothing. XXH3 hashes a 300 KB tool result in about 6 us; blake2b, used
    before, took 0.5 ms, on the path of every request that carries one.
    """
    if not 0 < size <= MAX_DIGEST_BYTES:
        raise ValueError(f"digest size must be 1..{MAX_DIGEST_BYTES} bytes, not {size}")
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return xxhash.xxh3_128_hexdigest(raw)[: size * 2]


class Provider(str):
    """An upstream provider's name, as records, metrics and the `upstreams` settings name it ("openai").

    Open, not an enum: each provider spec (`runguard.proxy.providers.spec`) names its own
    (`Provider("anthropic")`), so adding a provider edits nothing here. The constants are the built-in
    specs' names, for code and tests that name them directly; new code reads the spec instead.
    """

    __slots__ = ()
    OPENAI: ClassVar[Provider]
    GEMINI: ClassVar[Provider]

    @property
    def value(self) -> str:
        """The plain name (as the enum this class replaced gave it)."""
        return str(self)


class Api(str):
    """The name of the provider API a request speaks ("chat"), as records and metrics label it.

    Open like `Provider`: each spec names its API. `OTHER` is a request no spec reads (forwarded and only
    counted); `REALTIME` a socket session's turns (`RequestInfo.session_turn`).
    """

    __slots__ = ()
    CHAT: ClassVar[Api]
    RESPONSES: ClassVar[Api]
    GEMINI: ClassVar[Api]
    REALTIME: ClassVar[Api]
    OTHER: ClassVar[Api]

    @property
    def value(self) -> str:
        """The plain name (as the enum this class replaced gave it)."""
        return str(self)


Provider.OPENAI = Provider("openai")
Provider.GEMINI = Provider("gemini")
Api.CHAT = Api("chat")
Api.RESPONSES = Api("responses")
Api.GEMINI = Api("gemini")
Api.REALTIME = Api("realtime")  # a Realtime session's responses, read on its socket (`ws_realtime`)
Api.OTHER = Api("other")


class HandoffKind(StrEnum):
    TRANSFER = "transfer"  # one-way: the caller hands the conversation over (openai-agents, ADK)
    DELEGATE = "delegate"  # nested: the caller waits for the member's answer (Agno)


TRANSFER_PREFIX = "transfer_to_"


def is_transfer(tool: str | None) -> bool:
    """Whether `tool` hands the conversation to another agent: openai-agents' `transfer_to_<agent>`,
    ADK's `transfer_to_agent`.

    Its result only acknowledges the transfer (`{"assistant": "<name>"}`,
    `{"result": null}`), the same every time: what was handed over is the
    turn's text, which `handoff_cycle` weighs. Loop detectors that compare
    calls and results leave these calls out.
    """
    return tool is not None and tool.startswith(TRANSFER_PREFIX) and len(tool) > len(TRANSFER_PREFIX)


# Agno's leader delegates to one member by its id (`delegate_task_to_member(member_id, task)`; 1.x's names too).
DELEGATE_TO_MEMBER = frozenset({"delegate_task_to_member", "transfer_task_to_member", "forward_task_to_member"})


def member_delegated_to(tool: str, arguments: object) -> str | None:
    """The member an Agno leader's call of `tool` hands its task to (its `member_id`), given the call's
    arguments as parsed JSON; None for any other call, or one that names no member."""
    if tool not in DELEGATE_TO_MEMBER or not isinstance(arguments, dict):
        return None
    member = arguments.get("member_id")
    return member if isinstance(member, str) and member else None


@frozen
class ToolCall:
    """One function call the model made. `arguments` is the raw JSON text."""

    name: str
    arguments: str
    call_id: str | None = None
    index: int = 0
    # Values derived from this call (its arguments' digest and token set, its name's tag), filled
    # on first use by `runguard.detectors.support.normalize` and `.sketch`: several detectors read the same call.
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # Its arguments' JSON value, read once for all of the above (`normalize.call_json`).
    parsed: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@frozen
class ToolResult:
    """A tool's answer sent back to the model in a request.

    `name` is filled from the matching call (by call id, or by name and order
    on Gemini); it is None only when no call in the request matches.
    """

    name: str | None
    call_id: str | None
    content: str
    # The result as the wire sent it when that was a JSON object or array (Gemini's
    # `functionResponse.response`), of which `content` is the compact dump; None when it came as
    # text. Digests read it directly instead of parsing `content` back.
    value: dict[str, Any] | list[Any] | None = field(default=None, compare=False, repr=False)
    # Normalized digests of `content` by volatile-key set, filled on first use by
    # `runguard.detectors.support.normalize.result_digest_of`: several detectors hash the
    # same (possibly 300 KB) result, and this object lives for one request.
    digests: dict[frozenset[str], str] = field(default_factory=dict, compare=False, repr=False)
    # Its content's JSON value, read once for every detector that needs it (`normalize.result_json`).
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@frozen
class Handoff:
    """A call that passes work to another agent."""

    tool: str
    target: str
    kind: HandoffKind
    call_id: str | None = None


@frozen
class Usage:
    """Token usage of one response. Thinking/reasoning tokens are part of output.

    `tool_calls`: the calls the provider ran itself and bills apart from tokens,
    as (tool, count) pairs (OpenAI's hosted web and file searches).
    `service_tier`: the tier OpenAI says served the request ("flex", "priority",
    ...), which scales its token prices. `audio_input_tokens` and
    `audio_output_tokens`: the part of the input and output that was audio,
    priced apart by the models that hear or speak; `cached_audio_tokens`: the
    part of `cached_tokens` that was audio, where the usage says (Realtime
    sessions, Gemini), priced at the cached audio rate. `cache_write_tokens`
    and `cache_write_1h_tokens`: the part of the input written to a prompt
    cache for 5 minutes and for an hour (Anthropic's prompt caching), priced
    at their own rates; like `cached_tokens` (cache reads), part of
    `input_tokens`.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    estimated: bool = False
    tool_calls: tuple[tuple[str, int], ...] = ()
    service_tier: str | None = None
    audio_input_tokens: int = 0
    audio_output_tokens: int = 0
    cached_audio_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@frozen
class OutputSchema:
    """A JSON schema the request demands for the model's text output."""

    schema: dict[str, Any]
    name: str | None = None
    # "json_schema" (OpenAI / Gemini responseJsonSchema), "openapi" (Gemini
    # responseSchema with UPPERCASE types) or "json_object" (any JSON object).
    dialect: str = "json_schema"


@frozen
class AgentIdentity:
    """Who is speaking: an explicit name when the wire has one, else a fingerprint."""

    name: str | None
    fingerprint: str
    learned: bool = False  # the name came from a handoff to the agent (`agent_names`), not from its request

    @property
    def label(self) -> str:
        return self.name or f"agent-{self.fingerprint[:8]}"  # `unnamed`, written out: read several times a request

    @property
    def unnamed(self) -> str:
        """The label the agent has while no name for it is known."""
        return f"agent-{self.fingerprint[:8]}"

    @property
    def steady(self) -> str:
        """A label that stays the same for all of a run's requests by this agent: a learned name does not
        (the agent spoke before it was handed work), so then the fingerprint's."""
        return self.unnamed if self.learned else self.label


@frozen
class RequestInfo:
    """What one model request says, parsed once.

    "Tail" fields describe what follows the conversation's last assistant
    (model) turn: the new material of an agent loop's step. `prior_calls` are
    that last assistant turn's tool calls, so results can be paired with them.
    """

    api: Api
    model: str
    stream: bool
    agent: AgentIdentity
    tool_names: tuple[str, ...] = ()
    # The tools that run another agent (`adapters.agent_tools`): a call of one is a delegation to it.
    agent_tools: frozenset[str] = frozenset()
    root_hash: str | None = None  # hash of the first user message: groups a run without a header
    # Hash of the task an Agno member's first message wraps in the team's context (`nesting.wrapped_task`).
    task_hash: str | None = None
    # Hash of the end user the request names (OpenAI's `safety_identifier`, else `user`): without a header,
    # runs are grouped per end user too, so a chatbot's users whose chats open alike are runs of their own.
    end_user: str | None = None
    # Digest of the session the client names (codex's `session-id`, Claude Code's session: `sessions`): without a
    # header, a session's requests are one run, and two sessions never share one.
    session: str | None = None
    # The family of the client that sent the request (`clients.ClientFamily`): what a stop answers it.
    client: str = "other"
    # The agent a transcript the conversation opens with says it was handed to (openai-agents' nested handoff
    # history, `adapters.handoff_history`): the acknowledgement that otherwise comes back as a tool result.
    handed_to: str | None = None
    message_count: int = 0
    history_chars: int = 0  # characters of conversation text in the request
    estimated_input_tokens: int = 0
    prior_calls: tuple[ToolCall, ...] = ()
    new_results: tuple[ToolResult, ...] = ()
    new_user_turn: bool = False  # the tail holds a user message (not only tool results)
    # Hash of the tail's user text: a new question, or (ADK) the other agents' turns quoted as user text.
    new_user_hash: str | None = None
    # Hash of the tail's last user message that the user asked (not an ADK quote of other agents' turns).
    question_hash: str | None = None
    # The tail's user texts themselves (references to the request's strings, not copies): what an agent that
    # writes its calls as text was told since its last turn (observations, other agents' messages).
    new_user_texts: tuple[str, ...] = ()
    assistant_turns: int = 0
    output_schema: OutputSchema | None = None
    previous_response_id: str | None = None
    # Responses `background: true`: the answer is queued; its usage comes when it is polled (`background`).
    background: bool = False
    include_usage: bool | None = None  # Chat streaming: stream_options.include_usage
    # The model may call tools the request does not declare: a stored prompt (Responses `prompt`), cached
    # content (Gemini `cachedContent`), legacy `functions` (Chat), MCP servers (Anthropic `mcp_servers`).
    tools_elsewhere: bool = False
    parse_error: str | None = None  # set when the body could not be parsed (forwarded anyway)
    raw: Any = field(default=None, repr=False, compare=False)
    # Values derived once per request for several detectors (the last turn's signature, ...),
    # filled on first use by `runguard.detectors.support.turns`.
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def session_turn(self) -> bool:
        """A turn of a socket session (a Realtime response, `Api.REALTIME`), not an HTTP request: limits on a
        run's requests and on their duration leave it out (the session's handshake was the request)."""
        return self.api == Api.REALTIME


@frozen
class ResponseInfo:
    """What one model response said, from a body or an accumulated stream."""

    response_id: str | None = None
    model: str | None = None
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    handoffs: tuple[Handoff, ...] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    error: str | None = None  # an error body, a mid-stream error event, or a failed status
    complete: bool = True  # False when a stream ended without its terminal event
    parse_error: str | None = None
