"""The deployment example (deploy/): the Dockerfile and the Kubernetes manifests parse, carry
what a cluster needs, keep secrets out of the files, and configure a server PocketMCP
accepts (HTTP beyond loopback only with a token, the index in Postgres)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from pocketmcp.config import load
from pocketmcp.errors import ConfigError

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SECRET_NAMES = ("POCKETMCP_TOKEN", "DATABASE_URL")


def _manifests() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            assert isinstance(doc, dict), path
            for field in ("apiVersion", "kind", "metadata"):
                assert field in doc, f"{path.name}: no {field}"
            assert doc["metadata"].get("name"), f"{path.name}: no metadata.name"
            found[doc["kind"]] = doc
    return found


def _container() -> dict[str, Any]:
    deployment = _manifests()["Deployment"]
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def _env(container: dict[str, Any], secrets: dict[str, str]) -> dict[str, str]:
    """The container's environment, with secret references resolved from `secrets`."""
    out = {}
    for entry in container["env"]:
        if "valueFrom" in entry:
            ref = entry["valueFrom"]["secretKeyRef"]
            out[entry["name"]] = secrets[ref["key"]]
        else:
            out[entry["name"]] = str(entry["value"])
    return out


def test_the_manifests_hold_a_deployment_a_service_and_a_secret_that_fit_together() -> None:
    found = _manifests()
    assert set(found) == {"Deployment", "Service", "Secret"}
    deployment, service, secret = found["Deployment"], found["Service"], found["Secret"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    container = _container()
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] in ports
    assert service["spec"]["type"] == "ClusterIP"  # not exposed beyond the cluster by itself
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["path"].startswith("/health") and get["port"] in ports
    refs = {e["valueFrom"]["secretKeyRef"]["key"] for e in container["env"] if "valueFrom" in e}
    assert refs <= set(secret["stringData"])
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def test_no_secret_is_written_in_the_files() -> None:
    container = _container()
    for entry in container["env"]:
        if entry["name"] in SECRET_NAMES:
            assert "value" not in entry and "secretKeyRef" in entry["valueFrom"], entry
    assert all(value == "" for value in _manifests()["Secret"]["stringData"].values())
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    for name in (*SECRET_NAMES, "PASSWORD"):
        assert not re.search(rf"^\s*(ENV|ARG)\b.*{name}", dockerfile, re.M | re.I), name
    assert "postgresql://" not in "".join(
        str(e.get("value", "")) for e in container["env"])


def test_the_deployment_configures_an_http_server_on_postgres_that_needs_its_token() -> None:
    container = _container()
    filled = {"token": "t0ken-chosen-by-the-operator",
              "database-url": "postgresql://pocketmcp:pw@db.example:5432/pocketmcp"}
    config = load({}, environ=_env(container, filled))
    assert (config.store.store, config.serve.transport, config.serve.host) == (
        "postgres", "http", "0.0.0.0")
    assert config.serve.token is not None and config.store.database_url is not None
    assert config.serve.port == container["ports"][0]["containerPort"]
    probe_host = container["readinessProbe"]["httpGet"]["httpHeaders"][0]["value"]
    assert probe_host == f"localhost:{config.serve.port}"
    # As shipped (the Secret's values empty), the server refuses to start.
    with pytest.raises(ConfigError):
        load({}, environ=_env(container, {"token": "", "database-url": ""}))


def test_the_dockerfile_runs_the_http_mode_on_postgres_as_a_user() -> None:
    lines = [line.strip() for line in (DEPLOY / "Dockerfile").read_text(
        encoding="utf-8").replace("\\\n", " ").splitlines()
             if line.strip() and not line.strip().startswith("#")]
    instructions = [line.split(None, 1)[0].upper() for line in lines]
    assert instructions[0] == "FROM" and "CMD" in instructions
    user = next(line.split()[1] for line in lines if line.upper().startswith("USER "))
    assert user not in ("root", "0")
    env = dict(pair.split("=", 1) for line in lines if line.upper().startswith("ENV ")
               for pair in shlex.split(line[4:]))
    assert env["STORE"] == "postgres" and env["MCP_TRANSPORT"] == "http"
    exposed = next(line.split()[1] for line in lines if line.upper().startswith("EXPOSE "))
    assert exposed == env["MCP_PORT"]
    assert '".[postgres]"' in " ".join(lines)
    # Without a token, listening beyond loopback is refused.
    with pytest.raises(ConfigError):
        load({}, environ={**env, "DATABASE_URL": "postgresql://u@h/db"})
