"""Which tenant a request acts for, and where a tenant's run keeps its state.

A run belongs to a tenant. By default a tenant is one API key (its hash,
`k_...`); `runs.tenants` groups keys under a name, so that an agent calling
OpenAI and Gemini with two keys of one team is one run with one budget.

Every run-scoped thing a request can name is looked up within its tenant:
the run of an `X-Run-Id` (its state lives under `state_id(tenant, run id)`),
a `previous_response_id` (`continuation.entry`), a conversation's root and
the threads its tool calls start (`roots.scope`). So a request of one tenant
can never read, tighten, trip or reset another tenant's run, whatever ids it
sends: the same `X-Run-Id` sent by two tenants names two runs.

The run id users see (the `x-runguard-run-id` header, records, the CLI, the
admin API) stays the id they sent; only the state is keyed by tenant.
Per-key state (a key's daily budget, its breakers) stays per key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from runguard.proxy.core.ops import Scope

if TYPE_CHECKING:
    from runguard.proxy.state import StateBackend

SEPARATOR = "/"  # tenant names and key hashes hold none: the first one ends the tenant


class Tenants:
    """The tenant of each key hash, from `runs.tenants` ({name: [key hash, ...]})."""

    def __init__(self, groups: Mapping[str, Sequence[str]]) -> None:
        self._of = {key_hash: name for name, hashes in groups.items() for key_hash in hashes}

    def of(self, key_hash: str) -> str:
        """The tenant a key acts for: its group's name, or the key's own hash."""
        return self._of.get(key_hash, key_hash) if self._of else key_hash


def state_id(tenant: str, run_id: str) -> str:
    """The id a tenant's run keeps its state under (the run scope's, its trace's, its threads' prefix)."""
    return f"{tenant}{SEPARATOR}{run_id}"


def split(scope_id: str) -> tuple[str, str] | None:
    """The tenant and the run id of a run's state id; None for an id `state_id` did not make."""
    tenant, sep, run_id = scope_id.partition(SEPARATOR)
    return (tenant, run_id) if sep and tenant and run_id else None


async def with_run(state: StateBackend, run_id: str) -> list[str]:
    """The tenants whose run named `run_id` has live state, sorted (the admin API and the dashboard ask)."""
    live = await state.ids_ending(Scope.RUN, SEPARATOR + run_id)
    return sorted({pair[0] for pair in map(split, live) if pair is not None and pair[1] == run_id})
