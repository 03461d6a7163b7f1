from __future__ import annotations

from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.runs.accounts import Accounts
from runguard.proxy.runs.keys import KeyHasher
from runguard.proxy.state.memory import MemoryState

TOKEN, OTHER = "k_" + "1" * 16, "k_" + "2" * 16


def _accounts(clock: list[float] | None = None) -> Accounts:
    now = clock or [0.0]
    return Accounts(MemoryState(clock=lambda: now[0]), KeyHasher(b"salt"))


async def test_a_credential_acts_as_itself_until_proven_then_as_its_account() -> None:
    accounts = _accounts()
    assert await accounts.acting(TOKEN, "acme") == TOKEN
    await accounts.prove(TOKEN, "acme")
    assert await accounts.acting(TOKEN, "acme") == accounts.identity("acme")
    assert await accounts.acting(OTHER, "acme") == OTHER  # another token proves nothing by the first's proof
    assert await accounts.acting(TOKEN, "rival") == TOKEN  # a proof is for one account


async def test_two_tokens_of_one_project_share_one_identity() -> None:
    accounts = _accounts()
    await accounts.prove(TOKEN, "acme")
    await accounts.prove(OTHER, "acme")
    assert await accounts.acting(TOKEN, "acme") == await accounts.acting(OTHER, "acme") == accounts.identity("acme")
    assert accounts.identity("acme").startswith("k_") and accounts.identity("acme") != accounts.identity("rival")


async def test_a_refusal_withdraws_a_proof_and_proofs_expire_with_the_token() -> None:
    clock = [0.0]
    accounts = _accounts(clock)
    await accounts.prove(TOKEN, "acme")
    await accounts.disprove(TOKEN, "acme")
    assert await accounts.acting(TOKEN, "acme") == TOKEN
    await accounts.prove(OTHER, "acme")
    clock[0] = 3601.0
    assert await accounts.acting(OTHER, "acme") == OTHER


class _Down(MemoryState):
    async def recall(self, name: str) -> str | None:
        raise StateUnavailable("down")

    async def remember(self, name: str, value: str, ttl: float) -> None:
        raise StateUnavailable("down")


async def test_a_state_that_does_not_answer_proves_nothing() -> None:
    accounts = Accounts(_Down(), KeyHasher(b"salt"))
    await accounts.prove(TOKEN, "acme")  # logged, not raised
    await accounts.disprove(TOKEN, "acme")
    assert await accounts.acting(TOKEN, "acme") == TOKEN
