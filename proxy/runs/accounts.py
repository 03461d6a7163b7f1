"""Which account a rotating credential acts for, once its upstream has accepted it for that account.

Vertex AI's clients send OAuth access tokens that expire within the hour; a tenant that was the token would
begin new runs, a new daily budget and fresh breakers at every refresh. So a request whose path names an
account (its Vertex AI project: `ProviderSpec.account`) acts as that account, under one identity that
outlives its tokens (`identity`: a key hash of the account's name), but only with proof: a credential acts
for an account once the upstream has answered it with a success for a request naming that account
(`prove`). Until then it acts as itself (its own key hash, as any key), so a client with no valid token for
a project can neither read, count against, trip nor reset that project's runs: the path alone proves
nothing. A credential the upstream later refuses (401, 403) loses its proof (`disprove`).

Proofs are kept in the state backend (shared by replicas) under the credential's key hash, never the
credential itself, for an hour (`PROOF_SECONDS`, an access token's lifetime). A state that does not answer
proves nothing (the request acts as its credential: fail open, never as another account).
"""

from __future__ import annotations

import logging

from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.runs.keys import KeyHasher
from runguard.proxy.state import StateBackend

PROOF_SECONDS = 3600.0
ACCOUNT_PREFIX = "account:"  # what an account's identity hashes: `runguard-proxy key-hash account:<project>`
_PROVEN = "proven"
log = logging.getLogger("runguard.proxy")


def _entry(key_hash: str, account: str) -> str:
    return f"proof:{key_hash}:{account}"


class Accounts:
    """Proofs that a credential (by its key hash) acts for an account, in the state backend."""

    def __init__(self, state: StateBackend, hasher: KeyHasher, seconds: float = PROOF_SECONDS) -> None:
        self._state = state
        self._hasher = hasher
        self._seconds = seconds

    def identity(self, account: str) -> str:
        """The key hash an account acts under (`k_...`, like a key's: allowlists and tenants name it)."""
        return self._hasher.hash(ACCOUNT_PREFIX + account)

    async def acting(self, key_hash: str, account: str) -> str:
        """The identity a request with the credential `key_hash` acts under for `account`: the account's once
        the credential is proven for it, else the credential's own."""
        try:
            proven = await self._state.recall(_entry(key_hash, account)) == _PROVEN
        except StateUnavailable:
            proven = False
        return self.identity(account) if proven else key_hash

    async def prove(self, key_hash: str, account: str) -> None:
        """The upstream accepted `key_hash` for `account`: its next requests act as the account."""
        try:
            await self._state.remember(_entry(key_hash, account), _PROVEN, self._seconds)
        except StateUnavailable:
            log.warning("could not keep a credential's proof for its account (the state backend is unavailable)")

    async def disprove(self, key_hash: str, account: str) -> None:
        """The upstream refused `key_hash` for `account` (401, 403): it acts as itself again."""
        try:
            await self._state.remember(_entry(key_hash, account), "refused", self._seconds)
        except StateUnavailable:
            log.warning("could not drop a credential's proof for its account (the state backend is unavailable)")
