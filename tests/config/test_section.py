"""What every settings section shares: unknown keys refused, values frozen, upstream URLs checked."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runguard.config.section import Section, http_url


class _Example(Section):
    name: str = "x"


def test_a_section_refuses_an_unknown_key_and_cannot_change() -> None:
    with pytest.raises(ValidationError, match="nmae"):
        _Example.model_validate({"nmae": "typo"})
    section = _Example()
    with pytest.raises(ValidationError):
        section.name = "y"


@pytest.mark.parametrize("url", ["ftp://host", "http://", "not a url", "http://[::1", "http://host:port"])
def test_an_upstream_url_must_be_http_with_a_host(url: str) -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        http_url(url)


def test_a_good_upstream_url_is_kept_as_given() -> None:
    assert http_url("https://api.example.com/v1") == "https://api.example.com/v1"
