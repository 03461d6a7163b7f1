"""`paths.canonical`: one spelling per path, or a refusal; `paths.upstream`: that spelling on the wire."""

from __future__ import annotations

import pytest

from runguard.proxy.providers.paths import canonical, upstream


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ("/v1/chat/completions", "/v1/chat/completions"),
        ("/v1/chat/completions?stream=1", "/v1/chat/completions"),
        ("/v1//chat/completions", "/v1/chat/completions"),
        ("//v1/chat/completions", "/v1/chat/completions"),
        ("/v1/models/../chat/completions", "/v1/chat/completions"),
        ("/v1/./chat/completions", "/v1/chat/completions"),
        ("/v1/chat/completions/", "/v1/chat/completions"),
        ("/v1beta/models/gemini-2.5-flash:generateContent/", "/v1beta/models/gemini-2.5-flash:generateContent"),
        ("/v1/chat/%63ompletions", "/v1/chat/completions"),
        ("/v1beta/models/g%3AgenerateContent", "/v1beta/models/g:generateContent"),
        ("/v1/files/a%20b", "/v1/files/a b"),
        ("/v1/files/%C3%A9", "/v1/files/\u00e9"),
        ("/.well-known/x", "/.well-known/x"),
        ("/", "/"),
    ],
)
def test_equivalent_spellings_read_as_one_path(raw: str, path: str) -> None:
    assert canonical(raw) == path


@pytest.mark.parametrize(
    "raw",
    [
        "/v1/chat/completions;x",
        "/v1/chat/completions;x=1/",
        "/v1/chat%2fcompletions",
        "/v1/chat%2Fcompletions",
        "/v1/models/%2e%2e/chat/completions",
        "/v1/models/%2E./chat/completions",
        "/v1/chat%5ccompletions",
        "/v1\\chat\\completions",
        "/v1/chat/completions%3bx",
        "/v1/%252e%252e/chat/completions",
        "/v1/chat/completions%00",
        "/v1/chat/completions%0a",
        "/v1/chat/completions#x",
        "/v1/chat/completions%23x",
        "/v1/chat/completions%",
        "/v1/chat/completions%g1",
        "/v1/files/%FF",
        "/v1/../../etc/passwd",
        "/..",
        "v1/chat/completions",
        "http://api.openai.com/v1/chat/completions",
    ],
)
def test_spellings_servers_read_differently_are_refused(raw: str) -> None:
    assert canonical(raw) is None


@pytest.mark.parametrize(
    ("path", "wire"),
    [
        ("/v1/chat/completions", "/v1/chat/completions"),
        ("/v1beta/models/g-2.5:streamGenerateContent", "/v1beta/models/g-2.5:streamGenerateContent"),
        ("/v1/files/a b", "/v1/files/a%20b"),
        ("/v1/files/\u00e9", "/v1/files/%C3%A9"),
        ("/v1/a?b", "/v1/a%3Fb"),
    ],
)
def test_the_wire_spelling_decodes_to_the_path(path: str, wire: str) -> None:
    assert upstream(path) == wire
    assert canonical(wire) == path
