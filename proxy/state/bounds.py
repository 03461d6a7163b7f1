"""What the in-memory state may drop to make room, and how it counts what it dropped.

The in-memory state holds at most `runs.max_runs` entries (scopes), and each
tenant at most `runs.max_runs_per_tenant` runs. Making room never drops an
entry that is *held*: one that holds any of its scope's held fields, such as an
open or latched breaker or a key's spend of the day (the guard names them,
`HeldFields`). A held entry is only forgotten after its idle time (its TTL).

- Past the global bound, the least recently used entries that are not held go
  first: idle healthy runs, and the entries of junk keys and of requests that
  cost nothing. Held entries wait out their idle time, past the bound if need be.
- At a tenant's bound, a new run of that tenant drops the tenant's own least
  recently used run that is not held; when every one of its runs is held, the
  new run is refused (`StateFull`): one tenant's stops never make room for
  another's runs, nor for its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runguard.proxy.core.ops import Scope

HeldFields = Mapping[Scope, tuple[str, ...]]  # per scope kind, the fields that hold an entry while set


@dataclass
class Pressure:
    """What making room did, since start (the metrics and the health check read it)."""

    evicted: int = 0  # entries dropped, not held, to stay within the global bound
    evicted_in_tenant: int = 0  # runs of a tenant dropped, not held, to make room for its new run
    refused: int = 0  # new runs refused: their tenant's runs were all held at its bound


def owner(run_scope_id: str) -> str:
    """The tenant of a run's state id (`tenants.state_id`: the part before the first `/`)."""
    return run_scope_id.partition("/")[0]
