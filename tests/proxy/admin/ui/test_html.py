"""The dashboard's HTML builders: every text a client chose is escaped wherever it lands (text, attribute,
URL), markup built here passes once, and figures are written the way every view writes them."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from runguard.proxy.admin.ui.html import (
    BASE,
    Html,
    attr,
    badge,
    dl,
    esc,
    href,
    join,
    layout,
    link,
    pager,
    run_href,
    short,
    table,
    tag,
    tokens,
    usd,
    when,
)

XSS = '<script>alert("rg")</script>&"\''


class Elements(HTMLParser):
    """The start tags of a fragment, with their attributes."""

    def __init__(self, markup: str) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(markup)

    def handle_starttag(self, name: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((name, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_text_is_escaped_and_markup_passes_once() -> None:
    assert esc(XSS) == "&lt;script&gt;alert(&quot;rg&quot;)&lt;/script&gt;&amp;&quot;&#x27;"
    assert esc(None) == "" and esc(3) == "3"
    made = tag("b", "x")
    assert esc(made) is made
    assert join(["<i>", tag("i", "ok")], " ") == "&lt;i&gt; <i>ok</i>"


def test_client_text_stays_text_in_content_and_attributes() -> None:
    markup = tag("span", XSS, title=XSS, data_run=XSS)
    parsed = Elements(markup)
    assert parsed.found == [("span", {"title": XSS, "data-run": XSS})]  # one element, the text intact
    assert "".join(parsed.text) == XSS
    assert attr(XSS) == esc(XSS)


def test_attribute_names_follow_html_and_absent_values_are_left_out() -> None:
    assert tag("label", "x", class_="a", for_="b", aria_label="c", hidden=None) == (
        '<label class="a" for="b" aria-label="c">x</label>'
    )


def test_urls_quote_run_ids_and_keep_only_set_query_values() -> None:
    assert run_href("a/b?c#d") == f"{BASE}/runs/a%2Fb%3Fc%23d"
    assert href("runs", status="tripped", key="", detector=None, page=2) == f"{BASE}/runs?status=tripped&page=2"
    assert href("trips") == f"{BASE}/trips"
    parsed = Elements(link(href("runs", key='"><script>'), "k"))
    assert parsed.found == [("a", {"href": f"{BASE}/runs?key=%22%3E%3Cscript%3E"})]


def test_tables_align_numbers_and_say_when_empty() -> None:
    filled = table(["run", "requests"], [[XSS, 12]], caption="runs")
    assert '<td class="num">12</td>' in filled and "<caption>runs</caption>" in filled
    assert "<script>" not in filled
    assert '<td colspan="2" class="empty">nothing to show</td>' in table(["a", "b"], [])
    assert dl({"reason": XSS}) == f"<dl><dt>reason</dt><dd>{esc(XSS)}</dd></dl>"


@pytest.mark.parametrize(("value", "shown"), [(None, "$0.0000"), (0.00042, "$0.0004"), (1234.5, "$1,234.5000")])
def test_money_has_four_decimals(value: float | None, shown: str) -> None:
    assert usd(value) == shown


def test_times_counts_statuses_and_keys() -> None:
    assert when(None) == "" and when(0) == ""
    assert when(1_800_000_000) == '<time datetime="2027-01-15T08:00:00+00:00">2027-01-15 08:00:00</time>'
    assert tokens(None) == "0" and tokens(1234567) == "1,234,567"
    assert badge("tripped:spiral") == '<span class="badge badge-tripped">tripped:spiral</span>'
    assert short("k_0123456789abcdef") == '<abbr title="k_0123456789abcdef">k_0123456789…</abbr>'
    assert short("k_01") == '<abbr title="k_01">k_01</abbr>'


def test_the_pager_keeps_the_other_filters() -> None:
    middle = pager(2, True, "runs", {"key": "k&1", "status": ""})
    links = dict((a.get("rel"), a.get("href")) for name, a in Elements(middle).found if name == "a")
    assert links == {"prev": f"{BASE}/runs?key=k%261&page=1", "next": f"{BASE}/runs?key=k%261&page=3"}
    first = pager(1, False, "trips", {})
    assert "rel=" not in first and "page 1" in first


def test_the_layout_marks_the_current_page_and_escapes_the_title() -> None:
    page = layout(XSS, "trips", Html("<p>body</p>"), refresh=5)
    assert page.startswith("<!doctype html>") and "<script>alert" not in page
    assert f'<a href="{BASE}/trips" aria-current="page">Trips</a>' in page
    assert f'<a href="{BASE}/runs">Runs</a>' in page
    assert '<meta http-equiv="refresh" content="5">' in page
    assert 'http-equiv="refresh"' not in layout("t", "", Html(""))
