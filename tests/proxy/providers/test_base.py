"""The adapter interface's values: what parsing a request is told besides its body."""

from __future__ import annotations

from runguard.proxy.providers.base import RequestContext


def test_a_request_context_says_nothing_unless_told() -> None:
    ctx = RequestContext()
    assert (ctx.path_model, ctx.agent_header, ctx.stream_hint, ctx.history) == (None, None, False, None)
    assert dict(ctx.extra) == {}
