"""The provider seam holds: no module outside `proxy/providers/` imports a single provider's folder.

pyproject's `provider-seam` contract (`tests.support.seams.SealedSubpackages`, run by `lint-imports` in CI)
is checked here against the real import graph, and against the same graph with one forbidden import added,
so the lock is seen to catch what it forbids.
"""

from __future__ import annotations

import copy

import grimp
import pytest

from tests.support.seams import SealedSubpackages


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("runguard.proxy", "runguard.detectors", "runguard.config", cache_dir=None)


def _contract() -> SealedSubpackages:
    options = {"type": "sealed_subpackages", "container": "runguard.proxy.providers", "shared": ["common"]}
    return SealedSubpackages("seam", session_options={}, contract_options=options)


def test_the_core_reaches_every_provider_through_its_spec(graph: grimp.ImportGraph) -> None:
    check = _contract().check(graph, verbose=False)
    assert check.kept, check.metadata["broken"]
    sealed = {name.rpartition(".")[2] for name in check.metadata["sealed"]}
    assert {"anthropic", "gemini", "openai", "openai_chat", "openai_realtime", "openai_responses"} <= sealed
    assert "common" not in sealed


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("runguard.proxy.http.forward", "runguard.proxy.providers.gemini.replies"),
        ("runguard.proxy.guard.costs.tokens", "runguard.proxy.providers.openai"),
        ("runguard.detectors.spiral", "runguard.proxy.providers.anthropic.adapter"),
    ],
)
def test_an_import_of_a_provider_s_folder_from_outside_breaks_it(
    graph: grimp.ImportGraph, importer: str, imported: str
) -> None:
    leaky = copy.deepcopy(graph)
    leaky.add_import(importer=importer, imported=imported, line_number=1, line_contents="import")
    check = _contract().check(leaky, verbose=False)
    assert not check.kept
    assert [(found["importer"], found["imported"]) for found in check.metadata["broken"]] == [(importer, imported)]


def test_the_shared_modules_stay_open(graph: grimp.ImportGraph) -> None:
    open_ = copy.deepcopy(graph)
    for imported in ("runguard.proxy.providers.common.jsonish", "runguard.proxy.providers.spec"):
        open_.add_import(importer="runguard.proxy.http.forward", imported=imported, line_number=1, line_contents="")
    assert _contract().check(open_, verbose=False).kept
