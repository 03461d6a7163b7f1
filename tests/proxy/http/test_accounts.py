from __future__ import annotations

import dataclasses

from runguard.proxy.http.accounts import claim
from runguard.proxy.providers.routes import resolve
from runguard.proxy.runs.accounts import Accounts
from runguard.proxy.runs.keys import KeyHasher
from runguard.proxy.state.memory import MemoryState
from tests.support.guards import guard_settings, make_context, make_guard

TOKEN = "k_" + "1" * 16
SCOPED = "/v1beta1/projects/acme/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent"
EXPRESS = "/v1beta1/publishers/google/models/gemini-2.5-flash:generateContent"


def _context() -> tuple[object, Accounts]:
    settings = guard_settings()
    accounts = Accounts(MemoryState(), KeyHasher(b"test-salt"))
    return dataclasses.replace(make_context(settings, make_guard(settings)), accounts=accounts), accounts


async def test_a_project_path_names_its_account_and_only_a_success_proves_it() -> None:
    ctx, accounts = _context()
    route = resolve(SCOPED)
    assert route is not None
    first = await claim(ctx, route, TOKEN, True)  # type: ignore[arg-type]
    assert first is not None and first.acting == TOKEN and first.identity == accounts.identity("acme")
    await first.answered(401)  # Vertex refused it: still itself
    assert (await claim(ctx, route, TOKEN, True)).acting == TOKEN  # type: ignore[arg-type, union-attr]
    await first.answered(200)
    proven = await claim(ctx, route, TOKEN, True)  # type: ignore[arg-type]
    assert proven is not None and proven.acting == accounts.identity("acme")
    await proven.answered(403)  # revoked: back to itself
    assert (await claim(ctx, route, TOKEN, True)).acting == TOKEN  # type: ignore[arg-type, union-attr]


async def test_paths_that_name_no_account_and_requests_without_a_key_make_no_claim() -> None:
    ctx, _ = _context()
    for path in (EXPRESS, "/v1/chat/completions", "/v1beta/models/gemini-2.5-flash:generateContent"):
        route = resolve(path)
        assert route is not None and await claim(ctx, route, TOKEN, True) is None  # type: ignore[arg-type]
    route = resolve(SCOPED)
    assert route is not None and await claim(ctx, route, TOKEN, False) is None  # type: ignore[arg-type]
