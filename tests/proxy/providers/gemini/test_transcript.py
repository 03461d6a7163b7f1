"""Gemini's transcript: `systemInstruction` (either spelling), then the parts after the model's last turn."""

from __future__ import annotations

from runguard.proxy.providers.gemini.transcript import transcript


def test_the_system_instruction_then_results_texts_and_other_parts_after_the_model_s_turn() -> None:
    body = {
        "system_instruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Time?"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "now", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "now", "response": {"t": 12}}}, {"text": "And?"}]},
            {"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": ""}}, "junk"]},
        ],
    }
    lines = [(line.kind, line.title, line.text) for line in transcript(body, True)]
    assert lines == [
        ("system", "system", "Be brief."),
        ("tool result", "now", '{"t":12}'),
        ("user", "user", "And?"),
        ("user", "user", "[inlineData]"),
    ]
    assert transcript({"systemInstruction": "Plain.", "contents": None}, True)[0].text == "Plain."
