"""The Helm chart's static checks (`make chart-lint` runs the first three from the shell):

- `helm lint --strict` of the defaults and of every overlay;
- `helm template ... | kubernetes-validate --strict` against the Kubernetes schemas;
- bad values refused by values.schema.json or by the templates, with a clear message;
- values.schema.json's `config` keys against the services' settings (pydantic models);
- README.md's table against values.yaml (every value documented, none invented);
- what the rendered manifests must hold: security on by default, non-root read-only
  containers, service tokens, probes, the bookies' volumes and identity.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tomllib
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml

from magnetar.auditor.config import AuditorConfig
from magnetar.bookie.config import BookieConfig
from magnetar.broker.config import BrokerConfig
from magnetar.gateway.config import GatewayConfig

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "magnetar"
OVERLAYS = REPO / "deploy" / "helm" / "overlays"
HELM = REPO / "build" / "tools" / "helm"
KUBERNETES_VALIDATE = Path(sys.executable).parent / "kubernetes-validate"
KUBE_VERSIONS = ["1.30", "1.37"]

ALL_ON = ["dlqReplay.enabled=true", "dlqReplay.job.namespace=public/default", "networkPolicy.enabled=true",
          "metrics.serviceMonitor.enabled=true", "gateway.ingress.enabled=true", "broker.autoscaling.enabled=true",
          "broker.pdb.enabled=true", "auditor.pdb.enabled=true", "gateway.pdb.enabled=true",
          "dlqReplay.pdb.enabled=true", "metrics.grafanaDashboards.enabled=true", "metrics.prometheusRules.enabled=true"]
VARIANTS: dict[str, list[str]] = {
    "defaults": [],
    "minimal": ["-f", str(OVERLAYS / "minimal.yaml")],
    "production": ["-f", str(OVERLAYS / "production.yaml")],
    "external-zookeeper": ["-f", str(OVERLAYS / "external-zookeeper.yaml")],
    "everything-on": [arg for s in ALL_ON for arg in ("--set", s)],
}
SERVICE_CONFIGS = {"bookie": BookieConfig, "broker": BrokerConfig, "auditor": AuditorConfig, "gateway": GatewayConfig}
# Settings the chart itself sets (from auth.*, tls.*, global.*, the pod's ports and volumes):
# values.schema.json keeps them out of <component>.config.
CHART_MANAGED = {
    "zookeeper", "zk_root", "host", "port", "protocol_port", "protocol_tls_port", "session_port", "advertised_address", "metrics_port", "cluster_name",
    "data_dir", "journal_dir", "authentication_enabled", "authorization_enabled", "token_algorithm",
    "token_secret_key_file", "token_public_key_file", "superuser_roles", "broker_client_auth_token",
    "broker_client_auth_token_file", "tls_enabled", "tls_cert_file", "tls_key_file", "tls_trust_certs_file",
    "tls_require_client_cert", "tls_client_enabled", "crash_point", "authentication_providers",
    "anonymous_user_role", "basic_auth_conf", "proxy_roles",
}


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    assert HELM.exists(), f"{HELM} is missing: run `make setup`"
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=60)


def template(*args: str) -> str:
    out = helm("template", "magnetar", str(CHART), "--namespace", "magnetar", *args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def objects(*args: str) -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all(template(*args)) if o]


def pod_specs(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    specs = {}
    for o in objs:
        if o["kind"] in ("Deployment", "StatefulSet"):
            specs[o["metadata"]["name"]] = o["spec"]["template"]["spec"]
        elif o["kind"] == "CronJob":
            specs[o["metadata"]["name"]] = o["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return specs


def service_toml(objs: list[dict[str, Any]], component: str) -> dict[str, Any]:
    cm = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == f"magnetar-{component}")
    return tomllib.loads(cm["data"][f"{component}.toml"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_helm_lint_strict(variant: str) -> None:
    out = helm("lint", "--strict", str(CHART), *VARIANTS[variant])
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[WARNING]" not in out.stdout and "[ERROR]" not in out.stdout, out.stdout


@pytest.mark.parametrize("variant", VARIANTS)
def test_manifests_pass_kubernetes_validate_strict(variant: str) -> None:
    manifests = template(*VARIANTS[variant])
    for version in KUBE_VERSIONS:
        out = subprocess.run([str(KUBERNETES_VALIDATE), "--strict", "--quiet", "-k", version, "-"],
                             input=manifests, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, f"Kubernetes {version}:\n{out.stdout}{out.stderr}"
        # Only the Prometheus operator's ServiceMonitor and PrometheusRule (CRDs) have no schema there.
        unknown = [line for line in (out.stdout + out.stderr).splitlines()
                   if "Couldn't find schema" in line and "ServiceMonitor" not in line and "PrometheusRule" not in line]
        assert not unknown, unknown


BAD_VALUES = [
    (["broker.replicas=-1"], "broker.replicas: Must be greater than or equal to 1"),
    (["broker.replicas=two"], "broker.replicas: Invalid type. Expected: integer, given: string"),
    (["brokr.replicas=3"], "Additional property brokr is not allowed"),
    (["broker.config.flush_interval_s=1"], "broker.config: Additional property flush_interval_s is not allowed"),
    (["bookie.config.flush_interval_s=fast"], "bookie.config.flush_interval_s: Invalid type"),
    (["broker.config.port=7000"], "broker.config: Additional property port is not allowed"),
    (["auth.authentication.algorithm=RS256"], "auth.authentication.algorithm"),
    (["bookie.antiAffinity=sometimes"], "bookie.antiAffinity"),
    (["bookie.persistence.journal.size=lots"], "bookie.persistence.journal.size"),
    (["dlqReplay.job.olderThan=15 minutes"], "dlqReplay.job.olderThan"),
    (["metrics.port=6650"], "metrics.port"),
    (["metrics.port=6660"], "metrics.port"),  # the brokers' gRPC port
    (["zookeeper.replicas=2"], "a ZooKeeper ensemble needs an odd number of servers"),
    (["auth.authentication.enabled=false"], "auth.authorization.enabled needs auth.authentication.enabled"),
    (["tls.enabled=true"], "tls.enabled needs a certificate Secret for the bookie"),
    (["auth.authentication.tlsClientCertificates=true"], "tlsClientCertificates needs auth.authentication.enabled"),
    (["dlqReplay.enabled=true"], "needs exactly one of dlqReplay.job.dlqTopic"),
    (["dlqReplay.enabled=true", "dlqReplay.job.topic=t"], "dlqReplay.job.topic needs dlqReplay.job.subscription"),
    (["bookie.replicas=1"], "broker.config.ensemble_size is 2 (default 2) but bookie.replicas is 1"),
    (["broker.config.write_quorum=3"], "ensemble_size >= write_quorum >= ack_quorum, got 2, 3, 2"),
]


@pytest.mark.parametrize(("sets", "message"), BAD_VALUES, ids=[" ".join(s) for s, _ in BAD_VALUES])
def test_bad_values_are_refused(sets: list[str], message: str) -> None:
    out = helm("template", "magnetar", str(CHART), *[a for s in sets for a in ("--set", s)])
    assert out.returncode != 0, f"{sets} was accepted"
    assert message in out.stderr, out.stderr
    assert "panic" not in out.stderr and "goroutine" not in out.stderr, out.stderr


def test_schema_config_keys_are_the_services_settings() -> None:
    """A key a service does not know would stop it at start (its settings forbid extras);
    the schema refuses it at `helm install` instead. This fails when a setting is added to
    or removed from a service without the schema (deploy/helm/magnetar/values.schema.json)."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    types = {bool: "boolean", int: "integer", float: "number", str: "string"}
    for component, config_cls in SERVICE_CONFIGS.items():
        config = schema["properties"][component]["properties"]["config"]
        assert config["additionalProperties"] is False
        want = {k for k in config_cls.model_fields if k not in CHART_MANAGED}
        assert set(config["properties"]) == want, (
            f"{component}.config in values.schema.json: missing {sorted(want - set(config['properties']))}, "
            f"unknown {sorted(set(config['properties']) - want)}")
        for key, prop in config["properties"].items():
            annotation = config_cls.model_fields[key].annotation
            if typing.get_origin(annotation) is typing.Literal:  # a choice of strings: the schema's enum
                assert (prop["type"], prop.get("enum")) == ("string", list(typing.get_args(annotation))), (component, key)
                continue
            assert prop["type"] == types.get(annotation, "array"), (component, key, prop, annotation)


# Maps a user fills with keys of their own: documented as one value.
OPEN_MAPS = {"config", "nodeSelector", "affinity", "podAnnotations", "podSecurityContext", "securityContext",
             "resources", "annotations", "labels", "podLabels"}


def _leaves(node: Any, prefix: str = "") -> set[str]:
    if isinstance(node, dict) and node and prefix.rsplit(".", 1)[-1] not in OPEN_MAPS:
        out: set[str] = set()
        for key, value in node.items():
            out |= _leaves(value, f"{prefix}.{key}" if prefix else key)
        return out
    return {prefix}


def test_readme_documents_every_value() -> None:
    wanted = _leaves(yaml.safe_load((CHART / "values.yaml").read_text()))
    section = (CHART / "README.md").read_text().split("\n## Values\n", 1)[1].split("\n## ", 1)[0]
    documented = {line.split("`")[1] for line in section.splitlines() if line.startswith("| `")}
    assert wanted - documented == set(), f"values without a README row: {sorted(wanted - documented)}"
    assert documented - wanted == set(), f"README rows of no value: {sorted(documented - wanted)}"


def test_security_is_on_by_default() -> None:
    objs = objects()
    for component in ("bookie", "broker", "auditor", "gateway"):
        toml = service_toml(objs, component)
        assert toml["authentication_enabled"] is True
        assert toml["token_secret_key_file"] == "/var/run/secrets/magnetar/key/secret.key"
        assert {"magnetar-broker", "magnetar-auditor", "magnetar-gateway", "admin"} <= set(toml["superuser_roles"])
        if component != "bookie":
            assert toml["broker_client_auth_token_file"] == "/var/run/magnetar/token/service.token"
    assert service_toml(objs, "broker")["authorization_enabled"] is True
    secret = next(o for o in objs if o["kind"] == "Secret" and o["metadata"]["name"] == "magnetar-token-key")
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    key_file = base64.b64decode(secret["data"]["secret.key"])
    assert len(base64.b64decode(key_file)) == 64  # base64 text of 64 random bytes: HS512 too
    assert template().count("secret.key:") == 1
    specs = pod_specs(objs)
    for name in ("magnetar-broker", "magnetar-auditor", "magnetar-gateway"):
        init = specs[name]["initContainers"][0]
        assert init["name"] == "service-token"
        role = name.removeprefix("magnetar-")
        assert f"magnetar tokens create --secret-key file:///var/run/secrets/magnetar/key/secret.key --algorithm HS256 --subject magnetar-{role} >" in init["args"][0]


def test_every_container_is_non_root_and_read_only() -> None:
    objs = objects(*VARIANTS["everything-on"])
    for name, spec in pod_specs(objs).items():
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        volumes = {v["name"]: v for v in spec["volumes"]}
        for c in [*spec.get("initContainers", []), *spec["containers"]]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"], (name, c["name"])
            assert sc["readOnlyRootFilesystem"] is True, (name, c["name"])
            tmp = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
            assert tmp and "emptyDir" in volumes[tmp[0]["name"]], (name, c["name"])
        assert spec.get("automountServiceAccountToken") is (name == "magnetar-dlq-replay"), name
        # Service links would put MAGNETAR_BROKER_PORT=tcp://... (the Service magnetar-broker)
        # in every pod: the brokers' own setting of that name.
        assert spec["enableServiceLinks"] is False, name
    executor = yaml.safe_load(next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "magnetar-dlq-replay")["data"]["executor.yaml"])
    assert executor["spec"]["automountServiceAccountToken"] is False
    assert executor["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_probes_follow_tls() -> None:
    plain = pod_specs(objects())
    tls = pod_specs(objects("-f", str(OVERLAYS / "production.yaml")))
    for name, port in (("magnetar-bookie", 3181), ("magnetar-broker", 6660), ("magnetar-auditor", 3182)):
        container = plain[name]["containers"][0]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"] == {"port": port}
            command = tls[name]["containers"][0][probe]["exec"]["command"]
            assert command[:3] == ["magnetar", "health", f"localhost:{port}"], command
            assert "--tls-trust-certs-file" in command
    assert plain["magnetar-gateway"]["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert tls["magnetar-gateway"]["containers"][0]["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"


@pytest.mark.parametrize("tls", [False, True])
def test_brokers_serve_pulsars_protocol_on_pulsars_ports(tls: bool) -> None:
    """pulsar:// on 6650 (and pulsar+ssl:// on 6651 with TLS) on the pods, the broker
    Service and through the NetworkPolicy; the gRPC door on 6660, the SDK's framed session on 6661."""
    objs = objects(*(["-f", str(OVERLAYS / "production.yaml")] if tls else ["--set", "networkPolicy.enabled=true"]))
    container = pod_specs(objs)["magnetar-broker"]["containers"][0]
    wanted = {"grpc": 6660, "pulsar": 6650, "session": 6661} | ({"pulsar-tls": 6651} if tls else {})
    assert {p["name"]: p["containerPort"] for p in container["ports"] if p["name"] != "metrics"} == wanted
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["MAGNETAR_BROKER_PORT"], env["MAGNETAR_BROKER_PROTOCOL_PORT"], env["MAGNETAR_BROKER_PROTOCOL_TLS_PORT"],
            env["MAGNETAR_BROKER_SESSION_PORT"]) == ("6660", "6650", "6651", "6661")
    service = next(o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == "magnetar-broker")
    ports = {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"] if p["name"] != "metrics"}
    assert ports == {name: (port, name) for name, port in wanted.items()}
    policy = next(o for o in objs if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "magnetar-broker")
    assert sorted(p["port"] for p in policy["spec"]["ingress"][0]["ports"]) == sorted(wanted.values())
    # The settings the broker reads: the config file does not set them (the environment does).
    from magnetar.broker.config import BrokerConfig

    assert BrokerConfig.load(port=6660, protocol_port=6650, protocol_tls_port=6651).protocol_port == 6650


def test_bookies_keep_their_identity_and_volumes() -> None:
    objs = objects()
    sts = next(o for o in objs if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "magnetar-bookie")
    assert [c["metadata"]["name"] for c in sts["spec"]["volumeClaimTemplates"]] == ["journal", "ledgers"]
    spec = sts["spec"]["template"]["spec"]
    init = spec["initContainers"][0]
    assert init["command"] + init["args"] == ["magnetar", "shell", "bookieformat", "--config", "/etc/magnetar/bookie.toml"]
    env = {e["name"]: e for e in spec["containers"][0]["env"]}
    assert env["MAGNETAR_BOOKIE_ADVERTISED_ADDRESS"]["value"] == (
        "$(POD_NAME).magnetar-bookie.$(POD_NAMESPACE).svc.cluster.local:$(MAGNETAR_BOOKIE_PORT)")
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert {e["name"]: e for e in init["env"]}["MAGNETAR_BOOKIE_ADVERTISED_ADDRESS"] == env["MAGNETAR_BOOKIE_ADVERTISED_ADDRESS"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" in spec["affinity"]["podAntiAffinity"]
    headless = next(o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == "magnetar-bookie")
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
    broker_env = {e["name"]: e for e in pod_specs(objs)["magnetar-broker"]["containers"][0]["env"]}
    assert broker_env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert broker_env["MAGNETAR_BROKER_ADVERTISED_ADDRESS"]["value"] == "$(POD_IP):$(MAGNETAR_BROKER_PORT)"


def test_overlays() -> None:
    minimal = objects(*VARIANTS["minimal"])
    for o in minimal:
        if o["kind"] in ("StatefulSet", "Deployment"):
            assert o["spec"]["replicas"] == 1, o["metadata"]["name"]
    broker = service_toml(minimal, "broker")
    assert (broker["ensemble_size"], broker["write_quorum"], broker["ack_quorum"]) == (1, 1, 1)
    assert broker["authentication_enabled"] is True

    external = objects(*VARIANTS["external-zookeeper"])
    assert not [o for o in external if "zookeeper" in o["metadata"]["name"]]
    connect = yaml.safe_load((OVERLAYS / "external-zookeeper.yaml").read_text())["zookeeper"]["external"]["connect"]
    for component in SERVICE_CONFIGS:
        assert service_toml(external, component)["zookeeper"] == connect

    production = objects(*VARIANTS["production"])
    kinds = {o["kind"] for o in production}
    assert {"HorizontalPodAutoscaler", "NetworkPolicy", "ServiceMonitor", "PodDisruptionBudget", "Ingress", "CronJob"} <= kinds
    assert all(service_toml(production, c)["tls_enabled"] is True for c in SERVICE_CONFIGS)
    assert not any(o["kind"] == "Deployment" and o["metadata"]["name"] == "magnetar-broker" and "replicas" in o["spec"]
                   for o in production)  # the HPA owns the broker's replicas


@pytest.mark.parametrize("component", ["broker", "auditor"])
def test_tls_advertises_the_pod_dns_name(component: str, tmp_path: Path) -> None:
    """With TLS, brokers and auditors advertise <a-b-c-d>.<namespace>.pod.<domain>: the
    rendered shell command, run with a stand-in `magnetar` that prints what it got."""
    spec = pod_specs(objects("-f", str(OVERLAYS / "production.yaml")))[f"magnetar-{component}"]
    container = spec["containers"][0]
    assert container["command"] == ["/bin/sh", "-c"]
    fake = tmp_path / "magnetar"
    fake.write_text(f'#!/bin/sh\necho "$MAGNETAR_{component.upper()}_ADVERTISED_ADDRESS $*"\n')
    fake.chmod(0o755)
    port = {"broker": "6660", "auditor": "3182"}[component]
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}", "POD_IP": "10.244.3.17", "POD_NAMESPACE": "prod",
           f"MAGNETAR_{component.upper()}_PORT": port}
    out = subprocess.run([*container["command"], *container["args"]], env=env, capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"10-244-3-17.prod.pod.cluster.local:{port} {component} --config /etc/magnetar/{component}.toml"


def test_the_anonymous_role_and_client_certificate_roles_reach_the_brokers_and_the_gateway() -> None:
    """auth.authentication.anonymousUserRole and tlsClientCertificates become the services'
    settings, and the services accept what the chart renders."""
    sets = ["auth.authentication.anonymousUserRole=guest", "auth.authentication.tlsClientCertificates=true",
            "tls.requireClientCert=true"]
    objs = objects("-f", str(OVERLAYS / "production.yaml"), *[a for s in sets for a in ("--set", s)])
    for component in ("broker", "gateway"):
        toml = service_toml(objs, component)
        assert (toml["anonymous_user_role"], toml["authentication_providers"]) == ("guest", ["token", "tls"])
        SERVICE_CONFIGS[component].model_validate(toml)  # a setting the service refuses would stop it
    assert service_toml(objs, "broker")["proxy_roles"] == ["magnetar-gateway"]
    for component in ("bookie", "auditor"):  # superusers only: no anonymous role there
        assert "anonymous_user_role" not in service_toml(objs, component)
    defaults = service_toml(objects(), "broker")
    assert defaults["anonymous_user_role"] == "" and "authentication_providers" not in defaults


def test_the_charts_dashboards_and_alerts_are_the_repos() -> None:
    """The chart reads its copies (.Files.Get reaches only files inside the chart)."""
    repo = {p.name: p.read_bytes() for p in (REPO / "deploy" / "grafana" / "dashboards").glob("*.json")}
    chart = {p.name: p.read_bytes() for p in (CHART / "dashboards").glob("*.json")}
    assert sorted(repo) == ["auditor.json", "bookies.json", "cluster.json", "topics.json"]
    assert chart == repo, "copy deploy/grafana/dashboards/*.json to deploy/helm/magnetar/dashboards/"
    rules = REPO / "deploy" / "prometheus" / "magnetar-alerts.yaml"
    assert (CHART / "rules" / "magnetar-alerts.yaml").read_bytes() == rules.read_bytes(), (
        "copy deploy/prometheus/magnetar-alerts.yaml to deploy/helm/magnetar/rules/"
    )


def test_grafana_dashboards_and_prometheus_rule() -> None:
    assert not [o for o in objects() if o["kind"] == "PrometheusRule" or "-dashboard-" in o["metadata"]["name"]]
    objs = objects("--set", "metrics.grafanaDashboards.enabled=true", "--set", "metrics.prometheusRules.enabled=true",
                   "--set", "metrics.grafanaDashboards.annotations.grafana_folder=Magnetar")
    maps = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ConfigMap" and "-dashboard-" in o["metadata"]["name"]}
    assert sorted(maps) == [f"magnetar-dashboard-{n}" for n in ("auditor", "bookies", "cluster", "topics")]
    for name, cm in maps.items():
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"  # the Grafana sidecar's default label
        assert cm["metadata"]["annotations"] == {"grafana_folder": "Magnetar"}
        (key, text), = cm["data"].items()
        source = REPO / "deploy" / "grafana" / "dashboards" / f"{name.rsplit('-', 1)[1]}.json"
        assert json.loads(text) == json.loads(source.read_text())
        variables = [v["name"] for v in json.loads(text)["templating"]["list"]]
        assert "datasource" in variables
    (rule,) = [o for o in objs if o["kind"] == "PrometheusRule"]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert sorted(alerts) == ["BookKeeperUnderReplicatedLedgers", "BookieReadOnly", "PulsarBacklogGrowing",
                              "PulsarBrokerLeaseLost"]
    for alert in alerts.values():
        assert alert["for"] and alert["labels"]["severity"] in ("warning", "critical") and alert["annotations"]["summary"]
    assert rule["spec"] == yaml.safe_load((REPO / "deploy" / "prometheus" / "magnetar-alerts.yaml").read_text())
