"""No secret leaves a recording: every line the corpus build writes is scrubbed of what looks like a
credential, and stays the JSON it was."""

from __future__ import annotations

import orjson

from bench.corpus.redact import scrub

SECRETS = [
    "sk-ant-api03-" + "Ab3_" * 10,
    "sk-proj-" + "x9Y" * 12,
    "sk-or-v1-" + "0f" * 24,
    "ghp_" + "a1B2" * 9,
    "github_pat_" + "11AB" * 10,
    "xoxb-1234567890-abcdefghij",
    "AKIA" + "ABCDEFGHIJKLMNOP",
    "AIza" + "Sy" + "x" * 33,
    "hf_" + "Q" * 34,
]
PRIVATE = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"


def test_every_kind_of_key_is_replaced_and_the_line_stays_json() -> None:
    output = "\n".join(f"KEY{i}={secret}" for i, secret in enumerate(SECRETS))
    record = {"request": {"messages": [{"role": "tool", "content": output + "\n" + PRIVATE}]}}
    headers = {"note": "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig'"}
    line = scrub(orjson.dumps([record, headers]))
    for secret in [*SECRETS, "b3BlbnNzaC1rZXktdjEAAAAA", "eyJhbGciOiJIUzI1NiJ9"]:
        assert secret.encode() not in line
    [kept, note] = orjson.loads(line)  # still valid JSON
    content = kept["request"]["messages"][0]["content"]
    assert content.count("[redacted]") == len(SECRETS) + 1 and content.startswith("KEY0=[redacted]\n")
    assert note == {"note": "curl -H 'Authorization: [redacted]'"}


def test_ordinary_text_is_left_alone() -> None:
    text = b'{"content": "pip install scikit-learn; task-1234; sk-short; the AKIA docs; hf_hub_download"}'
    assert scrub(text) == text
