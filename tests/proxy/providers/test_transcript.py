"""`transcript`: the shared reading of a message's content, the tail after the model's last turn, call names."""

from __future__ import annotations

from runguard.proxy.providers.transcript import after_last, names_of, text_of


def test_content_is_its_text_and_other_parts_are_named() -> None:
    assert text_of("hi") == "hi"
    assert text_of([{"type": "text", "text": "a"}, {"type": "image"}, "b"]) == "a\n[image]\nb"
    assert text_of(None) == "" and text_of({"x": 1}) == '{"x":1}'


def test_the_tail_is_what_follows_the_model_s_last_turn() -> None:
    items = [{"r": "u"}, {"r": "m"}, "junk", {"r": "u", "n": 2}]
    assert after_last(items, lambda item: item["r"] == "m") == [{"r": "u", "n": 2}]
    assert after_last(items[:1], lambda item: item["r"] == "m") == [{"r": "u"}]  # no model turn: all of it


def test_call_names_keep_only_string_pairs() -> None:
    assert names_of([("c1", "f"), (None, "g"), ("c2", 3)]) == {"c1": "f"}
