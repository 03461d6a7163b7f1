from __future__ import annotations

import pytest
from pydantic import ValidationError

from runguard.config.settings import Settings
from runguard.proxy.runs.tenants import Tenants, split, state_id

A, B, C = "k_" + "a" * 16, "k_" + "b" * 16, "k_" + "c" * 16


def test_a_key_is_its_own_tenant_unless_a_group_names_it() -> None:
    tenants = Tenants({"research": [A, B]})
    assert (tenants.of(A), tenants.of(B), tenants.of(C)) == ("research", "research", C)
    assert Tenants({}).of(A) == A


def test_a_run_s_state_id_is_its_tenant_s_and_splits_back() -> None:
    assert state_id("research", "run/with/slashes") == "research/run/with/slashes"
    assert split(state_id(A, "run/with/slashes")) == (A, "run/with/slashes")
    assert state_id(A, "demo") != state_id(B, "demo")
    assert split("no-separator") is None


@pytest.mark.parametrize(
    ("tenants", "named"),
    [
        ({"k_team": [A]}, "k_team"),  # would read as a key hash
        ({"team one": [A]}, "team one"),
        ({"team": ["sk-raw-key"]}, "sk-raw-key"),  # a raw key, not its hash
        ({"one": [A], "two": [A]}, "two"),
    ],
)
def test_tenants_that_cannot_be_told_apart_fail_at_start_naming_the_value(
    tenants: dict[str, list[str]], named: str
) -> None:
    with pytest.raises(ValidationError, match=r"runs\.tenants") as caught:
        Settings.model_validate({"runs": {"tenants": tenants}})
    assert named in str(caught.value)
