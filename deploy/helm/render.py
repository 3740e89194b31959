"""Render the govindex chart into plain manifests: deploy/kubernetes/govindex.yaml.

The chart (deploy/helm/govindex) is the one source of the Kubernetes objects; the plain
file is its rendering with the default values and deploy/helm/values-example.yaml, for
those who apply manifests without Helm (kubectl, kustomize, a GitOps review). Regenerate
it after any change to the chart or to those values:

    .venv/bin/python deploy/helm/render.py            # writes deploy/kubernetes/govindex.yaml
    .venv/bin/python deploy/helm/render.py --check    # exit 1 if the file is stale

It renders offline with the Helm engine of `helm-python-sdk` (no helm binary, no
cluster); tests/unit/test_helm_chart.py fails while the committed file differs.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
CHART = HERE / "govindex"
EXAMPLE_VALUES = HERE / "values-example.yaml"
OUTPUT = HERE.parent / "kubernetes" / "govindex.yaml"
RELEASE = "govindex"
NAMESPACE = "govindex"

# Helm's install order (pkg/release/util/kind_sorter.go); kinds it does not know go last.
INSTALL_ORDER = [
    "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
    "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap",
    "StorageClass", "PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition",
    "ClusterRole", "ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role",
    "RoleList", "RoleBinding", "RoleBindingList", "Service", "DaemonSet", "Pod",
    "ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler",
    "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
]  # fmt: skip
HOOK = "helm.sh/hook"
_SEPARATOR = re.compile(r"^---[ \t]*$", re.MULTILINE)

HEADER = f"""\
# GENERATED FILE: do not edit. The govindex Helm chart (deploy/helm/govindex) rendered
# with its default values and deploy/helm/values-example.yaml, as release {RELEASE!r} in
# namespace {NAMESPACE!r}, by
#   .venv/bin/python deploy/helm/render.py
# (tests/unit/test_helm_chart.py fails while this file differs from a fresh render).
# Change the chart or the values, never this file; with Helm, install the chart instead.
#
# Apply into an existing namespace after creating the Secrets the values name
# (govindex-servers, govindex-read-tokens, govindex-admin-token, govindex-webhook-secrets):
#   kubectl -n {NAMESPACE} delete job {RELEASE}-bootstrap --ignore-not-found
#   kubectl -n {NAMESPACE} apply -f deploy/kubernetes/govindex.yaml
# Helm runs the bootstrap Job (a hook) before the workers; kubectl applies it beside them,
# and they restart until it has finished. The PodMonitor and PrometheusRule need the
# Prometheus Operator's CRDs.
"""


def load_values(paths: Iterable[Path]) -> dict[str, Any]:
    """The values files merged in order (a later file's keys win, maps merge)."""
    merged: dict[str, Any] = {}
    for path in paths:
        _merge(merged, yaml.safe_load(path.read_text()) or {})
    return merged


def _merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def render_templates(
    values: dict[str, Any] | None = None,
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
) -> dict[str, str]:
    """Each template's rendering (template path -> text), as `helm template` makes them.

    Raises helm_python's HelmValuesError (the values break values.schema.json) or
    HelmRenderError (a template failed, e.g. a required value is missing)."""
    import helm_python

    with helm_python.Chart.load(CHART) as chart:
        return chart.render(values or {}, name=release, namespace=namespace, is_install=True)


def documents(rendered: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    """(template, text, object) for every object rendered, NOTES.txt and empty documents
    left out, in the order Helm applies them: hooks first, then by kind."""
    found = []
    for template, text in rendered.items():
        if template.endswith("NOTES.txt"):
            continue
        for part in _SEPARATOR.split(text):
            obj = yaml.safe_load(part)
            if obj:
                found.append((template, part.strip(), obj))

    def order(item: tuple[str, str, dict[str, Any]]) -> tuple[int, int, str]:
        _, _, obj = item
        kind = obj.get("kind", "")
        hook = HOOK in (obj.get("metadata", {}).get("annotations") or {})
        rank = INSTALL_ORDER.index(kind) if kind in INSTALL_ORDER else len(INSTALL_ORDER)
        return (0 if hook else 1, rank, obj.get("metadata", {}).get("name", ""))

    return sorted(found, key=order)


def manifest(values_files: Sequence[Path] = (EXAMPLE_VALUES,)) -> str:
    """The plain-manifest file: the header, then every object, `---` between them."""
    rendered = render_templates(load_values(values_files))
    parts = [f"# Source: {template}\n{text}" for template, text, _ in documents(rendered)]
    return HEADER + "---\n" + "\n---\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the output file is not up to date"
    )
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"default: {OUTPUT}")
    args = parser.parse_args(argv)
    text = manifest()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
