from __future__ import annotations

from pathlib import Path

from runguard.proxy.runs.keys import ANONYMOUS, KeyHasher, load_salt


def test_hash_is_salted_stable_and_never_contains_the_key() -> None:
    a = KeyHasher(b"salt-a")
    b = KeyHasher(b"salt-b")
    assert a.hash("sk-secret") == a.hash("sk-secret")
    assert a.hash("sk-secret") != b.hash("sk-secret")
    assert "secret" not in a.hash("sk-secret")
    assert a.hash(None) == ANONYMOUS


def test_salt_is_created_once_and_private(tmp_path: Path) -> None:
    first = load_salt(None, tmp_path)
    assert load_salt(None, tmp_path) == first
    assert (tmp_path / "salt").stat().st_mode & 0o777 == 0o600
    assert load_salt("configured", tmp_path) == b"configured"


def test_a_key_with_bytes_that_are_not_utf8_is_hashed_not_refused() -> None:
    hasher = KeyHasher(b"salt")
    odd = b"sk-\xff".decode("utf-8", "surrogateescape")  # as aiohttp hands such a header over
    assert hasher.hash(odd).startswith("k_")
    assert hasher.hash(odd) != hasher.hash(b"sk-\xfe".decode("utf-8", "surrogateescape"))
