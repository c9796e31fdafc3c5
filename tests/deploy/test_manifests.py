"""Checks of the Kubernetes manifests in deploy/k8s, as rendered by `kubectl kustomize`.

No cluster is needed: every overlay is rendered, every object validated against the Kubernetes
1.30 schemas (kubernetes-validate, strict), and the rendered objects are checked against each
other and against the code: the settings in the ConfigMaps are real and valid, every peer
address names a Service that exists with that port, the network policies allow exactly the
calls those addresses imply, only the gateway is reachable from outside, only the production
embedder asks for a GPU.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from kubernetes.utils import parse_quantity
from pydantic import SecretStr

from services.cli.stack import SERVICE_ORDER, settings_class
from services.common.settings import env_prefix
from tests.deploy.k8s_objects import (
    FULL_BUILD, K8S, NAME_LABEL, OVERLAYS, REPO, STACKS, Workload, config_env, find,
    image_service, model, of_kind, render, selects, stack, workloads,
)

VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
KUBERNETES_VERSION = "1.30.0"
UID = 10001  # the USER of every image in deploy/docker
RESOURCES = ("cpu", "memory", "ephemeral-storage")
TARGETS = {**OVERLAYS, "full-build": FULL_BUILD}
# Settings that name a place the service writes to: each must be set explicitly and mounted.
WRITE_PATHS = {
    "retriever": ["milvus_uri"],
    "fetcher": ["cache_dir"],
    "sync": ["state_dir", "topic_model_dir", "download_dir"],
}
# Peers outside the namespace a NetworkPolicy may name: namespace -> labels its pods must carry.
EXTERNAL_PEERS = {
    "kube-system": {"k8s-app": "kube-dns"},
    "ingress-nginx": {"app.kubernetes.io/name": "ingress-nginx"},
    "monitoring": {},
}
HPA_TARGETS = {"gateway", "fetcher", "generator", "embedder"}
ADDR_KEY = re.compile(r"_ADDRS?$")
VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def deployments(objs) -> list[Workload]:
    return [w for w in workloads(objs) if w.kind == "Deployment"]


def service_of(w: Workload) -> str:
    return image_service(w.pod.containers[0].image)


def settings_for(objs, w: Workload, tmp_path: Path):
    """The settings object the workload's container would build from its environment. Paths
    inside mounted Secrets are replaced by placeholder files, since the Secrets are created by
    the operator, not rendered."""
    container = w.pod.containers[0]
    service = service_of(w)
    prefix = env_prefix(service)
    secret_dirs = {m.mount_path for m in container.volume_mounts or []
                   if any(v.name == m.name and v.secret is not None for v in w.pod.volumes or [])}
    values = {}
    for key, value in config_env(objs, container).items():
        if not key.startswith(prefix):
            continue
        if any(value.startswith(d + "/") for d in secret_dirs):
            placeholder = tmp_path / key
            placeholder.write_text("placeholder\n")
            value = str(placeholder)
        values[key[len(prefix):].lower()] = value
    return settings_class(service)(**values)


# ---- rendering and schema -----------------------------------------------------------------------

@pytest.mark.parametrize("target", TARGETS)
def test_every_target_renders_with_unique_names(target):
    objs = render(TARGETS[target])
    assert objs, f"{target} rendered nothing"
    keys = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert len(keys) == len(set(keys)), f"duplicate objects in {target}"
    assert {o["metadata"].get("namespace") for o in objs if o["kind"] != "Namespace"} == {"citeweave"}


@pytest.mark.parametrize("target", TARGETS)
def test_every_object_validates_strictly_against_kubernetes_1_30(target):
    failures = []
    for obj in render(TARGETS[target]):
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            failures.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")
    assert not failures, "\n".join(failures)


def test_strict_validation_rejects_an_unknown_field():
    # The check above can fail: a misspelt field is caught, not ignored.
    deployment = dict(find(render(OVERLAYS["local"]), "Deployment", "gateway"))
    deployment["spec"] = {**deployment["spec"], "replica": 2}
    with pytest.raises(kubernetes_validate.ValidationError, match="replica"):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_every_service_has_its_deployment_service_account_and_config():
    objs = render(OVERLAYS["local"])
    for name in SERVICE_ORDER:
        deployment = model(find(objs, "Deployment", name))
        service = model(find(objs, "Service", name))
        find(objs, "ConfigMap", f"{name}-config")
        assert deployment.spec.template.spec.service_account_name == name
        find(objs, "ServiceAccount", name)
        assert "grpc" in [p.name for p in service.spec.ports], f"{name}'s Service has no port named grpc"
        assert selects(deployment.spec.selector, deployment.spec.template.metadata.labels)
        assert service.spec.selector == {NAME_LABEL: name}


# ---- containers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", STACKS)
def test_every_container_sets_requests_and_limits(name):
    for w in workloads(stack(name)):
        for c in w.containers():
            requests, limits = c.resources.requests or {}, c.resources.limits or {}
            for resource in RESOURCES:
                assert resource in requests and resource in limits, (
                    f"{w.kind}/{w.name} container {c.name}: {resource} request and limit must be set")
                assert parse_quantity(requests[resource]) <= parse_quantity(limits[resource]), (
                    f"{w.kind}/{w.name}: {resource} request above its limit")


@pytest.mark.parametrize("name", STACKS)
def test_services_have_native_grpc_probes_on_their_grpc_port(name):
    for w in deployments(render(OVERLAYS[name])):
        for c in w.pod.containers:
            grpc_port = next(p.container_port for p in c.ports if p.name == "grpc")
            for kind in ("startup_probe", "readiness_probe", "liveness_probe"):
                probe = getattr(c, kind)
                assert probe is not None and probe.grpc is not None, f"{w.name}: no gRPC {kind}"
                assert probe.grpc.port == grpc_port, f"{w.name}: {kind} on {probe.grpc.port}"


@pytest.mark.parametrize("name", STACKS)
def test_the_embedder_gets_ten_minutes_to_load_its_model(name):
    embedder = next(w for w in deployments(render(OVERLAYS[name])) if w.name == "embedder")
    probe = embedder.pod.containers[0].startup_probe
    assert probe.period_seconds * probe.failure_threshold >= 600


@pytest.mark.parametrize("name", STACKS)
def test_pods_run_non_root_read_only_without_capabilities(name):
    objs = stack(name)
    accounts = {o["metadata"]["name"] for o in of_kind(objs, "ServiceAccount")}
    for w in workloads(objs):
        pod = w.pod.security_context
        assert pod.run_as_non_root and pod.run_as_user == UID and pod.run_as_group == UID
        assert pod.fs_group == UID and pod.seccomp_profile.type == "RuntimeDefault"
        assert w.pod.automount_service_account_token is False, w.name
        assert w.pod.service_account_name in accounts, f"{w.name}: no ServiceAccount"
        assert not w.pod.host_network and not w.pod.host_pid and not w.pod.host_ipc
        for c in w.containers():
            sc = c.security_context
            assert sc.read_only_root_filesystem is True, f"{w.name}/{c.name}: writable root"
            assert sc.allow_privilege_escalation is False, f"{w.name}/{c.name}"
            assert sc.capabilities.drop == ["ALL"] and not sc.capabilities.add, f"{w.name}/{c.name}"
            assert "/tmp" in {m.mount_path for m in c.volume_mounts or []}, f"{w.name}: no /tmp"
            assert not any(p.host_port for p in c.ports or []), f"{w.name}: hostPort"


@pytest.mark.parametrize("name", STACKS)
def test_termination_grace_outlasts_drain_and_in_flight_calls(name, tmp_path):
    objs = render(OVERLAYS[name])
    for w in deployments(objs):
        settings = settings_for(objs, w, tmp_path)
        needed = settings.drain_s + settings.grace_s + 10  # + closing the service itself
        assert w.pod.termination_grace_period_seconds >= needed, (
            f"{w.name}: terminationGracePeriodSeconds {w.pod.termination_grace_period_seconds} "
            f"< drain {settings.drain_s} + grace {settings.grace_s} + 10")


@pytest.mark.parametrize("name", STACKS)
def test_images_are_the_projects_images_at_its_version(name):
    dockerfiles = {p.name.removesuffix(".Dockerfile") for p in (REPO / "deploy" / "docker").glob("*.Dockerfile")}
    for w in workloads(stack(name)):
        for c in w.containers():
            repository, _, tag = c.image.rpartition(":")
            assert tag == VERSION, f"{w.name}: image {c.image} is not at version {VERSION}"
            assert repository.rpartition("/")[2] in dockerfiles, f"{w.name}: no Dockerfile builds {c.image}"


# ---- settings -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", STACKS)
def test_configmap_settings_exist(name):
    prefixes = {env_prefix(s): s for s in SERVICE_ORDER}
    for cm in of_kind(stack(name), "ConfigMap"):
        for key in cm.get("data", {}):
            if not key.startswith("CITEWEAVE_"):
                continue
            service = next((s for p, s in prefixes.items() if key.startswith(p)), None)
            assert service, f"ConfigMap {cm['metadata']['name']}: {key} belongs to no service"
            field = key[len(env_prefix(service)):].lower()
            assert field in settings_class(service).model_fields, (
                f"ConfigMap {cm['metadata']['name']}: {key} is not a setting of the {service}")


@pytest.mark.parametrize("name", STACKS)
def test_every_service_starts_with_its_rendered_settings(name, tmp_path):
    objs = stack(name)
    for w in deployments(objs):
        settings_for(objs, w, tmp_path)  # raises ValidationError naming the setting
    build = next(w for w in workloads(objs) if w.app == "sync-build")
    settings_for(objs, build, tmp_path)


@pytest.mark.parametrize("name", STACKS)
def test_write_paths_are_set_and_on_writable_volumes(name, tmp_path):
    objs = stack(name)
    for w in workloads(objs):
        service = service_of(w)
        if w.app == "sync-update":
            continue  # a client of the sync service; it writes nothing
        settings = settings_for(objs, w, tmp_path)
        env = config_env(objs, w.pod.containers[0])
        volumes = {v.name: v for v in w.pod.volumes or []}
        mounts = [m for m in w.pod.containers[0].volume_mounts or []
                  if not m.read_only and (volumes[m.name].empty_dir or volumes[m.name].persistent_volume_claim)]
        for field in WRITE_PATHS.get(service, []):
            value = str(getattr(settings, field))
            if field == "milvus_uri" and value.startswith("http"):
                continue
            assert f"{env_prefix(service)}{field.upper()}" in env, f"{w.name}: {field} not set explicitly"
            assert any(Path(m.mount_path) in (Path(value), *Path(value).parents) for m in mounts), (
                f"{w.name}: {field}={value} is not on a writable volume")


@pytest.mark.parametrize("name", STACKS)
def test_secrets_never_sit_in_configmaps(name):
    secret_fields = {
        (s, f) for s in SERVICE_ORDER
        for f, info in settings_class(s).model_fields.items() if info.annotation is SecretStr
    }
    assert ("generator", "openai_api_key") in secret_fields
    objs = stack(name)
    assert not of_kind(objs, "Secret"), "Secrets are created by the operator, never committed"
    for cm in of_kind(objs, "ConfigMap"):
        for key in cm.get("data", {}):
            for service, field in secret_fields:
                assert key != f"{env_prefix(service)}{field.upper()}", f"{key} in a ConfigMap"
            if re.search(r"(^|_)(KEY|TOKEN|PASSWORD|SECRET)(_|$)", key) and not key.endswith("_FILE"):
                pytest.fail(f"ConfigMap {cm['metadata']['name']}: {key} looks like a secret")


def test_production_reads_keys_from_mounted_secrets(tmp_path):
    objs = render(OVERLAYS["production"])
    gateway = next(w for w in deployments(objs) if w.name == "gateway")
    generator = next(w for w in deployments(objs) if w.name == "generator")
    assert settings_for(objs, gateway, tmp_path).api_keys_file is not None, "a shared endpoint needs API keys"
    assert settings_for(objs, generator, tmp_path).openai_api_key_file is not None
    for w, secret in ((gateway, "gateway-api-keys"), (generator, "generator-openai")):
        names = [v.secret.secret_name for v in w.pod.volumes if v.secret is not None]
        assert names == [secret]
    retriever = next(w for w in deployments(objs) if w.name == "retriever")
    token = next(e for e in retriever.pod.containers[0].env if e.name == "CITEWEAVE_RETRIEVER_MILVUS_TOKEN")
    assert token.value_from.secret_key_ref.name == "milvus-auth"


# ---- peers and the network ----------------------------------------------------------------------

def addr_edges(objs) -> set[tuple[str, str, int]]:
    """(caller app, callee app, port) for every *_ADDR(S) a workload is configured with."""
    services = {o["metadata"]["name"]: model(o) for o in of_kind(objs, "Service")}
    edges = set()
    for w in workloads(objs):
        for c in w.pod.containers:
            for key, value in config_env(objs, c).items():
                if not ADDR_KEY.search(key):
                    continue
                for addr in value.split(","):
                    host, _, port = addr.strip().rpartition(":")
                    service = services.get(host.split(".")[0])
                    assert service is not None, f"{w.name}: {key}={value} names no Service"
                    ports = {p.port: p.name for p in service.spec.ports}
                    assert ports.get(int(port)) == "grpc", (
                        f"{w.name}: {key}={value}: Service {service.metadata.name} has no grpc port {port}")
                    edges.add((w.app, service.spec.selector[NAME_LABEL], int(port)))
    return edges


@pytest.mark.parametrize("name", STACKS)
def test_every_address_names_a_service_with_that_port(name):
    edges = addr_edges(stack(name))
    expected = {("gateway", "embedder", 50051), ("gateway", "retriever", 50052),
                ("gateway", "fetcher", 50053), ("gateway", "generator", 50054),
                ("retriever", "embedder", 50051), ("sync", "embedder", 50051),
                ("sync", "retriever", 50052), ("sync-update", "sync", 50055),
                ("sync-build", "embedder", 50051), ("sync-build", "retriever", 50052)}
    assert edges == expected


def policy_edges(objs, direction: str) -> tuple[set, list]:
    """In-namespace (source app, destination app, port) the policies allow, and the peers that
    are outside the namespace as (policy, namespace labels, pod labels, ports)."""
    apps = [w.labels for w in workloads(objs)]
    allowed, external = set(), []
    for obj in of_kind(objs, "NetworkPolicy"):
        policy = model(obj)
        if direction.capitalize() not in policy.spec.policy_types:
            continue
        selected = [labels[NAME_LABEL] for labels in apps if selects(policy.spec.pod_selector, labels)]
        assert selected, f"NetworkPolicy {policy.metadata.name} selects no pod"
        for rule in (policy.spec.ingress if direction == "ingress" else policy.spec.egress) or []:
            peers = (rule._from if direction == "ingress" else rule.to) or []
            ports = [p.port for p in rule.ports or []]
            for peer in peers:
                if peer.namespace_selector is not None or peer.ip_block is not None:
                    external.append((policy.metadata.name, peer, ports))
                    continue
                matched = [labels[NAME_LABEL] for labels in apps if selects(peer.pod_selector, labels)]
                assert matched, f"NetworkPolicy {policy.metadata.name}: peer {peer.pod_selector} matches no pod"
                for here in selected:
                    for there in matched:
                        for port in ports:
                            edge = (there, here, port) if direction == "ingress" else (here, there, port)
                            allowed.add(edge)
    return allowed, external


def test_network_policies_allow_exactly_the_configured_calls():
    objs = stack("production")
    calls = addr_edges(objs)
    ingress, _ = policy_edges(objs, "ingress")
    egress, _ = policy_edges(objs, "egress")
    assert ingress == calls, f"ingress allowed but not configured: {ingress - calls}; configured but blocked: {calls - ingress}"
    assert egress == calls, f"egress allowed but not configured: {egress - calls}; configured but blocked: {calls - egress}"


def test_everything_else_is_denied():
    deny = model(find(render(OVERLAYS["production"]), "NetworkPolicy", "default-deny"))
    assert deny.spec.pod_selector.match_labels is None and deny.spec.pod_selector.match_expressions is None
    assert sorted(deny.spec.policy_types) == ["Egress", "Ingress"]
    assert not deny.spec.ingress and not deny.spec.egress


def milvus_location(objs) -> tuple[str, str, int]:
    """(release, namespace, port) of the Milvus server the production retriever is set to."""
    uri = find(objs, "ConfigMap", "retriever-config")["data"]["CITEWEAVE_RETRIEVER_MILVUS_URI"]
    match = re.fullmatch(r"http://([a-z0-9-]+)\.([a-z0-9-]+)\.svc\.cluster\.local:(\d+)", uri)
    assert match, f"the retriever's MILVUS_URI {uri} is not a Service in the cluster"
    return match[1], match[2], int(match[3])


def test_every_peer_outside_the_namespace_is_a_known_one():
    objs = stack("production")
    release, namespace, port = milvus_location(objs)
    # The chart labels its pods app.kubernetes.io/name=<chart>, app.kubernetes.io/instance=<release>.
    known = {**EXTERNAL_PEERS, namespace: {NAME_LABEL: "milvus", "app.kubernetes.io/instance": release}}
    found_milvus = False
    for direction in ("ingress", "egress"):
        for policy, peer, ports in policy_edges(objs, direction)[1]:
            if peer.ip_block is not None:
                assert direction == "egress" and policy == "public-egress", f"{policy}: an ipBlock"
                excepted = set(peer.ip_block._except or [])
                assert {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"} <= excepted or \
                    peer.ip_block.cidr == "::/0", f"{policy}: the public block lets in-cluster or metadata addresses through"
                continue
            ns = (peer.namespace_selector.match_labels or {}).get("kubernetes.io/metadata.name")
            assert ns in known, f"{policy}: peer namespace {ns} is not one the deployment expects"
            pod_labels = (peer.pod_selector.match_labels or {}) if peer.pod_selector else {}
            assert pod_labels == known[ns], f"{policy}: peer pods {pod_labels} in {ns}"
            if ns == namespace:
                found_milvus = True
                assert policy == "retriever-egress" and ports == [port]
    assert found_milvus, "no policy lets the retriever reach Milvus"


def test_only_the_gateway_is_reachable_from_outside():
    objs = render(OVERLAYS["production"])
    for service in map(model, of_kind(objs, "Service")):
        assert service.spec.type in (None, "ClusterIP"), f"Service {service.metadata.name} is {service.spec.type}"
    ingresses = [model(o) for o in of_kind(objs, "Ingress")]
    assert ingresses, "production has no Ingress"
    gateway_ports = {p.name for p in model(find(objs, "Service", "gateway")).spec.ports}
    for ingress in ingresses:
        tls_hosts = {h for t in ingress.spec.tls or [] for h in t.hosts}
        for rule in ingress.spec.rules:
            assert rule.host in tls_hosts, f"Ingress {ingress.metadata.name}: {rule.host} without TLS"
            for path in rule.http.paths:
                backend = path.backend.service
                assert backend.name == "gateway" and backend.port.name in gateway_ports
    for policy, peer, ports in policy_edges(stack("production"), "ingress")[1]:
        ns = peer.namespace_selector.match_labels["kubernetes.io/metadata.name"]
        if ns == "monitoring":
            assert policy == "allow-metrics-scrape" and ports == [9090]
        else:
            assert policy == "gateway-ingress" and sorted(ports) == [8080, 50050]
    assert not of_kind(render(OVERLAYS["local"]), "Ingress")


# ---- GPU, scaling, jobs -------------------------------------------------------------------------

@pytest.mark.parametrize("name", STACKS)
def test_only_the_production_embedder_asks_for_a_gpu(name):
    users = set()
    for w in workloads(stack(name)):
        for c in w.containers():
            if "nvidia.com/gpu" in (c.resources.limits or {}) or "nvidia.com/gpu" in (c.resources.requests or {}):
                users.add(w.name)
                assert c.resources.limits["nvidia.com/gpu"] == c.resources.requests["nvidia.com/gpu"] == "1"
                assert c.image.startswith("citeweave/embedder-cuda:"), c.image
                assert "nvidia.com/gpu" in {t.key for t in w.pod.tolerations}
                assert w.pod.node_selector == {"nvidia.com/gpu.present": "true"}
    assert users == ({"embedder"} if name == "production" else set())


def test_autoscalers_and_disruption_budgets_cover_their_deployments():
    objs = render(OVERLAYS["production"])
    deployed = {w.name: w for w in deployments(objs)}
    targets = set()
    for hpa in map(model, of_kind(objs, "HorizontalPodAutoscaler")):
        target = hpa.spec.scale_target_ref
        assert target.kind == "Deployment" and target.name in deployed
        assert 1 <= hpa.spec.min_replicas <= hpa.spec.max_replicas
        assert "cpu" in deployed[target.name].pod.containers[0].resources.requests
        targets.add(target.name)
    assert targets == HPA_TARGETS
    for pdb in map(model, of_kind(objs, "PodDisruptionBudget")):
        matched = [w for w in deployed.values() if selects(pdb.spec.selector, w.labels)]
        assert len(matched) == 1, f"PDB {pdb.metadata.name} matches {len(matched)} Deployments"
        assert pdb.spec.max_unavailable == 1 and pdb.spec.min_available is None
    assert not of_kind(render(OVERLAYS["local"]), "HorizontalPodAutoscaler")
    for w in deployments(render(OVERLAYS["local"])):
        assert model(find(render(OVERLAYS["local"]), "Deployment", w.name)).spec.replicas == 1


def help_text(module: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", module, *args, "--help"], capture_output=True,
                          text=True, cwd=REPO, timeout=120, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("name", STACKS)
def test_job_commands_run_modules_that_take_those_options(name):
    objs = stack(name)
    for w in workloads(objs):
        c = w.pod.containers[0]
        if not c.command:
            continue
        assert c.command[:2] == ["python", "-m"], f"{w.name}: {c.command}"
        env = config_env(objs, c)
        for ref in VAR_REF.findall(" ".join(c.args or [])):
            assert ref in env, f"{w.name}: $({ref}) is defined nowhere"
        text = help_text(c.command[2], *[a for a in c.args[:1] if not a.startswith(("-", "$"))])
        for option in (a for a in c.args if a.startswith("--")):
            assert option in text, f"{w.name}: {c.command[2]} has no option {option}"


def test_the_full_build_is_one_indexed_shard_per_pod():
    job = model(find(render(FULL_BUILD), "Job", "sync-build"))
    env = config_env(stack("production"), job.spec.template.spec.containers[0])
    assert job.spec.completion_mode == "Indexed"
    assert job.spec.completions == job.spec.parallelism == int(env["SHARD_COUNT"])
    assert job.spec.backoff_limit_per_index >= 1
    # services.sync.worker exits 2 for what a retry cannot mend.
    fail_fast = [r for r in job.spec.pod_failure_policy.rules if r.action == "FailIndex"]
    assert fail_fast and fail_fast[0].on_exit_codes.values == [2]
    assert "--shard-index" not in job.spec.template.spec.containers[0].args, \
        "the shard index comes from JOB_COMPLETION_INDEX"


def test_the_full_build_uses_the_production_image_tags():
    production = {c.image.split(":")[0]: c.image for w in workloads(render(OVERLAYS["production"]))
                  for c in w.containers()}
    for w in workloads(render(FULL_BUILD)):
        for c in w.containers():
            assert production[c.image.split(":")[0]] == c.image


# ---- Milvus values ------------------------------------------------------------------------------

MILVUS_VALUES = {"standalone": K8S / "milvus" / "values-standalone.yaml",
                 "cluster": K8S / "milvus" / "values-cluster.yaml"}
ARXIV_PAPERS = 3_000_000


def resident_bytes(m: int, dimension: int = 768) -> float:
    """Vectors (float32) plus HNSW layer-0 links (2M x 4 B) and ~7% for the upper layers."""
    return ARXIV_PAPERS * dimension * 4 + ARXIV_PAPERS * 2 * m * 4 * 1.07


def limits_of(component: dict) -> tuple[int, int]:
    resources = component["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"]) and {"cpu", "memory"} <= set(resources["limits"])
    return int(parse_quantity(resources["limits"]["memory"])), int(parse_quantity(resources["requests"]["memory"]))


@pytest.mark.parametrize("mode", MILVUS_VALUES)
def test_milvus_values_are_sized_for_the_whole_arxiv(mode):
    values = yaml.safe_load(MILVUS_VALUES[mode].read_text())
    retriever = find(render(OVERLAYS["production"]), "ConfigMap", "retriever-config")["data"]
    needed = resident_bytes(int(retriever["CITEWEAVE_RETRIEVER_HNSW_M"]))
    assert values["cluster"]["enabled"] is (mode == "cluster")
    if mode == "standalone":
        limit, request = limits_of(values["standalone"])
        assert request >= needed * 1.5 and limit >= needed * 3, "standalone holds the whole index"
        assert values["standalone"]["persistence"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert not values["pulsarv3"]["enabled"] and values["minio"]["mode"] == "standalone"
    else:
        nodes = values["queryNode"]["replicas"]
        limit, _ = limits_of(values["queryNode"])
        assert nodes >= 2 and limit * (nodes - 1) >= needed * 1.5, \
            "the query nodes left when one restarts must hold the index"
        for component in ("proxy", "mixCoordinator", "indexNode", "dataNode"):
            limits_of(values[component])
    for dependency in ("etcd", "minio"):
        limits_of(values[dependency])
        assert values[dependency]["persistence"]["enabled"]
    assert values["minio"]["persistence"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert "scalarField: true" in values["extraConfigFiles"]["user.yaml"]


@pytest.mark.parametrize("mode", MILVUS_VALUES)
def test_milvus_install_command_matches_where_the_retriever_looks(mode):
    release, namespace, port = milvus_location(render(OVERLAYS["production"]))
    text = MILVUS_VALUES[mode].read_text()
    assert re.search(rf"helm install {release} zilliztech/milvus .*-n {namespace}\b", text), \
        f"{MILVUS_VALUES[mode].name} installs Milvus somewhere the retriever does not look"
    assert yaml.safe_load(text).get("service", {}).get("port", 19530) == port


# ---- docs/deploy.md -----------------------------------------------------------------------------

DEPLOY_DOC = REPO / "docs" / "deploy.md"


def test_deploy_doc_names_only_paths_that_exist():
    text = DEPLOY_DOC.read_text()
    paths = set(re.findall(r"(?<![\w/])((?:deploy|tests|services|bench|data)/[\w./-]*\w)", text))
    assert paths, "docs/deploy.md names no paths"
    # `deploy/NAME` alone is kubectl's short form of a Deployment, not a path.
    paths = {p for p in paths if not (p.startswith("deploy/") and p.count("/") == 1)}
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing, f"docs/deploy.md names paths that do not exist: {missing}"


def test_deploy_doc_names_only_real_settings():
    text = DEPLOY_DOC.read_text()
    for service, field in re.findall(r"CITEWEAVE_([A-Z]+)_([A-Z_]*[A-Z])\b", text):
        if service == "SVC":
            continue
        service = service.lower()
        assert service in SERVICE_ORDER, f"docs/deploy.md: CITEWEAVE_{service.upper()}_... is no service"
        name = field.lower()
        fields = settings_class(service).model_fields
        # `_MAX_BATCH_TOKENS` style shorthand after a full name is written with a leading underscore.
        assert name in fields or any(f.endswith(name) for f in fields), \
            f"docs/deploy.md: CITEWEAVE_{service.upper()}_{field} is not a setting"
