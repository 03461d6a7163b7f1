from __future__ import annotations

import pytest

from runguard.proxy.guard.background import polled_id


@pytest.mark.parametrize(
    ("path", "found"),
    [
        ("/v1/responses/resp_1", "resp_1"),
        ("/v1/responses/resp_1/", "resp_1"),
        ("/openai/responses/resp_2", "resp_2"),  # Azure OpenAI's classic path (api-version in the query)
        ("/openai/v1/responses/resp_3", "resp_3"),  # Azure OpenAI's v1 path, with an api-version
        ("/v1/responses/resp_1/input_items", None),
        ("/v1/responses", None),
        ("/openai/deployments/d/responses/resp_1", None),
        ("/v1/chat/completions/chatcmpl_1", None),
    ],
)
def test_a_poll_names_the_response_it_reads(path: str, found: str | None) -> None:
    assert polled_id(path) == found
