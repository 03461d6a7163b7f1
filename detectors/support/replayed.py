"""Tool results an agent sends back as text: calls made through the API's tool fields, replayed as words.

Some agents call tools natively but keep their history as text. smolagents' `ToolCallingAgent` writes
each step's calls into an assistant message ("Calling tools:\\n[{'id': ..., 'function': {...}}]") and
their results into a user message ("Observation:\\n..."); a step whose tool failed leaves no assistant
message, and its error ("Error:\\n... Now let's retry") is appended to the user message before it. The
request after a call carries no tool result, only user text. Which user text answers the calls is told by
what came before it: the conversation's previous response called tools, and the request that follows
holds either one more assistant turn (the calls, as text) and user text after it, or the same turns with
the user text it ended with grown by the answer, and comes from the same agent (another agent's request
after a transfer quotes the calls as text too: Google ADK's "For context:").

- `Asked`: what a response's calls were, kept in state for the request that answers them (the calling
  agent, the assistant turns and the digest of the user text the calling request ended with, the calls' kind, their
  arguments' digest and tools, whether each runs a command);
- `may_replay` / `may_answer`: whether a request's user text may answer such calls (tools declared, no
  tool result and no native call in its last assistant turn), and `answers`: its text that does;
- `replayed_result`: one such text as a tool result (a one-line label such as "Observation:" before a
  JSON answer left out, volatile parts of a text answer as in `normalize.strip_volatile`);
- `echo_of` / `without_echo`: the calls' argument words, kept as 16-bit hashes (never the words), and a
  result's lines less those that only echo them, as `shingles` leaves out what a result in the tool
  fields echoes of its call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import xxhash

from runguard.detectors.support.normalize import clip, strip_volatile
from runguard.detectors.support.shingles import ECHO_SHARE, echo_words, pack, unpack
from runguard.proxy.core.events import RequestInfo, ToolCall, ToolResult, digest
from runguard.proxy.core.frozen import frozen
from runguard.proxy.core.ops import OpResult

LABEL_CHARS = 40  # a first line this short, ending in ":", labels what follows ("Observation:")
MAX_TOOLS = 8  # tool names kept per response
TOOL_CHARS = 64  # of each
MAX_ECHO = 48  # argument words kept per response (as 16-bit hashes)
ECHO_RUN = 3  # words of the calls' in a row that quote their arguments
_WORD = re.compile(rb"[a-z0-9]+")


def _word_hash(word: bytes) -> int:
    return xxhash.xxh3_64_intdigest(word) >> 48


@frozen
class Asked:
    """A response's tool calls, as the request answering them in text is judged."""

    agent: str  # the calling agent's fingerprint (its first 8 characters): the same agent answers
    turn: int  # the assistant turns the calling request held
    tail: int  # the characters of the user text it ended with (`tail_text`)
    tail_digest: str  # and that text's digest
    command: bool  # every call runs a shell command (`commands.is_command_tool`)
    args: str  # digest of the calls' arguments, sorted
    kind: str  # the kind of tool (`novelty.kind_of`), or the kinds joined by "+"
    tools: tuple[str, ...]
    echo: frozenset[int] = frozenset()  # the calls' argument words (`echo_of`)

    def dumps(self) -> str:
        tools = ",".join(clip(tool, TOOL_CHARS).replace(",", "_") for tool in self.tools[:MAX_TOOLS])
        command = "1" if self.command else "0"
        head = (
            self.agent,
            str(self.turn),
            str(self.tail),
            self.tail_digest,
            command,
            self.args,
            pack(self.echo),
            tools,
        )
        return "|".join((*head, self.kind))

    @classmethod
    def loads(cls, raw: OpResult) -> Asked | None:
        """The calls `dumps` wrote; None for anything else."""
        parts = raw.split("|", 8) if isinstance(raw, str) else []
        if len(parts) != 9 or not parts[1].isdigit() or not parts[2].isdigit():
            return None
        agent, turn, tail, tail_digest, command, args, echo, tools, kind = parts
        named = tuple(tools.split(",")) if tools else ()
        return cls(agent, int(turn), int(tail), tail_digest, command == "1", args, kind, named, unpack(echo))


def tail_text(request: RequestInfo) -> str:
    """The user text a request ends with, after its last assistant turn (its messages joined)."""
    return "\n".join(request.new_user_texts)


def tail_digest(text: str) -> str:
    return digest(text, 4)


def echo_of(calls: Iterable[ToolCall]) -> frozenset[int]:
    """The words of the calls' arguments (keys and values, lowercase) as 16-bit hashes, the first `MAX_ECHO`."""
    words: set[bytes] = set()
    for call in calls:
        words |= echo_words(call)
    return frozenset(_word_hash(word) for word in sorted(words)[:MAX_ECHO])


def without_echo(units: Iterable[str], echo: frozenset[int]) -> list[str]:
    """The lines of `units` less what only echoes the calls' words (`echo`): a line mostly of them ("query
    lowest fare LIS BER"), and inside a line, a run of `ECHO_RUN` or more of them in a row (the arguments an
    error message quotes: "with arguments {'query': 'lowest fare LIS BER May'}"). What was asked, not what
    was found or what failed."""
    if not echo:
        return list(units)
    kept: list[str] = []
    for unit in units:
        for line in unit.split("\n"):
            words = _WORD.findall(line.lower().encode("utf-8", "surrogatepass"))
            asked = [_word_hash(word) in echo for word in words]
            if words and sum(asked) >= ECHO_SHARE * len(words):
                continue
            kept.append(_without_runs(line, words, asked) if sum(asked) >= ECHO_RUN else line)
    return kept


def _without_runs(line: str, words: list[bytes], asked: list[bool]) -> str:
    """`line` as its words, less each run of `ECHO_RUN` or more words of the calls' in a row."""
    out: list[bytes] = []
    start = 0
    while start < len(words):
        end = start
        while end < len(words) and asked[end]:
            end += 1
        if end - start >= ECHO_RUN:
            start = end
            continue
        out.extend(words[start : max(end, start + 1)])
        start = max(end, start + 1)
    return b" ".join(out).decode("utf-8", "surrogatepass")


def may_replay(request: RequestInfo) -> bool:
    """Whether the user text a request ends with may answer calls the model made natively (see the module
    docstring): tools declared, no tool result, no call in the tool fields in its last assistant turn."""
    return bool(request.tool_names and request.new_user_texts and not request.new_results and not request.prior_calls)


def may_answer(request: RequestInfo, min_chars: int) -> bool:
    """`may_replay`, with `min_chars` characters of user text."""
    return may_replay(request) and sum(map(len, request.new_user_texts)) >= min_chars


def answers(request: RequestInfo, asked: Asked) -> list[str] | None:
    """The user texts of `request` that answer the calls `asked` describes: all of them after one more
    assistant turn, or what grew the user text the calling request ended with; None when the request
    answers no such calls (a user's new message, another agent's request)."""
    if request.agent.fingerprint[: len(asked.agent)] != asked.agent:
        return None
    if request.assistant_turns == asked.turn + 1:
        return list(request.new_user_texts)
    if request.assistant_turns != asked.turn:
        return None
    text = tail_text(request)
    if len(text) <= asked.tail or tail_digest(text[: asked.tail]) != asked.tail_digest:
        return None
    return [text[asked.tail :].strip()]


def replayed_result(text: str, name: str | None) -> ToolResult:
    """A text that replays a tool's answer, as that answer: a JSON answer after a one-line label is read as
    JSON (its units, as a result sent in the tool fields is read); other text without its volatile parts."""
    head, newline, rest = text.partition("\n")
    body = rest.strip()
    if newline and len(head) <= LABEL_CHARS and head.rstrip().endswith(":") and body[:1] in ("{", "["):
        return ToolResult(name, None, body)
    return ToolResult(name, None, strip_volatile(text))
