"""Rendering deploy/k8s with `kubectl kustomize` and reading the objects it gives.

The tests look at what Kubernetes would receive, not at the files: overlays, components and
patches are applied first. Pod specs are read through the `kubernetes` client's models
(V1Deployment, V1Job, ...), so a misspelt field is an attribute error rather than a silent miss.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
OVERLAYS = {"local": K8S / "overlays" / "local", "production": K8S / "overlays" / "production"}
FULL_BUILD = K8S / "jobs" / "full-build"
# What runs in one namespace together: an overlay, plus the full-build Job applied beside it.
STACKS = tuple(OVERLAYS)
NAME_LABEL = "app.kubernetes.io/name"

_API = client.ApiClient()


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.skip(
            "kubectl is not installed, so deploy/k8s cannot be rendered: install kubectl "
            "(1.27 or newer, for kustomize v5 components) to run the manifest checks"
        )
    return path


@functools.cache
def render(directory: Path) -> tuple[dict, ...]:
    """`kubectl kustomize DIR` as a tuple of objects; AssertionError with kubectl's message."""
    done = subprocess.run(
        [kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, f"kubectl kustomize {directory} failed:\n{done.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def stack(name: str) -> tuple[dict, ...]:
    return render(OVERLAYS[name]) + render(FULL_BUILD)


def model(obj: dict):
    """The kubernetes client model of a rendered object (V1Deployment, V1NetworkPolicy, ...)."""
    version = obj["apiVersion"].rpartition("/")[2]
    # The client's own deserializer: the one path that maps camelCase keys onto model attributes.
    return _API._ApiClient__deserialize(obj, f"{version.capitalize()}{obj['kind']}")


def of_kind(objs, kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def find(objs, kind: str, name: str) -> dict:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert found, f"no {kind} {name} in the render"
    return found[0]


@dataclass
class Workload:
    """Anything that runs pods: a Deployment, a Job, or a CronJob's job template."""

    kind: str
    name: str
    labels: dict[str, str]
    pod: client.V1PodSpec

    @property
    def app(self) -> str:
        return self.labels.get(NAME_LABEL, "")

    def containers(self) -> list[client.V1Container]:
        return list(self.pod.containers) + list(self.pod.init_containers or [])


def workloads(objs) -> list[Workload]:
    found = []
    for obj in objs:
        if obj["kind"] in ("Deployment", "Job"):
            template = model(obj).spec.template
        elif obj["kind"] == "CronJob":
            template = model(obj).spec.job_template.spec.template
        else:
            continue
        found.append(Workload(obj["kind"], obj["metadata"]["name"],
                              dict(template.metadata.labels or {}), template.spec))
    return found


def selects(selector, labels: dict[str, str]) -> bool:
    """Whether a V1LabelSelector matches these labels (an empty selector matches all)."""
    if selector is None:
        return False
    for key, value in (selector.match_labels or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.match_expressions or []:
        present = expr.key in labels
        ok = {
            "In": present and labels[expr.key] in (expr.values or []),
            "NotIn": not present or labels[expr.key] not in (expr.values or []),
            "Exists": present,
            "DoesNotExist": not present,
        }[expr.operator]
        if not ok:
            return False
    return True


def config_env(objs, container: client.V1Container) -> dict[str, str]:
    """The container's environment from its ConfigMaps (envFrom, in order) and literal env."""
    env: dict[str, str] = {}
    for source in container.env_from or []:
        if source.config_map_ref is not None:
            env.update(find(objs, "ConfigMap", source.config_map_ref.name).get("data", {}))
    for var in container.env or []:
        if var.value is not None:
            env[var.name] = var.value
    return env


def image_service(image: str) -> str:
    """citeweave/<service>[-cuda]:tag -> service."""
    name = image.split(":")[0].rpartition("/")[2]
    return name.removesuffix("-cuda")
