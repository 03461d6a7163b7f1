"""`digest`: the content hash every detector's state holds, shared by replicas."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runguard.proxy.core.events import MAX_DIGEST_BYTES, digest


def test_digest_is_the_same_in_another_process() -> None:
    # Replicas share state through Redis: a hash that changed per process (like hash()) would split runs.
    code = 'from runguard.proxy.core.events import digest; print(digest(\'search_web\\x00{"q": "p99"}\', 8))'
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert other.stdout.strip() == digest('search_web\x00{"q": "p99"}', 8)


@pytest.mark.parametrize("size", [1, 2, 4, 5, 8, 10, MAX_DIGEST_BYTES])
def test_digest_is_size_bytes_of_hex(size: int) -> None:
    found = digest("a tool result", size)
    assert len(found) == size * 2
    int(found, 16)


def test_digest_of_text_and_of_its_utf8_bytes_agree_and_content_tells_apart() -> None:
    text = "Zürich 10.50 \U0001f680"
    assert digest(text) == digest(text.encode("utf-8"))
    assert digest(text) != digest(text + " ")
    assert digest("ab", 4) == digest("ab", 8)[:8]  # a shorter digest is a prefix: sizes stay comparable


def test_a_large_body_hashes_in_full() -> None:
    body = b"x" * 300_000
    assert digest(body) != digest(body[:-1] + b"y")


@pytest.mark.parametrize("size", [0, MAX_DIGEST_BYTES + 1])
def test_digest_size_out_of_range_is_refused(size: int) -> None:
    with pytest.raises(ValueError, match="digest size"):
        digest("x", size)
