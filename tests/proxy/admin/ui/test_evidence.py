"""Trip evidence as HTML: any JSON shown generically, the documented keys specially, everything escaped."""

from __future__ import annotations

from runguard.proxy.admin.ui.evidence import evidence_html


def test_special_keys_are_drawn_for_what_they_mean() -> None:
    html = evidence_html(
        {
            "summary": "search returned the same result 3 times",
            "agents": ["triage", "billing", "triage"],
            "calls": [{"tool": "search", "arguments": '{"q": "refund"}', "result": "no results"}] * 3,
            "series": {"input_tokens": [1000, 2500, 6000]},
            "batch": ["lookup a", "lookup b"],
            "threshold": 3,
        }
    )
    assert html.index("search returned the same result") < html.index("Agents")  # the summary first
    assert "triage → billing → triage" in html
    assert html.count("<tr><td><code>search</code></td>") == 3  # one table row per repeated call
    assert "<polyline" in html and "input_tokens" in html  # a numeric series as a line
    assert "<ol><li><code>lookup a</code></li>" in html and "threshold" in html


def test_unknown_shapes_render_generically_and_escaped() -> None:
    html = evidence_html({"calls": 7, "nested": {"hashes": ["a1", "a1"], "ratio": 0.8}, "<b>": "<script>x</script>"})
    assert "<script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html and "&lt;b&gt;" in html
    assert "<dt>ratio</dt><dd>0.8</dd>" in html and "Calls" in html
    assert "no evidence recorded" in evidence_html({})
