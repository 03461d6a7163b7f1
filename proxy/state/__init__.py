"""state: the state backend protocol and its two backends, memory and Redis.

Telling that a shared state lost writes is `generation`; the guarantees a backend gives are in `base`.

Its face is `__all__`, each name imported on first use (`runguard.proxy.core.faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runguard.proxy.core.faces import lazy_face

if TYPE_CHECKING:
    from runguard.proxy.state.base import ScopeIds, ScopeTtls, StateBackend
    from runguard.proxy.state.generation import Generation, Look
    from runguard.proxy.state.memory import MemoryState
    from runguard.proxy.state.redis import RedisState

HOMES = {
    "Generation": "generation",
    "Look": "generation",
    "MemoryState": "memory",
    "RedisState": "redis",
    "ScopeIds": "base",
    "ScopeTtls": "base",
    "StateBackend": "base",
}
__all__ = [
    "Generation",
    "Look",
    "MemoryState",
    "RedisState",
    "ScopeIds",
    "ScopeTtls",
    "StateBackend",
]

__getattr__ = lazy_face(__name__, HOMES)
