"""The compose example's Grafana dashboard and Prometheus alert rules name only metrics the proxy exports.

A proxy with a store, OpenTelemetry export and labelled keys serves some
traffic (healthy runs and a runaway one that trips); every metric name and
every label selector in the dashboard's queries and the alert rules must be
in its `/runguard/metrics`, so a renamed metric breaks this test instead of
a panel. `promtool check rules` runs too when promtool is installed.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from runguard.proxy.runs.keys import KeyHasher
from tests.e2e import agents as loops
from tests.services import require_binary
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.proxy import settings_for, start_proxy
from tests.support.upstream import FakeUpstream

COMPOSE = Path(__file__).resolve().parents[2] / "examples" / "compose"
DASHBOARD = COMPOSE / "grafana" / "dashboards" / "runguard.json"
ALERTS = COMPOSE / "prometheus" / "alerts.yml"
METRIC = re.compile(r"\b(runguard_[a-z0-9_]+)\b(\{[^}]*\})?")
LABEL = re.compile(r"([a-z_]+)\s*=~?\s*\"")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def dashboard_queries() -> list[str]:
    def walk(panels: list[dict[str, Any]]) -> Iterator[str]:
        for panel in panels:
            yield from (target["expr"] for target in panel.get("targets", []))
            yield from walk(panel.get("panels", []))

    return list(walk(json.loads(DASHBOARD.read_text())["panels"]))


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


@pytest.fixture
async def scraped(upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[str]:
    """/runguard/metrics of a proxy with a store and span export, after healthy runs and a runaway one."""
    receiver = OtlpReceiver()
    await receiver.start_http()
    labelled = KeyHasher(b"test-salt").hash("sk-team-search")
    settings = settings_for(
        upstream.url,
        store={"database_url": f"sqlite+aiosqlite:///{tmp_path / 'records.db'}"},
        telemetry={"endpoint": receiver.http_url},
        guard={"key_labels": {labelled: "search-team"}},
    )
    proxy = await start_proxy(settings)
    try:
        for key in ("sk-team-search", "sk-someone-else"):
            upstream.script = loops.chat_script(steps=2)
            client = openai.AsyncOpenAI(base_url=proxy.url + "/v1", api_key=key, max_retries=0)
            await loops.chat_agent(client, loops.progressing_tool)
        upstream.script = loops.chat_script(steps=20)
        with pytest.raises(openai.RateLimitError):
            await loops.chat_agent(client, loops.soft_error_tool)
        await client.close()
        async with httpx.AsyncClient() as http:
            yield (await http.get(proxy.url + "/runguard/metrics")).text
    finally:
        await proxy.stop()
        await receiver.stop()


def exported(text: str) -> dict[str, set[str]]:
    """Every series name the exposition declares (with its type's suffixes) -> the label names it carries."""
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for suffix in SUFFIXES.get(family.type, ("",)):
            names.setdefault(family.name + suffix, set())
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


def test_the_rules_are_well_formed() -> None:
    rules = alert_rules()
    assert {"RunGuardBreakerStorm", "RunGuardRunStopped", "RunGuardUpstreamFailing"} <= {r["alert"] for r in rules}
    for rule in rules:
        assert rule["expr"].strip() and rule["labels"]["severity"] in ("info", "warning", "critical"), rule
        assert rule["annotations"]["summary"], rule


def test_the_dashboard_is_provisioned_against_the_provisioned_datasource() -> None:
    sources = yaml.safe_load((COMPOSE / "grafana/provisioning/datasources/datasources.yml").read_text())
    uids = {source["uid"] for source in sources["datasources"]}
    dashboard = json.loads(DASHBOARD.read_text())
    used = {p["datasource"]["uid"] for p in dashboard["panels"] if "datasource" in p}
    assert used and used <= uids
    provider = yaml.safe_load((COMPOSE / "grafana/provisioning/dashboards/dashboards.yml").read_text())
    compose = yaml.safe_load((COMPOSE / "observability.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./grafana/dashboards:{provider['providers'][0]['options']['path']}:ro" in mounts
    titles = {p["title"] for p in dashboard["panels"]}
    for needed in ("Requests per second", "Spend per hour by API key", "Trips by detector", "Proxy overhead"):
        assert needed in titles


async def test_every_metric_and_label_the_dashboard_and_rules_use_is_exported(scraped: str) -> None:
    names = exported(scraped)
    queries = dashboard_queries() + [rule["expr"] for rule in alert_rules()]
    assert len(queries) > 20
    missing, unlabelled = set(), set()
    for query in queries:
        for name, selector in METRIC.findall(query):
            if name not in names:
                missing.add(name)
                continue
            for label in LABEL.findall(selector or ""):
                if names[name] and label not in names[name]:
                    unlabelled.add(f"{name}{{{label}}}")
    assert not missing, f"not in /runguard/metrics: {sorted(missing)}"
    assert not unlabelled, f"labels not on these metrics: {sorted(unlabelled)}"
    # The traffic reached the panels that matter: spend by key label, trips and the cost they avoided.
    assert 'runguard_key_usd_total{key="search-team"}' in scraped
    assert 'runguard_key_usd_total{key="unlabelled"}' in scraped
    assert 'runguard_usd_avoided_total{detector="non_progress"}' in scraped


def test_promtool_accepts_the_rules() -> None:
    promtool = require_binary("promtool", "prometheus")
    checked = subprocess.run([promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
