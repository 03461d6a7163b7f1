"""The container image and the compose example, checked as files (no Docker here): the image installs
the lock file, which is in step with pyproject's runtime dependencies; state survives a recreated
container; the health check follows the port; nginx passes WebSockets and keeps a run on one replica;
no secret has a placeholder default."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "examples" / "compose"
# The image's interpreter and platform (Dockerfile: python:3.11-slim), for dependency markers.
IMAGE = {**default_environment(), "python_version": "3.11", "sys_platform": "linux", "platform_system": "Linux"}


def _locked() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for text in (ROOT / "requirements.lock").read_text().splitlines():
        line = text.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: {line!r} is not pinned with =="
            pins[canonicalize_name(name.split("[")[0])] = Version(version.split(";")[0].strip())
    return pins


def _runtime() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in project["dependencies"]]


def test_the_lock_file_pins_every_runtime_dependency_at_a_version_pyproject_allows() -> None:
    pins = _locked()
    for requirement in _runtime():
        if requirement.marker is not None and not requirement.marker.evaluate(IMAGE):
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, f"requirements.lock does not name {requirement.name}: regenerate it (see its header)"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"requirements.lock pins {requirement.name}=={pins[name]}, outside pyproject's {requirement}"
        )


def _instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def test_the_image_installs_the_lock_file_and_its_own_package_without_other_dependencies() -> None:
    runs = [args for op, args in _instructions() if op == "RUN"]
    installs = [part.strip() for args in runs for part in args.split("&&") if "pip install" in part]
    assert installs[0] == "pip install -r requirements.lock"
    assert all(part == "pip install -r requirements.lock" or "--no-deps" in part for part in installs), installs


def _kernels() -> list[str]:
    """The C extensions setup.py builds, by module name."""
    spec = importlib.util.spec_from_file_location("runguard_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not as __main__: only its lists are defined
    return [extension.name for extension in module.KERNELS]


def test_the_image_builds_every_c_kernel_and_keeps_no_compiler() -> None:
    (build,) = [args for op, args in _instructions() if op == "RUN" and "pip install --no-deps ." in args]
    steps = [part.strip() for part in build.split("&&")]
    install = steps.index("pip install --no-deps .")
    assert any("apt-get install" in step and "gcc" in step and "libxxhash-dev" in step for step in steps[:install])
    assert any("apt-get purge" in step and "gcc" in step for step in steps[install:])
    (check,) = [step for step in steps[install:] if step.startswith('python -c "import ')]
    imported = check.split('"')[1].removeprefix("import ").split(", ")
    kernels = _kernels()
    assert len(kernels) == 4 and sorted(imported) == sorted(kernels)  # a kernel left out fails the build


def test_the_salt_and_the_sqlite_store_live_on_a_volume() -> None:
    instructions = _instructions()
    env = " ".join(args for op, args in instructions if op == "ENV")
    home = re.search(r"RUNGUARD_HOME=(\S+)", env)
    assert home is not None
    volumes = [args for op, args in instructions if op == "VOLUME"]
    assert any(home.group(1) in volume for volume in volumes), volumes
    assert f"sqlite+aiosqlite:///{home.group(1)}/" in env  # the record store is under it too


def test_the_health_check_asks_the_port_the_proxy_listens_on() -> None:
    (check,) = [args for op, args in _instructions() if op == "HEALTHCHECK"]
    assert "RUNGUARD_PORT" in check and "8787" not in check


def _nginx(text: str) -> list[Any]:
    """nginx.conf as nested [directive, args, children] lists (enough of its grammar for this file)."""
    tokens = re.findall(r"'[^']*'|\"[^\"]*\"|[{};]|[^\s{};]+", re.sub(r"#[^\n]*", "", text))
    root: list[Any] = []
    stack, words = [root], []
    for token in tokens:
        if token == ";":
            stack[-1].append([words[0], words[1:], []])
            words = []
        elif token == "{":
            block: list[Any] = [words[0], words[1:], []]
            stack[-1].append(block)
            stack.append(block[2])
            words = []
        elif token == "}":
            stack.pop()
        else:
            words.append(token)
    return root


def _find(blocks: list[Any], name: str) -> list[Any]:
    found = []
    for block in blocks:
        if block[0] == name:
            found.append(block)
        found += _find(block[2], name)
    return found


def test_nginx_passes_websocket_upgrades_and_keeps_a_run_on_one_replica() -> None:
    conf = _nginx((COMPOSE / "nginx.conf").read_text())
    (upstream,) = _find(conf, "upstream")
    assert ["hash", ["$http_x_run_id", "consistent"], []] in upstream[2]
    (location,) = _find(conf, "location")
    directives = [(d[0], d[1]) for d in location[2]]
    assert ("proxy_http_version", ["1.1"]) in directives
    assert ("proxy_set_header", ["Upgrade", "$http_upgrade"]) in directives
    (connection,) = [args for name, args in directives if name == "proxy_set_header" and args[0] == "Connection"]
    (mapping,) = [m for m in _find(conf, "map") if m[1] == ["$http_upgrade", connection[1]]]
    values = {entry[0]: entry[1] for entry in mapping[2]}
    assert values["default"] == ["upgrade"]  # a WebSocket handshake keeps its Upgrade
    assert values["''"] in (["''"], ['""'])  # other requests: no Connection header, upstream keep-alive


def test_compose_starts_with_no_placeholder_secret() -> None:
    compose = yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())
    services = compose["services"]
    proxies = [s for name, s in services.items() if name.startswith("proxy")]
    assert proxies
    for service in proxies:
        env = service["environment"]
        for name in ("RUNGUARD_KEY_SALT", "RUNGUARD_ADMIN_TOKEN"):
            assert re.fullmatch(rf"\$\{{{name}:\?[^}}]+\}}", env[name]), (name, env[name])  # required, no default
        assert "${POSTGRES_PASSWORD:?" in env["RUNGUARD_DATABASE_URL"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    assert "change-me" not in (COMPOSE / "docker-compose.yml").read_text().split("services:")[1]


def test_the_admin_api_answers_to_the_names_the_gateway_and_prometheus_use() -> None:
    """The admin API refuses a Host that does not name the proxy (DNS rebinding): nginx sends its upstream's
    name and Prometheus each replica's, so those must be in `server.admin_hosts`, or metrics get 403."""
    compose = yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())
    conf = _nginx((COMPOSE / "nginx.conf").read_text())
    (upstream,) = _find(conf, "upstream")
    scrape = yaml.safe_load((COMPOSE / "prometheus" / "prometheus.yml").read_text())
    targets = {t.split(":")[0] for job in scrape["scrape_configs"] for c in job["static_configs"] for t in c["targets"]}
    for name, service in compose["services"].items():
        if name.startswith("proxy"):
            allowed = {host.strip() for host in service["environment"]["RUNGUARD_SERVER__ADMIN_HOSTS"].split(",")}
            assert upstream[1][0] in allowed and targets <= allowed, (allowed, upstream[1], targets)
