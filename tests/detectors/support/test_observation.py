"""Observations of a text agent read as the agent reads them: the lines the harness frames every output with
(a status footer, a prompt, an exit-code header) are learned from the run and left out; a labelled footer
is the harness's whatever its value; a repeated observation never looks new; long numbers count as
the same; what is stored is hashes."""

from __future__ import annotations

from runguard.detectors.support.observation import key, pack_edges, read, unpack_edges
from runguard.detectors.support.shingles import sample, shingles


def footer(folder: str) -> str:
    return f"(Open file: n/a)\n(Current directory: /repo/{folder})\nshell-$"


def run(*outputs: str) -> list[list[int]]:
    """The kept samples of a run's observations, each told with the edges stored after the one before."""
    stored: object = None
    samples = []
    for output in outputs:
        kept, _, stored = read([output], stored)
        samples.append(kept)
    return samples


def test_a_footer_common_to_the_last_observations_is_left_out() -> None:
    outputs = [f"{listing}\n{footer(folder)}" for listing, folder in (("src/", "a"), ("main/", "a/src"))]
    outputs.append(f"java/\n{footer('a/src/main')}")
    *_, third = run(*outputs)
    # Only the listing is left: the footer sat at the end of both observations before, its directory aside.
    assert third == sample(shingles(["java/"], frozenset()))


def test_the_first_observations_are_read_whole() -> None:
    first, second = run(f"src/\n{footer('a')}", f"main/\n{footer('a/src')}")
    assert len(first) > 1 and len(second) > 1  # two observations before are needed to tell a footer


def test_a_repeated_observation_never_looks_new() -> None:
    error = "\n".join(f"line {n}: the same failure, repeated word for word as before" for n in range(30))
    samples = run(error, error, error, error)
    # Its edge lines look like the harness's by the third time and are left out, nothing else comes in.
    assert set(samples[2]) < set(samples[0]) and samples[3] == samples[2]


def test_long_numbers_count_as_the_same() -> None:
    one, two = run("bash: line 17871: cd: nowhere: No such file", "bash: line 17886: cd: nowhere: No such file")
    assert one == two
    assert key("Found 12 matches") != key("Found 13 matches")  # short numbers are content


def test_edges_are_stored_as_hashes_of_at_most_two_observations() -> None:
    stored: object = None
    for n in range(4):
        *_, stored = read([f"secret output {n}\n{footer('x')}"], stored)
    assert isinstance(stored, str) and "secret" not in stored and "repo" not in stored
    assert len(unpack_edges(stored)) == 2
    assert pack_edges(unpack_edges(stored)) == stored
    assert unpack_edges(None) == [] and unpack_edges(3) == []
