"""What lets a follow-up request find its response's run, written before the rest of the response's end.

A Responses API follow-up names its response (`previous_response_id`), an
Anthropic tool runner its message (`thread.previous_message_id`), and a
sub-agent's first request carries a task the response's tool calls handed out.
`remember` maps these to the run as soon as the response is read, so the
follow-up is judged in the right run however long the rest of the end takes
(`Judging` runs that beside the relay).
"""

from __future__ import annotations

from runguard.detectors.support import ResponseSeen
from runguard.proxy.guard.ticket import Ticket
from runguard.proxy.providers import registry
from runguard.proxy.runs import RunIdentity, continuation


async def remember(runs: RunIdentity, ticket: Ticket, seen: ResponseSeen) -> None:
    """Map the response's id to its run (for a background response not finished yet, to its request too,
    so that its poll is accounted for), and the tasks its tool calls hand out to the run's threads."""
    response = seen.response
    calls = response.tool_calls
    if response.response_id is not None and registry.chains_responses(ticket.request.api):
        pending = None
        if ticket.request.background and response.usage is None:
            index = ticket.facts.request_index if ticket.facts else 0
            request = ticket.request
            pending = continuation.Pending(
                ticket.key_hash,
                request.model,
                request.agent.label,
                index,
                ticket.nests,
                request.end_user,
                request.session,
            )
        await runs.remember_response(ticket.tenant, response.response_id, ticket.run_id, calls, pending)
    if ticket.facts is not None and ticket.nests and calls:
        request = ticket.request
        await runs.remember_tasks(ticket.tenant, request.end_user, ticket.run_id, calls, request.session)
