"""The Kubernetes examples are valid manifests and use only settings, variables and flags the proxy has.

Each manifest is checked, with no cluster and no network, against the Kubernetes schemas that
kubernetes-validate bundles (strict: an unknown field fails), at the oldest version with native
sidecars (1.29) and the newest the package knows. Then every `RUNGUARD_*` variable the containers set
must load (`load_settings` refuses unknown ones), every flag of `runguard-proxy serve` they pass must
exist, and the ConfigMaps' runguard.yaml must be a valid configuration.
"""

from __future__ import annotations

import copy
import re
import socket
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import typer.main
import yaml

from runguard.config.loader import load_settings
from runguard.proxy.cli.main import new_app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kubernetes"
MANIFESTS = sorted(EXAMPLES.glob("*.yaml"))
VERSIONS = ("1.29.0", kubernetes_validate.latest_version())
# Values for the variables the manifests take from Secrets (what the cluster would put there).
SECRETS = {
    "POSTGRES_PASSWORD": "pg-secret-0123456789abcdef",
    "RUNGUARD_KEY_SALT": "k" * 64,
    "RUNGUARD_ADMIN_TOKEN": "t" * 48,
}


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def runguard_containers() -> list[dict[str, Any]]:
    return [
        c
        for path in MANIFESTS
        for doc in documents(path)
        for c in containers(doc)
        if c["image"].startswith("runguard-proxy")
    ]


def test_there_are_a_sidecar_and_a_gateway_example() -> None:
    assert {path.name for path in MANIFESTS} >= {"sidecar.yaml", "gateway.yaml"}
    (sidecar,) = [c for c in runguard_containers() if c.get("restartPolicy") == "Always"]  # a native sidecar
    assert (
        sidecar["readinessProbe"]["httpGet"]["path"]
        == sidecar["livenessProbe"]["httpGet"]["path"]
        == "/runguard/health"
    )
    gateway = [doc for doc in documents(EXAMPLES / "gateway.yaml")]
    kinds = {doc["kind"] for doc in gateway}
    assert kinds >= {"Deployment", "Service", "StatefulSet", "Ingress", "ConfigMap"}
    (ingress,) = [doc for doc in gateway if doc["kind"] == "Ingress"]
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/upstream-hash-by"] == "$http_x_run_id"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_manifest_is_valid_against_the_kubernetes_schemas(
    path: Path, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def offline(*args: object) -> None:
        raise AssertionError("the validator tried the network")

    monkeypatch.setattr(socket.socket, "connect", offline)  # the bundled schemas only
    for doc in documents(path):
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_validator_would_catch_a_broken_manifest() -> None:
    doc = next(d for d in documents(EXAMPLES / "sidecar.yaml") if d["kind"] == "Deployment")
    broken = copy.deepcopy(doc)
    broken["spec"]["template"]["spec"]["initContainers"][0]["restartPolicy"] = ["Always"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[0], strict=True)
    misspelt = copy.deepcopy(doc)
    misspelt["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelt, VERSIONS[0], strict=True)


def _environ(container: dict[str, Any]) -> dict[str, str]:
    """The container's variables as the kubelet would set them (`$(NAME)` expanded, Secrets filled in)."""
    found: dict[str, str] = {}
    for entry in container.get("env", []):
        value = entry.get("value", SECRETS.get(entry["name"], "")) if "valueFrom" in entry else entry["value"]
        found[entry["name"]] = re.sub(r"\$\((\w+)\)", lambda m: found.get(m[1], ""), str(value))
    return found


@pytest.mark.parametrize("container", runguard_containers(), ids=lambda c: c["name"])
def test_every_runguard_variable_they_set_is_a_setting_the_proxy_loads(container: dict[str, Any]) -> None:
    environ = {name: value for name, value in _environ(container).items() if name.startswith("RUNGUARD_")}
    assert environ and set(SECRETS) & set(environ) <= set(environ)
    settings = load_settings(environ=environ).settings  # an unknown RUNGUARD_* variable or a bad value raises
    assert settings.server.port == 8787


def _serve_options() -> set[str]:
    command: Any = typer.main.get_command(new_app())
    serve = command.commands["serve"]  # a click group (typer's own copy of click)
    return {option for param in serve.params for option in getattr(param, "opts", [])}


@pytest.mark.parametrize("container", runguard_containers(), ids=lambda c: c["name"])
def test_every_flag_they_pass_to_serve_exists_and_the_config_they_mount_is_valid(
    container: dict[str, Any], tmp_path: Path
) -> None:
    args = [*container.get("command", []), *container.get("args", [])]
    assert args[:2] == ["runguard-proxy", "serve"]
    flags = [arg for arg in args if arg.startswith("--")]
    assert flags and set(flags) <= _serve_options()
    config = args[args.index("--config") + 1]
    mount = next(m for m in container["volumeMounts"] if config.startswith(m["mountPath"] + "/"))
    source = next(
        doc
        for path in MANIFESTS
        for doc in documents(path)
        if doc["kind"] == "ConfigMap"
        and any(
            v.get("name") == mount["name"] and v.get("configMap", {}).get("name") == doc["metadata"]["name"]
            for v in _volumes_of(container)
        )
    )
    written = tmp_path / "runguard.yaml"
    written.write_text(source["data"][Path(config).name])
    load_settings(config_file=written, environ=_environ(container) | {"RUNGUARD_HOME": str(tmp_path)})


def _volumes_of(container: dict[str, Any]) -> list[dict[str, Any]]:
    for path in MANIFESTS:
        for doc in documents(path):
            if container in containers(doc):
                return list(doc["spec"]["template"]["spec"].get("volumes", []))
    return []
