"""runs: which run a request is, and what it leaves behind for the requests after it.

Client sessions and conversation roots, `previous_response_id` continuations, nested threads, agent
names, tenants, key hashes, the account a proven rotating credential acts for.

Its face is `__all__`, each name imported on first use (`runguard.proxy.core.faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runguard.proxy.core.faces import lazy_face

if TYPE_CHECKING:
    from runguard.proxy.runs.accounts import Accounts
    from runguard.proxy.runs.continuation import Pending
    from runguard.proxy.runs.identity import Found, RunIdentity
    from runguard.proxy.runs.keys import KeyHasher, RedactingFormatter, load_salt, redact
    from runguard.proxy.runs.tenants import Tenants, state_id

HOMES = {
    "Accounts": "accounts",
    "Found": "identity",
    "KeyHasher": "keys",
    "Pending": "continuation",
    "RedactingFormatter": "keys",
    "RunIdentity": "identity",
    "Tenants": "tenants",
    "load_salt": "keys",
    "redact": "keys",
    "state_id": "tenants",
}
__all__ = [
    "Accounts",
    "Found",
    "KeyHasher",
    "Pending",
    "RedactingFormatter",
    "RunIdentity",
    "Tenants",
    "load_salt",
    "redact",
    "state_id",
]

__getattr__ = lazy_face(__name__, HOMES)
