"""A request that names an account (a Vertex AI project): the identity it acts under, and its proof.

See `runs.accounts`: a credential acts for the account its path names only once the upstream has accepted
it for that account. The handler asks `claim` before the guard (whose identity the request acts under), and
tells the claim the status of the upstream's answer once it has one (`answered`): a success proves the
credential for the account, a 401 or 403 withdraws a proof it had.
"""

from __future__ import annotations

from runguard.proxy.core.frozen import frozen
from runguard.proxy.providers import registry
from runguard.proxy.providers.routes import Route
from runguard.proxy.relay import ProxyContext
from runguard.proxy.runs import Accounts

_REFUSED = frozenset({401, 403})


@frozen
class Claim:
    """An account a request's path names, its credential's key hash, and the identity it acts under."""

    accounts: Accounts
    account: str
    credential: str
    acting: str

    @property
    def identity(self) -> str:
        """The account's own identity (what an allowlist or a tenant names, whatever the token)."""
        return self.accounts.identity(self.account)

    async def answered(self, status: int) -> None:
        """The upstream answered the request with `status`: prove the credential, or withdraw its proof."""
        proven = self.acting != self.credential
        if 200 <= status < 300 and not proven:
            await self.accounts.prove(self.credential, self.account)
        elif status in _REFUSED and proven:
            await self.accounts.disprove(self.credential, self.account)


async def claim(ctx: ProxyContext, route: Route, key_hash: str, has_key: bool) -> Claim | None:
    """The account claim of a request (None when its path names no account, or it carries no credential)."""
    spec = registry.provider_named(route.provider)
    if spec is None or spec.account is None or ctx.accounts is None or not has_key:
        return None
    account = spec.account(route.upstream_path)
    if account is None:
        return None
    acting = await ctx.accounts.acting(key_hash, account)
    return Claim(ctx.accounts, account, key_hash, acting)
