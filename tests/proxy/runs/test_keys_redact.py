"""Masking keys in text RunGuard keeps or logs (`keys.redact`, `credentials.every_value`, `RedactingFormatter`)."""

from __future__ import annotations

import logging
import sys

from multidict import CIMultiDict

from runguard.proxy.providers.credentials import every_value
from runguard.proxy.runs.keys import RedactingFormatter, redact


def test_key_shaped_words_are_masked() -> None:
    text = (
        "Incorrect API key provided: sk-proj-abcDEF123_456-xyz. Also sk-ant-api03-AAAAbbbbCCCC and "
        "AIzaSyA1234567890abcdefghijk, ?key=opaque-value&x=1, Bearer tok3n.value"
    )
    masked = redact(text)
    for secret in ("sk-proj-abcDEF123_456-xyz", "sk-ant-api03-AAAAbbbbCCCC", "AIzaSyA1234567890", "opaque-value"):
        assert secret not in masked
    assert "tok3n.value" not in masked
    assert masked.startswith("Incorrect API key provided: <redacted>.") and "&x=1" in masked


def test_a_requests_own_credentials_are_masked_whatever_their_shape() -> None:
    assert redact("bad key corp-opaque-7781 given", ["corp-opaque-7781"]) == "bad key <redacted> given"
    assert redact("ask a question", ["a"]) == "ask a question"  # too short to mask by value
    assert redact("task-list and desk-lamp") == "task-list and desk-lamp"  # no key shape in ordinary words


def test_every_credential_of_a_request_is_collected() -> None:
    headers = CIMultiDict(
        {"Authorization": "Bearer sk-one", "x-goog-api-key": "AIza-two", "api-key": "three", "x-api-key": "four"}
    )
    query = CIMultiDict({"key": "five", "access_token": "six"})
    found = every_value(headers, query)
    assert set(found) >= {"Bearer sk-one", "sk-one", "AIza-two", "three", "four", "five", "six"}
    assert every_value(CIMultiDict(), CIMultiDict()) == ()


def test_the_log_formatter_masks_tracebacks_too() -> None:
    try:
        raise ValueError("cannot reach https://example.invalid/v1beta/models/m?key=AIzaSecretSecret123")
    except ValueError:
        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "failed: %s", ("sk-live-abcdefgh1234",), sys.exc_info()
        )
    line = RedactingFormatter("%(message)s").format(record)
    assert "AIzaSecretSecret123" not in line and "sk-live-abcdefgh1234" not in line and "ValueError" in line
