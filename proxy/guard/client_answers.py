"""What a block answers the client that sent the request, when its detector leaves it to the client (`auto`).

Each family gets the answer that, measured with the real client, ends it at once and shows the person
running it RunGuard's reason (docs/stopping.md keeps the table):

- the Vercel AI SDK retries every 429 twice (after 2 s and 4 s) whatever `x-should-retry` says, and
  raises a 400 at once with its message: `refuse`;
- OpenAI's Codex CLI ends on a 429 but prints only `exceeded retry limit, last status: 429`; on a 400
  it prints the error body, the reason in it: `refuse`;
- LangChain's Gemini chat model retries a 429 with its own backoff, smolagents waits 60 s before it
  retries an error that says 429, and both raise a 400 at once: `refuse`;
- CrewAI's agents retry any error, a 400 too, and end their task on a completion whose text (the reason)
  becomes the task's output: `stop`;
- Claude Code ends on a 429 and prints its message: `error`, as every other client.

`guard.client_answers` changes a family's answer; a detector's `response` (also per key, in
`guard.overrides`) other than `auto` wins over both.
"""

from __future__ import annotations

from collections.abc import Mapping

from runguard.detectors.support import ResponseKind
from runguard.proxy.providers.common.clients import ClientFamily

DEFAULTS: Mapping[str, ResponseKind] = {
    ClientFamily.VERCEL_AI: ResponseKind.REFUSE,
    ClientFamily.CODEX: ResponseKind.REFUSE,
    ClientFamily.CLAUDE_CODE: ResponseKind.ERROR,
    ClientFamily.LANGCHAIN_GOOGLE: ResponseKind.REFUSE,
    ClientFamily.SMOLAGENTS: ResponseKind.REFUSE,
    ClientFamily.CREWAI: ResponseKind.STOP,
    ClientFamily.OTHER: ResponseKind.ERROR,
}
REFUSE_STATUS = 400  # no SDK or framework measured retries a 400; every one raises its message


def resolved(kind: ResponseKind, client: str, configured: Mapping[str, str]) -> ResponseKind:
    """The answer a block of `kind` gives a request of `client`'s family: `kind` itself unless it is `auto`;
    then the family's configured answer, else its default (`DEFAULTS`; `error` for a family not known)."""
    if kind is not ResponseKind.AUTO:
        return kind
    named = configured.get(client)
    if named is not None:
        return ResponseKind(named)
    return DEFAULTS.get(client, ResponseKind.ERROR)
