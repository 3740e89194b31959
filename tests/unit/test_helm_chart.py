"""The Helm chart (deploy/helm/govindex) lints, renders offline with the Helm engine of
helm-python-sdk, and every object it renders is a valid Kubernetes object
(kubernetes-validate, strict) that runs a real govindex command, hardened, probed, with
its secrets where they belong; the plain manifest deploy/kubernetes/govindex.yaml is its
fresh rendering."""

from __future__ import annotations

import base64
import importlib.util
import json
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

# The Helm v4 engine as a library, offline (helm-python-sdk), and the Kubernetes schemas
# (kubernetes-validate): dev dependencies.
import helm_python
import jsonschema
import pytest
import typer
import yaml
from kubernetes_validate import utils as kubernetes_validate

ROOT = Path(__file__).resolve().parents[2]
HELM = ROOT / "deploy" / "helm"
CHART = HELM / "govindex"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
KUBE_VERSION = "1.31"  # the oldest minor the chart is checked against (kubernetes-validate)
# Custom resources: no schema ships with kubernetes-validate; checked for shape only.
CRDS = {
    ("monitoring.coreos.com/v1", "PodMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("keda.sh/v1alpha1", "ScaledObject"),
}
KINDS = ("indexer", "deletions", "purger", "cdc", "webhooks", "reader", "admin")
PLACEHOLDER = re.compile(r"(?i)(change|replace)[-_ ]?me")
UID = 10001

# Chart-kept secrets (`value`), the way a trial install gives them; Kafka over SASL_SSL
# with its password in a Secret of its own and its CA mounted in every pod.
KAFKA_CA = "/etc/govindex/kafka-ca"
TRIAL: dict[str, Any] = {
    "config": {
        "kafkaBootstrap": "kafka:9093",
        "settings": {
            "GOVINDEX_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "GOVINDEX_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "GOVINDEX_KAFKA_SASL_USERNAME": "govindex",
            "GOVINDEX_KAFKA_SSL_CAFILE": f"{KAFKA_CA}/ca.crt",
            "GOVINDEX_OPENSEARCH_USERNAME": "govindex",
        },
    },
    "extraVolumes": [{"name": "kafka-ca", "secret": {"secretName": "kafka-ca"}}],
    "extraVolumeMounts": [{"name": "kafka-ca", "mountPath": KAFKA_CA, "readOnly": True}],
    "keda": {"enabled": True, "authenticationRef": "kafka-sasl"},
    "secrets": {
        "opensearchPassword": {"value": "os-basic-auth-5"},
        "kafkaSaslPassword": {"existingSecret": "kafka-sasl", "existingSecretKey": "password"},
        "pgDsn": {"value": "postgresql://govindex:pg-secret-1@pg:5432/govindex"},
        "opensearchUrl": {"value": "https://govindex:os-secret-2@opensearch:9200"},
        "redisUrl": {"value": "redis://:redis-secret-3@redis:6379/0"},
        "readTokens": {
            "value": {
                "rag-app-token-0123456789abcdef": {
                    "name": "rag-app",
                    "tenants": ["acme"],
                    "principals": ["user:*"],
                    "purposes": ["support"],
                }
            }
        },
        "adminToken": {"value": "admin-token-0123456789abcdef"},
        "webhookSecrets": {"values": {"HANDBOOK_WEBHOOK_SECRET": "webhook-secret-4"}},
    },
    "reconcile": {"sources": ["handbook"]},
    "networkPolicy": {"enabled": True},
}


def load_render() -> ModuleType:
    spec = importlib.util.spec_from_file_location("govindex_deploy_render", HELM / "render.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


render = load_render()
Objects = list[dict[str, Any]]


def rendered(values: dict[str, Any]) -> Objects:
    return [obj for _, _, obj in render.documents(render.render_templates(values))]


def values_file(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = render.load_values([HELM / name])
    return loaded


@pytest.fixture(scope="module")
def renders() -> dict[str, Objects]:
    """Every values set the chart ships or documents, rendered once."""
    return {
        "example": rendered(values_file("values-example.yaml")),
        "production": rendered(values_file("values-production.yaml")),
        "trial": rendered(TRIAL),
    }


def deployed(name: str) -> set[str]:
    """The worker kinds a render runs: the deletion lane has pods of its own only where
    its values say so (production)."""
    return set(KINDS) if name == "production" else set(KINDS) - {"deletions"}


def of_kind(objects: Objects, kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def named(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in of_kind(objects, kind) if o["metadata"]["name"] == name]
    return found


def pod_specs(objects: Objects) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(owner, pod spec) of every Deployment, Job and CronJob."""
    for obj in objects:
        if obj["kind"] in ("Deployment", "Job"):
            yield obj, obj["spec"]["template"]["spec"]
        elif obj["kind"] == "CronJob":
            yield obj, obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def component(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["labels"]["app.kubernetes.io/component"])


def secret_refs(container: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """env name -> (Secret, key) of every secretKeyRef."""
    return {
        e["name"]: (e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
        for e in container.get("env") or []
        if "secretKeyRef" in e.get("valueFrom", {})
    }


def render_error(values: dict[str, Any]) -> str:
    with pytest.raises(helm_python.HelmError) as failed:
        render.render_templates(values)
    return str(failed.value)


# -- the chart itself ------------------------------------------------------------------


def test_chart_metadata_follows_the_project_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "govindex"
    assert chart["appVersion"] == project["version"]
    with helm_python.Chart.load(CHART) as loaded:
        assert loaded.metadata["appVersion"] == project["version"]


@pytest.mark.parametrize("values", [None, "values-example.yaml", "values-production.yaml"])
def test_the_chart_lints_clean(values: str | None) -> None:
    given = values_file(values) if values else None
    report = helm_python.lint(CHART, given, strict=values is not None)
    assert report["errors"] == [], report
    # Severity 1 is information ("icon is recommended"); 2 and up are warnings and errors.
    assert [m for m in report["messages"] if m["severity"] >= 2] == [], report


def test_values_schema_is_valid_and_accepts_every_shipped_values_file() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    validator.validate(defaults)
    for name in ("values-example.yaml", "values-production.yaml"):
        merged = render.load_values([CHART / "values.yaml", HELM / name])
        validator.validate(merged)
    # The same source-id and webhook-variable shapes govindex itself accepts.
    from govindex.core.records import SLUG, GitSettings

    sources = schema["properties"]["reconcile"]["properties"]["sources"]["items"]["oneOf"]
    assert sources[0]["pattern"] == SLUG
    webhook_env = GitSettings.model_json_schema()["properties"]["webhook_secret_env"]
    names = schema["properties"]["secrets"]["properties"]["webhookSecrets"]["properties"]
    assert names["values"]["propertyNames"]["pattern"] == webhook_env["anyOf"][0]["pattern"]


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"workers": {"indexer": {"replica": 3}}}, "additional properties 'replica'"),
        ({"config": {"settings": {"GOVINDEX_PG_DSN": "x"}}}, "GOVINDEX_PG_DSN"),
        ({"secrets": {"adminToken": {"value": "short"}}}, "minLength"),
        ({"secrets": {"webhookSecrets": {"values": {"GOVINDEX_X": "s"}}}}, "GOVINDEX_X"),
        ({"reconcile": {"sources": ["-not-a-source"]}}, "sources"),
    ],
)
def test_the_schema_refuses_what_govindex_would_not_run(
    values: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(helm_python.HelmValuesError, match=re.escape(complaint)):
        render.render_templates(values)


# -- what an install needs --------------------------------------------------------------


def test_the_default_values_stop_with_a_clear_message() -> None:
    assert "config.kafkaBootstrap: set the Kafka bootstrap servers" in render_error({})
    message = render_error({"config": {"kafkaBootstrap": "kafka:9092"}})
    assert "secrets.pgDsn: name an existing Secret holding GOVINDEX_PG_DSN" in message
    assert "secrets.pgDsn.existingSecret" in message and "secrets.pgDsn.value" in message


@pytest.mark.parametrize(
    "slot", ["pgDsn", "opensearchUrl", "redisUrl", "readTokens", "adminToken", "webhookSecrets"]
)
def test_each_secret_is_required_while_what_reads_it_runs(slot: str) -> None:
    values = json.loads(json.dumps(TRIAL))
    values["secrets"][slot] = {}
    assert f"secrets.{slot}" in render_error(values)
    # ... and not once nothing reads it.
    lifted = {
        "redisUrl": {"secrets": {"redisUrl": {"enabled": False}}},
        "readTokens": {"workers": {"reader": {"enabled": False}}},
        "adminToken": {"workers": {"admin": {"enabled": False}}},
        "webhookSecrets": {"workers": {"webhooks": {"enabled": False}}},
    }
    if slot in lifted:
        render._merge(values, lifted[slot])
        assert rendered(values)


def test_jwts_alone_satisfy_the_read_api_but_need_issuer_and_audience() -> None:
    values = json.loads(json.dumps(TRIAL))
    values["secrets"]["readTokens"] = {}
    values["workers"] = {"reader": {"jwt": {"jwks": "https://idp.example/jwks.json"}}}
    assert "workers.reader.jwt.issuer" in render_error(values)
    values["workers"]["reader"]["jwt"].update(issuer="https://idp.example", audience="govindex")
    reader = named(rendered(values), "Deployment", "govindex-reader")
    (container,) = reader["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GOVINDEX_READ_JWKS"] == "https://idp.example/jwks.json"
    assert "GOVINDEX_READ_TOKENS" not in env


@pytest.mark.parametrize(
    "secret",
    [
        {"pgDsn": {"value": "postgresql://govindex:CHANGE-ME@pg/govindex"}},
        {"adminToken": {"value": "change_me_change_me_change_me"}},
        {"webhookSecrets": {"values": {"HANDBOOK_WEBHOOK_SECRET": "REPLACE-ME"}}},
    ],
)
def test_placeholder_secrets_are_refused(secret: dict[str, Any]) -> None:
    values = json.loads(json.dumps(TRIAL))
    values["secrets"].update(secret)
    assert "placeholder text" in render_error(values)


# -- every object -------------------------------------------------------------------------


def test_every_rendered_object_is_a_valid_kubernetes_object(renders: dict[str, Objects]) -> None:
    for name, objects in renders.items():
        assert objects, name
        seen = set()
        for obj in objects:
            key = (obj["kind"], obj["metadata"]["name"])
            assert key not in seen, (name, key)
            seen.add(key)
            assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", obj["metadata"]["name"])
            if (obj["apiVersion"], obj["kind"]) in CRDS:
                assert isinstance(obj["metadata"].get("labels"), dict), key
                assert isinstance(obj.get("spec"), dict) and obj["spec"], key
                continue
            try:
                kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
            except kubernetes_validate.ValidationError as invalid:
                path = ".".join(str(p) for p in invalid.path)
                pytest.fail(f"{name}: {key} at {path}: {invalid.message}")


def test_every_pod_is_hardened_and_writes_only_to_emptydirs(renders: dict[str, Objects]) -> None:
    for name, objects in renders.items():
        pods = list(pod_specs(objects))
        assert len(pods) >= 8, name
        for owner, pod in pods:
            where = (name, owner["kind"], owner["metadata"]["name"])
            assert pod["automountServiceAccountToken"] is False, where
            # Service links would set GOVINDEX_ADMIN_PORT=tcp://... from the admin Service.
            assert pod["enableServiceLinks"] is False, where
            security = pod["securityContext"]
            assert security["runAsNonRoot"] is True and security["runAsUser"] == UID, where
            assert security["seccompProfile"] == {"type": "RuntimeDefault"}, where
            (container,) = pod["containers"]
            c = container["securityContext"]
            assert c["readOnlyRootFilesystem"] is True, where
            assert c["allowPrivilegeEscalation"] is False, where
            assert c["capabilities"] == {"drop": ["ALL"]}, where
            assert c["runAsNonRoot"] is True and c["runAsUser"] == UID, where
            assert c["seccompProfile"] == {"type": "RuntimeDefault"}, where
            resources = container["resources"]
            assert resources["requests"]["memory"] and resources["limits"]["memory"], where
            volumes = {v["name"]: v for v in pod["volumes"]}
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            assert "emptyDir" in volumes[mounts["/tmp"]], where
            assert "emptyDir" in volumes[mounts["/var/lib/govindex"]], where
            if name == "trial":  # the volumes every pod mounts
                assert volumes[mounts[KAFKA_CA]]["secret"] == {"secretName": "kafka-ca"}, where


def test_every_deployment_is_probed_where_its_process_answers(
    renders: dict[str, Objects],
) -> None:
    from govindex.control.admin import _PUBLIC as ADMIN_PUBLIC
    from reader.probes import PROBES as READER_PROBES

    # What each listener answers without a credential.
    http_paths = {"reader": READER_PROBES, "admin": ADMIN_PUBLIC, "webhooks": {"/healthz"}}
    for name, objects in renders.items():
        configmap = of_kind(objects, "ConfigMap")[0]["data"]
        deployments = of_kind(objects, "Deployment")
        assert {component(d) for d in deployments} == deployed(name), name
        for deployment in deployments:
            kind = component(deployment)
            (container,) = deployment["spec"]["template"]["spec"]["containers"]
            ports = {p["name"]: p["containerPort"] for p in container["ports"]}
            assert ports["metrics"] == int(configmap["GOVINDEX_METRICS_PORT"]), kind
            live = container["livenessProbe"]["httpGet"]
            ready = container["readinessProbe"]["httpGet"]
            start = container["startupProbe"]["httpGet"]
            assert (live["path"], ready["path"], start["path"]) == ("/livez", "/readyz", "/livez")
            assert live["port"] == ready["port"] == start["port"], kind
            if kind == "reader":
                assert live["port"] == "http", "the read API answers its own /livez, /readyz"
            if live["port"] == "http":
                assert {live["path"], ready["path"]} <= http_paths[kind], kind
            else:
                # Every worker's metrics listener answers /livez and /readyz.
                assert live["port"] == "metrics", kind
            assert live["port"] in ports, kind


def test_settings_the_chart_sets_are_settings_govindex_reads(renders: dict[str, Objects]) -> None:
    from govindex.core.settings import Settings

    fields = {f"GOVINDEX_{name.upper()}" for name in Settings.model_fields}
    for name, objects in renders.items():
        names = set(of_kind(objects, "ConfigMap")[0]["data"])
        for _, pod in pod_specs(objects):
            names |= {e["name"] for e in pod["containers"][0].get("env") or []}
        govindex = {n for n in names if n.startswith("GOVINDEX_")}
        assert govindex and govindex <= fields, (name, sorted(govindex - fields))
        assert names - govindex <= {"HOME"}, (name, names - govindex)


def test_every_command_the_chart_runs_exists_with_those_arguments(
    renders: dict[str, Objects],
) -> None:
    from govindex.cli.main import app
    from govindex.cli.stack import LISTENERS
    from govindex.control.workers import INDEXER_PARTS
    from govindex.core.settings import Consumers

    root = typer.main.get_command(app)
    seen = set()
    for objects in renders.values():
        for _, pod in pod_specs(objects):
            args = list(pod["containers"][0]["args"])
            command: Any = root
            path = []
            # Down the command groups (typer's, whichever click it carries) to the command.
            while args and args[0] in (getattr(command, "commands", None) or {}):
                path.append(args[0])
                command = command.commands[args.pop(0)]
            assert path and not hasattr(command, "commands"), pod["containers"][0]["args"]
            # Parses exactly as `govindex ...` would: options exist, values convert.
            ctx = command.make_context(" ".join(["govindex", *path]), args)
            if path == ["worker"]:
                assert set(ctx.params["names"]) <= {*Consumers.KINDS, *INDEXER_PARTS, *LISTENERS}
            seen.add(tuple(path))
    assert seen == {("bootstrap",), ("worker",), ("reconcile",), ("retention",)}


def test_secrets_reach_only_the_pods_that_read_them(renders: dict[str, Objects]) -> None:
    own = {"reader": {"GOVINDEX_READ_TOKENS"}, "admin": {"GOVINDEX_ADMIN_TOKEN"}}
    for name, objects in renders.items():
        servers = {"GOVINDEX_PG_DSN", "GOVINDEX_OPENSEARCH_URL", "GOVINDEX_REDIS_URL"}
        if name == "trial":  # the optional credentials, where given
            servers |= {"GOVINDEX_OPENSEARCH_PASSWORD", "GOVINDEX_KAFKA_SASL_PASSWORD"}
        for owner, pod in pod_specs(objects):
            container = pod["containers"][0]
            refs = secret_refs(container)
            assert set(refs) == servers | own.get(component(owner), set()), (name, owner)
            from_secrets = [e["secretRef"]["name"] for e in container.get("envFrom", [])[1:]]
            assert bool(from_secrets) == (component(owner) == "webhooks"), (name, owner)
    example = renders["example"]
    reader = named(example, "Deployment", "govindex-reader")["spec"]["template"]["spec"]
    assert secret_refs(reader["containers"][0])["GOVINDEX_READ_TOKENS"] == (
        "govindex-read-tokens",
        "GOVINDEX_READ_TOKENS",
    )
    production = named(renders["production"], "Deployment", "govindex-indexer")
    refs = secret_refs(production["spec"]["template"]["spec"]["containers"][0])
    assert refs["GOVINDEX_PG_DSN"] == ("govindex-postgres", "dsn")


def test_no_secret_holds_placeholder_text_and_existing_secrets_make_none(
    renders: dict[str, Objects],
) -> None:
    for name in ("example", "production"):
        assert of_kind(renders[name], "Secret") == [], name
    secrets = {s["metadata"]["name"]: s for s in of_kind(renders["trial"], "Secret")}
    assert set(secrets) == {"govindex", "govindex-webhook-secrets", "govindex-bootstrap"}
    for secret in secrets.values():
        assert "stringData" not in secret
        for key, encoded in secret["data"].items():
            assert not PLACEHOLDER.search(base64.b64decode(encoded).decode()), key
    data = {k: base64.b64decode(v).decode() for k, v in secrets["govindex"]["data"].items()}
    given = TRIAL["secrets"]
    assert data["GOVINDEX_PG_DSN"] == given["pgDsn"]["value"]
    assert json.loads(data["GOVINDEX_READ_TOKENS"]) == given["readTokens"]["value"]
    assert data["GOVINDEX_ADMIN_TOKEN"] == given["adminToken"]["value"]
    assert data["GOVINDEX_OPENSEARCH_PASSWORD"] == given["opensearchPassword"]["value"]
    assert "GOVINDEX_KAFKA_SASL_PASSWORD" not in data  # an existing Secret's
    servers = {
        "GOVINDEX_PG_DSN",
        "GOVINDEX_OPENSEARCH_URL",
        "GOVINDEX_OPENSEARCH_PASSWORD",
        "GOVINDEX_REDIS_URL",
    }
    assert set(secrets["govindex-bootstrap"]["data"]) == servers


def test_bootstrap_is_a_hook_that_runs_before_every_release(renders: dict[str, Objects]) -> None:
    for name, objects in renders.items():
        (job,) = of_kind(objects, "Job")
        notes = job["metadata"]["annotations"]
        assert notes["helm.sh/hook"] == "pre-install,pre-upgrade", name
        assert notes["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
        assert job["spec"]["backoffLimit"] >= 1 and job["spec"]["activeDeadlineSeconds"] > 0
        pod = job["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        # Hooks run before the release's objects exist: no chart ConfigMap, Secret or
        # ServiceAccount of this release may be needed.
        assert "serviceAccountName" not in pod, name
        container = pod["containers"][0]
        assert container["args"][0] == "bootstrap"
        assert "envFrom" not in container
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert {k: v for k, v in env.items() if v is not None} == of_kind(objects, "ConfigMap")[0][
            "data"
        ]
    trial = renders["trial"]
    (job,) = of_kind(trial, "Job")
    hook_secret = named(trial, "Secret", "govindex-bootstrap")["metadata"]["annotations"]
    assert hook_secret["helm.sh/hook"] == job["metadata"]["annotations"]["helm.sh/hook"]
    assert int(hook_secret["helm.sh/hook-weight"]) < int(
        job["metadata"]["annotations"]["helm.sh/hook-weight"]
    )
    refs = secret_refs(job["spec"]["template"]["spec"]["containers"][0])
    # The chart-kept ones from the hook's own copy; an existing Secret as it is.
    assert refs.pop("GOVINDEX_KAFKA_SASL_PASSWORD") == ("kafka-sasl", "password")
    assert {secret for secret, _ in refs.values()} == {"govindex-bootstrap"}


def test_the_prometheus_rule_carries_alerts_yml(renders: dict[str, Objects]) -> None:
    (rule,) = of_kind(renders["production"], "PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(ALERTS.read_text())["groups"]
    assert (CHART / "files" / "alerts.yml").resolve() == ALERTS.resolve()
    assert of_kind(renders["trial"], "PrometheusRule") == []


def test_the_pod_monitor_scrapes_every_worker_and_only_workers(
    renders: dict[str, Objects],
) -> None:
    (monitor,) = of_kind(renders["production"], "PodMonitor")
    selector = monitor["spec"]["selector"]
    assert selector["matchExpressions"][0]["values"] == list(KINDS)
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")


def test_keda_scales_the_indexer_on_its_real_consumer_groups(
    renders: dict[str, Objects],
) -> None:
    from govindex.core.settings import Consumers, Settings

    production = renders["production"]
    values = render.load_values([CHART / "values.yaml", HELM / "values-production.yaml"])
    settings = Settings(namespace=values["config"]["namespace"])
    (scaled,) = of_kind(production, "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "govindex-indexer"
    assert scaled["spec"]["maxReplicaCount"] == values["config"]["partitions"]
    triggers = {t["name"]: t["metadata"] for t in scaled["spec"]["triggers"]}
    assert {t["type"] for t in scaled["spec"]["triggers"]} == {"kafka"}
    # Production runs the deletion lane in pods of its own: the indexer's lag is the
    # documents topic's alone.
    assert set(triggers) == {"documents"}
    assert triggers["documents"]["consumerGroup"] == settings.group(Consumers.INDEXER)
    assert triggers["documents"]["topic"] == settings.topics.documents
    for trigger in triggers.values():
        assert trigger["bootstrapServers"] == values["config"]["kafkaBootstrap"]
        assert trigger["offsetResetPolicy"] == "earliest"  # as the consumers start
    assert all("authenticationRef" not in t for t in scaled["spec"]["triggers"])
    # The lane in the indexer's pods (trial): both groups' lag; brokers behind SASL: the
    # TriggerAuthentication named, on both triggers.
    (trial,) = of_kind(renders["trial"], "ScaledObject")
    lanes = {t["name"]: t["metadata"] for t in trial["spec"]["triggers"]}
    assert lanes["deletions"]["consumerGroup"] == settings.group(Consumers.DELETIONS)
    assert lanes["deletions"]["topic"] == settings.topics.deletions
    refs = [t["authenticationRef"] for t in trial["spec"]["triggers"]]
    assert refs == [{"name": "kafka-sasl"}] * 2
    # KEDA owns the indexer's replica count; a release must not reset it.
    assert "replicas" not in named(production, "Deployment", "govindex-indexer")["spec"]
    assert of_kind(renders["example"], "ScaledObject") == []


def test_every_multi_replica_deployment_has_a_disruption_budget(
    renders: dict[str, Objects],
) -> None:
    for name, objects in renders.items():
        budgets = {component(b): b for b in of_kind(objects, "PodDisruptionBudget")}
        for deployment in of_kind(objects, "Deployment"):
            kind = component(deployment)
            replicas = deployment["spec"].get("replicas")
            if replicas is None:  # KEDA: its minimum
                replicas = named(objects, "ScaledObject", "govindex-indexer")["spec"][
                    "minReplicaCount"
                ]
            assert (kind in budgets) == (replicas > 1), (name, kind)
            if kind in budgets:
                selector = budgets[kind]["spec"]["selector"]["matchLabels"]
                assert selector == deployment["spec"]["selector"]["matchLabels"]
    production = renders["production"]
    assert named(production, "Deployment", "govindex-reader")["spec"]["replicas"] == 3


def test_services_select_their_deployments_ports(renders: dict[str, Objects]) -> None:
    objects = renders["example"]
    services = {component(s): s for s in of_kind(objects, "Service")}
    assert set(services) == {"webhooks", "reader", "admin"}
    for kind, service in services.items():
        deployment = named(objects, "Deployment", f"govindex-{kind}")
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= labels.items()
        assert service["spec"]["type"] == "ClusterIP"
        (port,) = service["spec"]["ports"]
        ports = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
        assert port["targetPort"] in {p["name"] for p in ports}


def by_port(policy: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A NetworkPolicy's ingress rules by the (one) named port each opens."""
    rules = {}
    for rule in policy["spec"]["ingress"]:
        (port,) = rule["ports"]
        rules[port["port"]] = rule
    return rules


def test_network_policies_keep_the_apis_internal(renders: dict[str, Objects]) -> None:
    assert of_kind(renders["example"], "NetworkPolicy") == []
    values = render.load_values([HELM / "values-production.yaml"])["networkPolicy"]
    for name, objects in (("production", renders["production"]), ("trial", renders["trial"])):
        policies = {component(p): p for p in of_kind(objects, "NetworkPolicy")}
        assert set(policies) == deployed(name), name
        rules = {kind: by_port(policy) for kind, policy in policies.items()}
        for kind, policy in policies.items():
            assert policy["spec"]["policyTypes"] == ["Ingress"]
            listener = kind in ("webhooks", "reader", "admin")
            assert set(rules[kind]) == ({"http", "metrics"} if listener else {"metrics"}), kind
        # The webhook receiver: from anywhere on its port.
        assert "from" not in rules["webhooks"]["http"]
        for kind in ("reader", "admin"):
            expected = values[f"{kind}From"] if name == "production" else [{"podSelector": {}}]
            assert rules[kind]["http"]["from"] == expected, (name, kind)


def test_cronjobs_reconcile_each_listed_source_and_run_retention(
    renders: dict[str, Objects],
) -> None:
    production = renders["production"]
    jobs = {j["metadata"]["name"]: j for j in of_kind(production, "CronJob")}
    reconciles = [j for j in jobs.values() if component(j) == "reconcile"]
    by_source = {j["metadata"]["annotations"]["govindex/source"]: j for j in reconciles}
    assert set(by_source) == {"handbook", "payments"}
    assert by_source["payments"]["spec"]["schedule"] == "5 * * * *"
    assert by_source["handbook"]["spec"]["schedule"] == "*/30 * * * *"
    for source, job in by_source.items():
        pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        args = pod["containers"][0]["args"]
        assert args[:3] == ["reconcile", "--source", source]
        mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
        assert "/var/lib/govindex/mirrors" in mounts  # a git source's mirror is fetched
        assert job["spec"]["concurrencyPolicy"] == "Forbid"
    (retention,) = [j for j in jobs.values() if component(j) == "retention"]
    pod = retention["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["args"][0] == "retention"
    assert retention["spec"]["timeZone"] == "Etc/UTC"
    # A source id Kubernetes cannot name as it is gets a clean, unique name.
    odd = rendered({**TRIAL, "reconcile": {"sources": ["Hand_Book", "hand-book"]}})
    names = [j["metadata"]["name"] for j in of_kind(odd, "CronJob") if component(j) == "reconcile"]
    assert len(set(names)) == 2 and all(len(n) <= 52 for n in names), names


def test_the_webhook_receiver_gets_its_secrets_and_a_writable_mirror_dir(
    renders: dict[str, Objects],
) -> None:
    trial = renders["trial"]
    pod = named(trial, "Deployment", "govindex-webhooks")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["args"][:4] == ["worker", "webhooks", "--webhook-port", "8080"]
    assert {"secretRef": {"name": "govindex-webhook-secrets"}} in container["envFrom"]
    secret = named(trial, "Secret", "govindex-webhook-secrets")
    assert set(secret["data"]) == set(TRIAL["secrets"]["webhookSecrets"]["values"])
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # ingest.app keeps the mirrors in GOVINDEX_STATE_DIR/mirrors.
    assert volumes[mounts["/var/lib/govindex/mirrors"]]["emptyDir"]["sizeLimit"] == "10Gi"
    example = named(renders["example"], "Deployment", "govindex-webhooks")
    env_from = example["spec"]["template"]["spec"]["containers"][0]["envFrom"]
    assert {"secretRef": {"name": "govindex-webhook-secrets"}} in env_from


def test_the_plain_manifest_is_the_charts_fresh_rendering() -> None:
    committed = (ROOT / "deploy" / "kubernetes" / "govindex.yaml").read_text()
    assert committed == render.manifest(), "stale: run .venv/bin/python deploy/helm/render.py"
    assert committed.startswith("# GENERATED FILE: do not edit.")
    objects = [o for o in yaml.safe_load_all(committed) if o]
    assert {o["kind"] for o in objects} >= {"Deployment", "Job", "CronJob", "ConfigMap"}
    assert not PLACEHOLDER.search(committed)


def test_the_deletion_lane_runs_in_pods_of_its_own_or_in_the_indexers(
    renders: dict[str, Objects],
) -> None:
    def args(objects: Objects, component: str) -> list[str]:
        deployment = named(objects, "Deployment", f"govindex-{component}")
        return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"][:2])

    production = renders["production"]
    assert args(production, "indexer") == ["worker", "documents"]
    assert args(production, "deletions") == ["worker", "deletions"]
    for name in ("example", "trial"):
        assert args(renders[name], "indexer") == ["worker", "indexer"], name
        assert not [
            d for d in of_kind(renders[name], "Deployment") if component(d) == "deletions"
        ], name
