"""A response as the guard reads it: agent tools named, upstream error text masked, usage and cost known.

Every response the guard judges or records goes through `ResponseReader.seen`
first, so the detectors, the records and the spend all see the same usage: the
usage the upstream reported, or for a successful answer that reports none
(a streamed Chat without `include_usage`) an estimate, never zero.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from runguard.detectors.support import ResponseSeen
from runguard.proxy.core.events import ResponseInfo, Usage
from runguard.proxy.guard import accounting
from runguard.proxy.guard.costs.pricing import ModelTables
from runguard.proxy.guard.costs.tokens import TokenEstimator
from runguard.proxy.guard.costs.upstream_prices import UpstreamPrices
from runguard.proxy.guard.ticket import Ticket
from runguard.proxy.providers.common import handoffs
from runguard.proxy.runs import redact


class ResponseReader:
    """Builds the `ResponseSeen` of each response (see the module docstring)."""

    def __init__(
        self,
        tables: ModelTables,
        tokens: TokenEstimator,
        clock: Callable[[], float],
        upstreams: UpstreamPrices | None = None,
    ) -> None:
        self._tables = tables
        self._upstreams = upstreams or UpstreamPrices({})
        self.tokens = tokens
        self._clock = clock

    def seen(self, ticket: Ticket, info: ResponseInfo, status: int | None, latency: float) -> ResponseSeen:
        """`info`, the response to `ticket`'s request with `status` after `latency` seconds, as judged."""
        info = handoffs.with_agent_tools(info, ticket.request.agent_tools)
        if info.error:  # upstream text, kept in records, logs and trips: it may echo the request's key
            info = dataclasses.replace(info, error=redact(info.error, ticket.credentials()))
        usage = self._usage(ticket, info, status)
        if usage is not info.usage:
            info = dataclasses.replace(info, usage=usage)
        if info.model is not None:
            self._tables.served(ticket.request.model, info.model)
        return ResponseSeen(
            ticket.run_id,
            ticket.key_hash,
            self._clock(),
            ticket.request,
            info,
            ticket.facts or accounting.UNKNOWN_FACTS,
            status,
            self.cost(ticket, usage) or 0.0,
            latency,
        )

    def cost(self, ticket: Ticket, usage: Usage | None) -> float | None:
        """The cost of a response: by its named upstream's own table (never another table's row), else by the
        shipped tables; None when the model is unpriced there (what it adds to a spend is 0: `seen`)."""
        upstream = str(ticket.provider)
        if self._upstreams.covers(upstream):
            return self._upstreams.cost(upstream, ticket.request.model, usage)
        return self._tables.bill(ticket.request.model, usage)

    def priced(self, ticket: Ticket) -> bool:
        """Whether the request's model has a price (its named upstream's table, else the shipped tables)."""
        upstream = str(ticket.provider)
        if self._upstreams.covers(upstream):
            return self._upstreams.priced(upstream, ticket.request.model)
        return self._tables.price(ticket.request.model) is not None

    def unpriced(self, ticket: Ticket, seen: ResponseSeen) -> bool:
        """Whether `seen`'s model has no price (for its record). Only a response that cost nothing can be
        unpriced: the price is looked up again for those alone."""
        return not seen.usd and self.cost(ticket, seen.response.usage) is None

    def _usage(self, ticket: Ticket, info: ResponseInfo, status: int | None) -> Usage | None:
        if info.usage is not None:
            return info.usage
        if status is None or status >= 300 or ticket.request.background:
            return None  # a background response's usage is counted when it is polled (`background`)
        # Streamed Chat without include_usage carries no usage: estimate, never count zero.
        said = info.text + "".join(call.name + call.arguments for call in info.tool_calls)
        output = self.tokens.count(said, ticket.request.model, ticket.request.api)
        return Usage(ticket.request.estimated_input_tokens, output, estimated=True)
