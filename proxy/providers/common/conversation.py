"""Walking a conversation once, in order, to build a `RequestInfo`.

Each adapter reads its own wire shape and reports the conversation here
message by message (system text, user text, an assistant turn with its tool
calls, tool results). This keeps the one piece of logic every API shares in
one place: where the last assistant turn is, which results came after it
(the agent loop's new step), what the run's root is, and who is speaking.
Only counts, short hashes and the tail's results are kept, never the history.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from runguard.proxy.core.events import AgentIdentity, Api, OutputSchema, RequestInfo, ToolCall, ToolResult, digest
from runguard.proxy.providers.common import clients

# Google ADK appends this to every agent's system instruction (wire-formats E.2).
_ADK_NAME = re.compile(r'Your internal name is "([^"]+)"')
CHARS_PER_TOKEN = 4  # Google's and OpenAI's rule of thumb for an estimate


def last_index(items: list[Any], is_turn: Callable[[Any], bool]) -> int:
    """Index of the last item `is_turn` accepts (-1 if none): what comes before it is earlier history."""
    for index in range(len(items) - 1, -1, -1):
        if is_turn(items[index]):
            return index
    return -1


# How Google ADK opens the user-role text it quotes other agents' turns in, after a transfer (wire-formats D):
# the framework's, not a question of the user's.
QUOTE = "For context:"


class NamesAgent(Protocol):
    """What `Conversation.info` reads of a request's context (a `base.RequestContext`, which is not imported:
    base imports the history that imports this module)."""

    @property
    def agent_header(self) -> str | None: ...


class Conversation:
    """Accumulates what a request's conversation says; `info()` freezes it."""

    def __init__(self) -> None:
        self._instructions: list[str] = []
        self._root: str | None = None
        self._chars = 0
        self._messages = 0
        self._assistant_turns = 0
        self._last_calls: list[ToolCall] = []
        self._tail_results: list[ToolResult] = []
        self._tail_user = False
        self._tail_texts: list[str] = []  # the user text after the last assistant turn
        self._tail_question: str | None = None  # the last of it that the user asked (`QUOTE`s are not)
        self._in_assistant = False
        self._names: dict[str, str] = {}
        self._handed_to: str | None = None

    def copy(self) -> Conversation:
        """An independent copy: reading on into it leaves this one as it is."""
        other = Conversation()
        other._instructions = self._instructions.copy()
        other._root = self._root
        other._chars = self._chars
        other._messages = self._messages
        other._assistant_turns = self._assistant_turns
        other._last_calls = self._last_calls.copy()
        other._tail_results = self._tail_results.copy()
        other._tail_user = self._tail_user
        other._tail_texts = self._tail_texts.copy()
        other._tail_question = self._tail_question
        other._in_assistant = self._in_assistant
        other._names = self._names.copy()
        other._handed_to = self._handed_to
        return other

    def weight(self) -> int:
        """About how many bytes this holds (what a cached copy costs: tracemalloc measured 0.9-1.0x this)."""
        texts = sum(map(len, self._instructions)) + len(self._root or "")
        texts += sum(len(result.content) for result in self._tail_results) + sum(map(len, self._tail_texts))
        return 1024 + texts + 160 * (len(self._names) + len(self._last_calls) + len(self._tail_results))

    def system(self, text: str, *, first: bool = False) -> None:
        """System text; `first`: it came before every message read so far (a request's own
        instructions field, read after its messages: nothing else depends on the order)."""
        self._messages += 1
        self._chars += len(text)
        if text:
            if first:
                self._instructions.insert(0, text)
            else:
                self._instructions.append(text)

    @property
    def rootless(self) -> bool:
        return self._root is None

    def rooted(self, root: str | None) -> None:
        """The conversation's root, known other than from the text of its first user message: the first
        user turn of the transcript it opens with (`handoff_history`), or its first message's media when
        that has no text (`media.root_of`). None: nothing more is known."""
        if root is not None and self._root is None:
            self._root = root

    def handed_to(self, agent: str | None) -> None:
        """The agent the transcript this conversation opens with says it was handed to (`handoff_history`)."""
        self._handed_to = agent

    def user(self, text: str, chars: int | None = None) -> None:
        self._messages += 1
        self._chars += len(text) if chars is None else chars
        if self._root is None and text:
            self._root = text
        if text:
            self._tail_texts.append(text)
            if not text.startswith(QUOTE):
                self._tail_question = text
        self._tail_user = True
        self._in_assistant = False

    def assistant(self, chars: int, calls: Iterable[ToolCall] = (), *, continues: bool = False) -> None:
        """An assistant message; `continues` merges it into the turn before (Responses items)."""
        self._messages += 1
        calls = list(calls)
        self._chars += chars + sum(len(c.name) + len(c.arguments) for c in calls)
        for call in calls:
            if call.call_id:
                self._names[call.call_id] = call.name
        if continues and self._in_assistant:
            self._last_calls.extend(calls)
            return
        self._assistant_turns += 1
        self._last_calls = calls
        self._tail_results, self._tail_texts, self._tail_question = [], [], None
        self._tail_user = False
        self._in_assistant = True

    def earlier_assistant(
        self, chars: int, calls: Iterable[tuple[str, str, str | None]] = (), *, continues: bool = False
    ) -> None:
        """An assistant message before the last turn, its calls as (name, arguments, call id).

        Counted like `assistant` (call ids keep their names for later results,
        `continues` merges it into the turn before), but no `ToolCall` is built:
        a long agent loop sends hundreds of earlier turns with every request,
        and only the last turn's calls are needed. So the caller must know the
        message's turn is over (a user message or tool result follows it).
        """
        self._messages += 1
        self._chars += chars
        for name, arguments, call_id in calls:
            self._chars += len(name) + len(arguments)
            if call_id:
                self._names[call_id] = name
        if continues and self._in_assistant:
            return
        self._assistant_turns += 1
        self._last_calls, self._tail_results, self._tail_texts, self._tail_question = [], [], [], None
        self._tail_user = False
        self._in_assistant = True

    def earlier_turns(
        self,
        messages: int,
        chars: int,
        assistant_turns: int,
        names: dict[str, str],
        *,
        in_assistant: bool | None = None,
    ) -> None:
        """Messages before the last turn, counted by the caller in one pass (what `earlier_assistant`
        and `earlier_result` would have counted one by one); the last turn must follow.

        `in_assistant`: whether the last of them was an assistant item (for a reader that tracks it:
        the next item may continue that turn).
        """
        self._messages += messages
        self._chars += chars
        self._assistant_turns += assistant_turns
        self._names.update(names)
        self._tail_texts, self._tail_question = [], None  # user text reported before these counts came before it
        if in_assistant is not None:
            self._in_assistant = in_assistant

    @property
    def in_assistant(self) -> bool:
        """The last message reported was an assistant one (a Responses item may continue its turn)."""
        return self._in_assistant

    def earlier_result(self, chars: int) -> None:
        """A tool result before the last assistant turn: counted only (the next turn drops it anyway)."""
        self._messages += 1
        self._chars += chars
        self._in_assistant = False

    def result(
        self, call_id: str | None, name: str | None, content: str, value: dict[str, Any] | list[Any] | None = None
    ) -> None:
        """A tool result in the last turn; `value`: the object or array `content` was dumped from, if any."""
        self._messages += 1
        self._chars += len(content)
        known = name or (self._names.get(call_id) if call_id else None)
        self._tail_results.append(ToolResult(known, call_id, content, value))
        self._in_assistant = False

    def weigh(self, chars: int) -> None:
        """Characters a message's parts weigh in the input estimate beyond its text (images, files)."""
        self._chars += chars

    def other(self, chars: int = 0) -> None:
        """An item the proxy does not model (reasoning, images, built-in tools): counted only."""
        self._messages += 1
        self._chars += chars

    @property
    def instructions(self) -> str:
        return "\n".join(self._instructions)

    @property
    def _one_shot(self) -> bool:
        """The conversation is its instructions alone: no user text, no assistant turn, no tool result (a
        selector's prompt holding the roles and the whole transcript, a router's)."""
        return self._root is None and not self._assistant_turns and not self._tail_results and not self._tail_texts

    def info(
        self,
        *,
        api: Api,
        model: str,
        stream: bool,
        agent_header: str | None = None,
        ctx: NamesAgent | None = None,
        tool_names: tuple[str, ...],
        agent_tools: frozenset[str] = frozenset(),
        output_schema: OutputSchema | None = None,
        previous_response_id: str | None = None,
        include_usage: bool | None = None,
        extra_chars: int = 0,
        end_user: str | None = None,
        session: str | None = None,
        client: str = "other",
        tools_elsewhere: bool = False,
    ) -> RequestInfo:
        """The request's record. `agent_header`: the agent the request names (`X-Agent-Name`), or `ctx` (a
        `base.RequestContext`), whose `agent_header` is read."""
        header = ctx.agent_header if ctx is not None else agent_header
        chars = self._chars + extra_chars
        return RequestInfo(
            api=api,
            model=model,
            stream=stream,
            agent=identify(self.instructions, tool_names, header, one_shot=self._one_shot),
            tool_names=tool_names,
            agent_tools=agent_tools,
            root_hash=digest(self._root) if self._root is not None else None,
            task_hash=_wrapped_task_hash(self._root),
            end_user=digest("user\x00" + end_user) if end_user else None,
            session=session,
            client=clients.refined(client, self.instructions),
            handed_to=self._handed_to,
            message_count=self._messages,
            history_chars=chars,
            estimated_input_tokens=math.ceil(chars / CHARS_PER_TOKEN) + 3 * self._messages,
            prior_calls=tuple(self._last_calls),
            new_results=tuple(self._tail_results),
            new_user_turn=self._tail_user,
            new_user_hash=digest("\x00".join(self._tail_texts)) if self._tail_texts else None,
            question_hash=digest(self._tail_question) if self._tail_question is not None else None,
            new_user_texts=tuple(self._tail_texts),
            assistant_turns=self._assistant_turns,
            output_schema=output_schema,
            previous_response_id=previous_response_id,
            include_usage=include_usage,
            tools_elsewhere=tools_elsewhere,
        )


# Agno hands a member its task after the team's context when a team shares it (`share_member_interactions`,
# `add_team_history_to_members`): "<member_interaction_context>...</member_interaction_context>\n\n\n<task>".
_TEAM_CONTEXTS = ("<member_interaction_context>", "<team_history_context>")
_CONTEXT_ENDS = ("</member_interaction_context>", "</team_history_context>")


def _wrapped_task_hash(root: str | None) -> str | None:
    """The digest of the task an Agno member's first message carries after the team's context, if it does."""
    if root is None or not root.startswith(_TEAM_CONTEXTS):
        return None
    ends = [at + len(tag) for tag in _CONTEXT_ENDS if (at := root.rfind(tag)) >= 0]
    task = root[max(ends) :].lstrip("\n") if ends else ""
    return digest(task) if task else None


_NUMERALS = bytes.maketrans(b"123456789", b"000000000")


ONE_SHOT_CHARS = 200  # of a one-shot request's first line: what names the agent that sends it


def identify(
    instructions: str, tool_names: Iterable[str], header: str | None, *, one_shot: bool = False
) -> AgentIdentity:
    """The speaking agent: `X-Agent-Name`, else ADK's internal name, else a fingerprint.

    The fingerprint is instructions + the set of tool names: openai-agents and
    Agno send no agent name, but each agent has its own instructions and tools.
    Digits are read as zeros: instructions that carry the time (Agno's
    `add_datetime_to_context`, a prompt with today's date) still name one agent.
    A `one_shot` request (its instructions are its whole conversation: AutoGen's
    speaker selector sends the roles and the transcript so far in one system
    message) is named by the first line of its instructions: the transcript grows
    with every pick, and the selector stays one agent.
    """
    named = instructions
    if one_shot:
        named = instructions[: min(ONE_SHOT_CHARS, len(instructions))].partition("\n")[0]
    text = named.encode("utf-8", "surrogatepass").translate(_NUMERALS)  # bytes: 3x faster than str's
    fingerprint = digest(text + b"\x00" + ",".join(sorted(set(tool_names))).encode("utf-8", "surrogatepass"))
    if header:
        return AgentIdentity(header.strip()[:128], fingerprint)
    found = _ADK_NAME.search(instructions)
    return AgentIdentity(found.group(1) if found else None, fingerprint)


def end_user_of(data: dict[str, Any]) -> str | None:
    """The end user an OpenAI request names, if any: `safety_identifier`, else the older `user`."""
    named = data.get("safety_identifier") or data.get("user")
    return named if isinstance(named, str) and named else None


# Request fields through which the model may call tools the request's `tools` do not declare.
TOOLS_ELSEWHERE = ("prompt", "cachedContent", "cached_content", "functions", "mcp_servers")


def tools_elsewhere(data: dict[str, Any]) -> bool:
    """Whether the request lets the model call tools it does not declare in `tools` (`TOOLS_ELSEWHERE`: a
    stored prompt, Gemini cached content, Chat's legacy `functions`, Anthropic's MCP servers)."""
    return any(data.get(key) for key in TOOLS_ELSEWHERE)


def failed_request(api: Api, problem: str | None) -> RequestInfo:
    """A request that could not be read: forwarded untouched, never judged."""
    return RequestInfo(api=api, model="", stream=False, agent=identify("", (), None), parse_error=problem or "unknown")
