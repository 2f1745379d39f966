"""The chart, rendered by a real Helm: it lints, every object is valid, defaults are safe."""

from __future__ import annotations

import re

import kubernetes_validate
import pytest
import yaml
from tests.chart import conftest, crdschema

VALUE_SETS = {"default": {}, "non-default": conftest.NON_DEFAULT_VALUES}


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_helm_lint_strict_reports_no_errors_or_warnings(helm, values):
    report = helm.lint(str(conftest.CHART), values, strict=True)
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert report["errors"] == [], report
    assert problems == [], report


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_every_rendered_object_validates_against_the_newest_kubernetes_schemas(render, values):
    rendered = render(values)
    crds = {
        o["spec"]["names"]["kind"]: o for o in conftest.find(rendered, "CustomResourceDefinition")
    }
    checked = 0
    for obj in conftest.objects(rendered):
        if obj["apiVersion"] == "monitoring.coreos.com/v1":
            # The Prometheus Operator's CRDs are not part of Kubernetes: check the essentials
            # (test_observability.py checks the rules with promtool).
            assert obj["kind"] in {"ServiceMonitor", "PrometheusRule"}
            if obj["kind"] == "ServiceMonitor":
                assert obj["spec"]["endpoints"][0]["port"] == "metrics"
            else:
                assert obj["spec"]["groups"][0]["rules"]
        elif obj["apiVersion"] == "kopf.dev/v1":
            assert obj["kind"] in {"ClusterKopfPeering", "KopfPeering"}
            if obj["kind"] in crds:  # installed by this release: check against that CRD
                assert crdschema.admit(crds[obj["kind"]], obj)[1] == []
        else:
            assert kubernetes_validate.validate(obj, conftest.KUBE_VERSION, strict=True)
        checked += 1
    assert checked >= 12


def test_default_render_has_the_expected_objects(render):
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in conftest.objects(render()))
    assert kinds == sorted(
        [
            ("ClusterRole", "kooper-kooper-system-crd-reader"),
            ("ClusterRoleBinding", "kooper-kooper-system-crd-reader"),
            ("Role", "kooper"),
            ("RoleBinding", "kooper"),
            ("ValidatingAdmissionPolicy", "kooper-kooper-system-operator-writes"),
            ("ValidatingAdmissionPolicyBinding", "kooper-kooper-system-operator-writes"),
            ("CustomResourceDefinition", "connectors.kooper.dev"),
            ("CustomResourceDefinition", "workergroups.kooper.dev"),
            ("Deployment", "kooper"),
            ("PodDisruptionBudget", "kooper"),
            ("Role", "kooper-leader-election"),
            ("RoleBinding", "kooper-leader-election"),
            ("Role", "kooper-owner"),
            ("RoleBinding", "kooper-owner"),
            ("Role", "kooper-worker"),
            ("RoleBinding", "kooper-worker"),
            ("Service", "kooper-metrics"),
            ("ServiceAccount", "kooper"),
            ("ServiceAccount", "kooper-worker"),
            ("ValidatingAdmissionPolicy", "kooper-kooper-system-worker-own-lease"),
            ("ValidatingAdmissionPolicyBinding", "kooper-kooper-system-worker-own-lease"),
        ]
    )


def test_operator_runs_a_leader_and_a_hot_standby_with_the_documented_command(render):
    (deploy,) = conftest.find(render(), "Deployment")
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    # The release namespace only, unless operator.watchAllNamespaces says otherwise.
    assert container["args"] == [
        "run",
        "--namespace",
        conftest.NAMESPACE,
        "--metrics-port",
        "9090",
        "--health-port",
        "8080",
        "--leader-election",
        "--leader-namespace",
        conftest.NAMESPACE,
        # Release "kooper": the Lease name of every earlier chart; the Deployment owns it.
        "--leader-lease",
        "kooper-operator-leader",
        "--owner",
        "kooper",
    ]
    assert container["image"] == "kooper:0.1.0"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": 8080, "metrics": 9090}
    assert container["resources"]["requests"]
    assert container["resources"]["limits"]


def test_the_leader_and_its_standby_prefer_different_nodes_unless_told_otherwise(render):
    (deploy,) = conftest.find(render(), "Deployment")
    spec = deploy["spec"]["template"]["spec"]
    (preferred,) = spec["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"]
    term = preferred["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]
    own = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["ops"]}]}]}}}
    (deploy,) = conftest.find(render({"operator": {"affinity": own}}), "Deployment")
    assert deploy["spec"]["template"]["spec"]["affinity"] == own
    (deploy,) = conftest.find(render({"replicaCount": 1, "leaderElection": {"enabled": False}}),
                              "Deployment")
    assert "affinity" not in deploy["spec"]["template"]["spec"]


def test_leader_election_may_create_leases_and_renew_only_the_leader_lease(render):
    rendered = render()
    (role,) = conftest.find(rendered, "Role", "kooper-leader-election")
    assert role["metadata"]["namespace"] == conftest.NAMESPACE
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "resourceNames": ["kooper-operator-leader"], "verbs": ["get", "update", "delete"]},
    ]
    (binding,) = conftest.find(rendered, "RoleBinding", "kooper-leader-election")
    assert binding["subjects"][0]["name"] == "kooper"


def test_one_replica_without_leader_election_recreates_and_more_need_election(helm, render):
    single = render({"replicaCount": 1, "leaderElection": {"enabled": False}})
    (deploy,) = conftest.find(single, "Deployment")
    assert deploy["spec"]["strategy"] == {"type": "Recreate"}
    assert "--leader-election" not in deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert conftest.find(single, "Role", "kooper-leader-election") == []
    (pdb,) = conftest.find(single, "PodDisruptionBudget")
    assert pdb["spec"] == {**pdb["spec"], "maxUnavailable": 1}
    with pytest.raises(Exception, match="replicaCount above 1 needs leaderElection"):
        render({"leaderElection": {"enabled": False}})


def test_operator_pod_meets_the_restricted_pod_security_standard(render):
    (deploy,) = conftest.find(render(), "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}


def test_non_default_values_reach_the_deployment(render):
    (deploy,) = conftest.find(render(conftest.NON_DEFAULT_VALUES), "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "registry.invalid/kooper@sha256:" + "a" * 64
    assert container["args"][:3] == ["run", "--namespace", "team-a"]
    assert container["args"][-1] == "--verbose"
    assert {"name": "KOOPER_LOG", "value": "debug"} in container["env"]
    assert pod["imagePullSecrets"] == [{"name": "pull-secret"}]
    assert pod["priorityClassName"] == "system-cluster-critical"


OPERATOR_RULES = {
    ("kooper.dev", "workergroups"): {"get", "list", "watch", "patch"},
    ("kooper.dev", "connectors"): {"get", "list", "watch", "patch"},
    ("kooper.dev", "workergroups/status"): {"get", "patch"},
    ("kooper.dev", "connectors/status"): {"get", "patch"},
    ("", "pods"): {"get", "list", "watch"},
    ("apps", "statefulsets"): {"get", "list", "watch"},
    ("apps", "replicasets"): {"get", "list", "watch"},
    # Created (POST), replaced with a resourceVersion precondition (PUT) and deleted
    # (shell/kube.py); never patched.
    ("", "configmaps"): {"get", "list", "watch", "create", "update", "delete"},
    # Member Leases are only read: a worker releases its own, the Pod's deletion removes
    # it (owner reference). The leader Lease has its own Role.
    ("coordination.k8s.io", "leases"): {"get", "list", "watch"},
    ("", "events"): {"create", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
}


def _grants(role):
    out = {}
    for rule in role["rules"]:
        assert "resourceNames" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def test_cluster_wide_operator_gets_exactly_the_documented_verbs(render):
    rendered = render({"operator": {"watchAllNamespaces": True}})
    (deploy,) = conftest.find(rendered, "Deployment")
    assert "--namespace" not in deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    (role,) = conftest.find(rendered, "ClusterRole", "kooper-kooper-system")
    assert _grants(role) == {
        **OPERATOR_RULES,
        ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
    }


def test_namespaced_operator_gets_a_role_in_its_namespace_and_only_crd_reads_cluster_wide(render):
    rendered = render({"operator": {"watchNamespace": "team-a"},
                       "kopfPeering": {"enabled": True}, "replicaCount": 1})
    (role,) = conftest.find(rendered, "Role", "kooper")
    assert role["metadata"]["namespace"] == "team-a"
    assert _grants(role) == {
        **OPERATOR_RULES,
        ("kopf.dev", "kopfpeerings"): {"get", "list", "watch", "patch"},
    }
    (cluster_role,) = conftest.find(rendered, "ClusterRole")
    assert _grants(cluster_role) == {
        ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"}
    }
    (peering,) = conftest.find(rendered, "KopfPeering")
    assert peering["metadata"]["namespace"] == "team-a"


def test_chart_readme_lists_every_operator_and_worker_verb():
    readme = (conftest.CHART / "README.md").read_text()
    for (group, resource), verbs in OPERATOR_RULES.items():
        row = next(
            (
                line
                for line in readme.splitlines()
                if line.startswith("|")
                and f"`{resource}`" in line
                and f"`{group or 'core'}`" in line
            ),
            None,
        )
        assert row is not None, f"README has no RBAC row for {group}/{resource}"
        for verb in verbs:
            assert verb in row, f"README row for {resource} lacks {verb}"


def test_workers_may_read_configmaps_and_write_leases_only(render):
    rendered = render({"workers": {"namespaces": ["team-a", "team-b"]}})
    roles = conftest.find(rendered, "Role", "kooper-worker")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    for role in roles:
        assert _grants(role) == {
            ("", "configmaps"): {"get", "list", "watch"},
            ("coordination.k8s.io", "leases"): {"get", "create", "update", "patch", "delete"},
        }
    sas = conftest.find(rendered, "ServiceAccount", "kooper-worker")
    assert sorted(s["metadata"]["namespace"] for s in sas) == ["team-a", "team-b"]


def test_peering_is_off_by_default_and_then_needs_no_peering_rights(render):
    rendered = render()
    (deploy,) = conftest.find(rendered, "Deployment")
    assert "--peering" not in deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    (role,) = conftest.find(rendered, "Role", "kooper")
    assert not any(group == "kopf.dev" for group, _ in _grants(role))
    assert conftest.find(rendered, "ClusterKopfPeering") == []


def test_crds_keep_and_enabled_switches(render):
    keep = conftest.find(render(), "CustomResourceDefinition")
    assert all(c["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"} for c in keep)
    no_keep = conftest.find(render({"crds": {"keep": False}}), "CustomResourceDefinition")
    assert all("annotations" not in c["metadata"] for c in no_keep)
    none = conftest.find(
        render({"crds": {"enabled": False}, "replicaCount": 1,
                "kopfPeering": {"enabled": True, "crds": {"enabled": False}}}),
        "CustomResourceDefinition",
    )
    assert none == []


def _peering_crds(rendered):
    return sorted(c["metadata"]["name"] for c in conftest.find(rendered, "CustomResourceDefinition")
                  if c["spec"]["group"] == "kopf.dev")


def test_kopf_peering_crds_only_when_peering_is_enabled(render):
    assert _peering_crds(render()) == []
    assert _peering_crds(render({"kopfPeering": {"crds": {"enabled": True}}})) == []
    assert _peering_crds(render({"kopfPeering": {"enabled": True}, "replicaCount": 1})) == [
        "clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev"]
    assert _peering_crds(render({"replicaCount": 1, "kopfPeering": {
        "enabled": True, "crds": {"enabled": False}}})) == []


def test_service_monitor_only_when_enabled(render):
    assert conftest.find(render(), "ServiceMonitor") == []
    (monitor,) = conftest.find(
        render({"metrics": {"serviceMonitor": {"enabled": True}}}), "ServiceMonitor"
    )
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"


def test_pod_disruption_budget_keeps_one_of_two_replicas_by_default(render):
    (pdb,) = conftest.find(render(), "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1  # a drain never takes the last replica
    assert "maxUnavailable" not in pdb["spec"]
    (pdb,) = conftest.find(
        render({"podDisruptionBudget": {"minAvailable": "50%"}}), "PodDisruptionBudget"
    )
    assert pdb["spec"]["minAvailable"] == "50%"
    assert "maxUnavailable" not in pdb["spec"]


def test_generated_names_fit_in_63_characters_even_for_the_longest_release_name(render):
    rendered = render(conftest.NON_DEFAULT_VALUES, name="r" * 53)
    names = [o["metadata"]["name"] for o in conftest.objects(rendered)]
    assert all(len(n) <= 63 and not n.endswith("-") for n in names), names
    keys = [
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
        for o in conftest.objects(rendered)
    ]
    assert len(set(keys)) == len(keys), "truncation made two objects collide"
    labels = [v for o in conftest.objects(rendered) for v in o["metadata"]["labels"].values()]
    assert all(len(v) <= 63 for v in labels)


BAD_VALUES = [
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ({"operator": {"replicas": 2}}, "additional properties 'replicas' not allowed"),
    ({"unknownTopLevel": True}, "additional properties 'unknownTopLevel' not allowed"),
    ({"metrics": {"port": 70000}}, "/metrics/port"),
    ({"operator": {"watchNamespace": "Team_A"}}, "/operator/watchNamespace"),
    ({"workers": {"namespaces": ["ok", "ok"]}}, "/workers/namespaces"),
    ({"crds": {"enabled": "yes"}}, "/crds/enabled"),
    # The pre-rename name fails loudly instead of being ignored.
    ({"crds": {"install": False}}, "additional properties 'install' not allowed"),
    ({"image": {"digest": "latest"}}, "/image/digest"),
    (
        {"operator": {"securityContext": {"runAsRoot": True}}},
        "additional properties 'runAsRoot' not allowed",
    ),
    # The API server refuses these probe fields (validateReadinessProbe/LivenessProbe):
    # say so at install time, not halfway through applying the release.
    (
        {"operator": {"readinessProbe": {"terminationGracePeriodSeconds": 5}}},
        "additional properties 'terminationGracePeriodSeconds' not allowed",
    ),
    ({"operator": {"livenessProbe": {"successThreshold": 2}}},
     "/operator/livenessProbe/successThreshold"),
    # Names of objects (and a label value): a DNS-1123 label, or the API server refuses them.
    ({"fullnameOverride": "Kooper_Ops"}, "/fullnameOverride"),
    ({"nameOverride": "Kooper"}, "/nameOverride"),
    ({"nameOverride": "kooper.ops"}, "/nameOverride"),
    # Not Kubernetes quantities: binary suffixes are Ki, Mi, Gi, ...; nothing is negative.
    ({"operator": {"resources": {"requests": {"memory": "512mi"}}}},
     "/operator/resources/requests/memory"),
    ({"operator": {"resources": {"limits": {"cpu": "-1"}}}}, "/operator/resources/limits/cpu"),
    ({"serviceAccount": {"name": "Kooper_Operator"}}, "/serviceAccount/name"),
    ({"operator": {"nodeSelector": {"pool": "ops pool"}}}, "/operator/nodeSelector/pool"),
    # Not a label value: the API server would refuse the pod template.
    ({"operator": {"podLabels": {"team": "ops team"}}}, "/operator/podLabels/team"),
]


GOOD_VALUES = [
    {"operator": {"podLabels": {"example.com/team": "ops", "tier": "", "v": "1.2_a-b"}}},
    {"operator": {"podLabels": None}},  # `--set operator.podLabels=null` drops the default
    {"operator": {"readinessProbe": {"successThreshold": 2}}},
    {"fullnameOverride": "team-a-kooper", "nameOverride": "operator"},
    {"serviceAccount": {"name": "kooper.operator"},
     "operator": {"nodeSelector": {"node-role.kubernetes.io/ops": "", "pool": "ops_1.a"}}},
    {"operator": {"resources": {"requests": {"cpu": 0.5, "memory": "1.5Gi"},
                                "limits": {"cpu": "1500m", "memory": "2e9",
                                           "ephemeral-storage": "64M"}}}},
    {"operator": {"livenessProbe": {"successThreshold": 1, "terminationGracePeriodSeconds": 5}}},
]
"""Odd but valid values the schema must keep accepting."""


@pytest.mark.parametrize("values", GOOD_VALUES)
def test_odd_but_valid_values_render(render, values):
    (deploy,) = conftest.find(render(values), "Deployment")
    pod = deploy["spec"]["template"]
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "operator"
    assert kubernetes_validate.validate(deploy, conftest.KUBE_VERSION, strict=True)


@pytest.mark.parametrize(("values", "message"), BAD_VALUES)
def test_bad_values_fail_rendering_with_the_schema_message(helm, render, values, message):
    with pytest.raises(helm.HelmValuesError) as info:
        render(values)
    assert "values don't meet the specifications of the schema" in str(info.value)
    assert message in str(info.value)


CONTRADICTIONS = [
    (
        {"podDisruptionBudget": {"minAvailable": 1, "maxUnavailable": 1}},
        "podDisruptionBudget: set minAvailable or maxUnavailable, not both",
    ),
    (
        {"metrics": {"serviceMonitor": {"enabled": True}, "service": {"enabled": False}}},
        "metrics.serviceMonitor.enabled needs metrics.service.enabled",
    ),
    ({"operator": {"healthPort": 9090}}, "operator.healthPort and metrics.port must differ"),
    # kopf pauses every peer when the highest priority is shared, and every replica of the
    # Deployment runs with the same priority: two of them would both pause, for good.
    ({"kopfPeering": {"enabled": True}}, "kopfPeering.enabled needs replicaCount: 1"),
    # A pod label that repeats a selector label would make the pod template disagree with
    # the Deployment's (immutable) selector, or the rendered YAML repeat a key.
    *[({"operator": {"podLabels": {key: "x"}}},
       f"operator.podLabels must not set {key}: the chart sets it")
      for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance",
                  "app.kubernetes.io/component")],
]


@pytest.mark.parametrize(("values", "message"), CONTRADICTIONS)
def test_contradictory_values_fail_rendering_with_a_message(helm, render, values, message):
    with pytest.raises(helm.HelmRenderError, match=re.escape(message)):
        render(values)


@pytest.mark.parametrize(("values", "watched"), [
    ({}, "namespace kooper-system"),
    ({"operator": {"watchNamespace": "team-a"}}, "namespace team-a"),
    ({"operator": {"watchAllNamespaces": True}}, "all namespaces"),
])
def test_notes_name_the_namespaces_the_operator_is_given(render, render_text, values, watched):
    notes = next(text for path, text in render_text(values).items() if path.endswith("NOTES.txt"))
    assert f"The operator watches {watched}." in notes
    deployment = conftest.find(render(values), "Deployment")[0]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    if watched == "all namespaces":
        assert "--namespace" not in args
    else:
        assert args[args.index("--namespace") + 1] == watched.removeprefix("namespace ")


def test_notes_tell_the_next_commands(render_text):
    notes = next(text for path, text in render_text().items() if path.endswith("NOTES.txt"))
    assert "kubectl -n kooper-system rollout status deployment/kooper" in notes
    assert "kubectl -n kooper-system apply -f examples/" in notes
    assert "get wg,kconn" in notes
    assert "crds.enabled" not in notes


def test_notes_say_to_install_the_crds_when_the_chart_does_not(render_text):
    rendered = render_text({"crds": {"enabled": False}})
    notes = next(text for path, text in rendered.items() if path.endswith("NOTES.txt"))
    assert "crds.enabled=false, so install the CRDs yourself first" in notes


PASS_THROUGH = {
    "resources",
    "podSecurityContext",
    "securityContext",
    "livenessProbe",
    "readinessProbe",
}
"""Kubernetes objects copied into the Deployment as they are: commented as a whole."""


def test_every_values_key_has_a_comment():
    lines = (conftest.CHART / "values.yaml").read_text().splitlines()
    parents: list[tuple[int, str]] = []
    for number, line in enumerate(lines):
        match = re.match(r"^(\s*)([A-Za-z][\w]*):", line)
        if not match:
            continue
        indent = len(match.group(1))
        parents = [(i, k) for i, k in parents if i < indent]
        inside_pass_through = any(k in PASS_THROUGH for _, k in parents)
        parents.append((indent, match.group(2)))
        if inside_pass_through:
            continue
        previous = lines[number - 1].strip() if number else ""
        assert previous.startswith("#"), (
            f"values.yaml line {number + 1}: {match.group(2)} has no comment"
        )


CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                  "ValidatingAdmissionPolicyBinding"}
"""Cluster-scoped objects that belong to one release (the CRDs are shared on purpose)."""


@pytest.mark.parametrize("values", [{}, {"operator": {"watchAllNamespaces": True}},
                                    conftest.NON_DEFAULT_VALUES],
                         ids=["default", "all-namespaces", "non-default"])
def test_the_same_release_name_in_two_namespaces_shares_no_cluster_scoped_object(render, values):
    # Helm release names are per namespace: `helm install kooper -n team-a` and
    # `helm install kooper -n team-b --set crds.enabled=false` must not fight over (or
    # silently overwrite) each other's ClusterRoles or admission policies.
    def cluster_scoped(namespace):
        rendered = render({**values, "crds": {"enabled": False}}, namespace=namespace)
        return {(o["kind"], o["metadata"]["name"]): o for o in conftest.objects(rendered)
                if o["kind"] in CLUSTER_SCOPED}

    a, b = cluster_scoped("team-a"), cluster_scoped("team-b")
    assert a
    assert b
    assert set(a) & set(b) == set()
    for objs in (a, b):
        for obj in objs.values():  # every reference still names an object of the release
            ref = obj.get("roleRef", {}).get("name") or obj.get("spec", {}).get("policyName")
            if ref is not None:
                assert any(name == ref for _, name in objs), (obj["metadata"]["name"], ref)


def test_workers_default_to_the_namespace_the_operator_watches(render, render_text):
    # Member pods run next to their WorkerGroup, and the operator sees only the groups of
    # the namespace it watches: that is where they need the worker ServiceAccount and Role,
    # and where NOTES tell the user to create the demo group.
    values = {"operator": {"watchNamespace": "team-a"}}
    rendered = render(values)
    (role,) = conftest.find(rendered, "Role", "kooper-worker")
    assert role["metadata"]["namespace"] == "team-a"
    (sa,) = conftest.find(rendered, "ServiceAccount", "kooper-worker")
    assert sa["metadata"]["namespace"] == "team-a"
    (policy,) = [p for p in conftest.find(rendered, "ValidatingAdmissionPolicy")
                 if p["metadata"]["name"].endswith("worker-own-lease")]
    assert "system:serviceaccount:team-a:kooper-worker" in (
        policy["spec"]["matchConditions"][0]["expression"])
    notes = next(t for p, t in render_text(values).items() if p.endswith("NOTES.txt"))
    assert "kubectl -n team-a apply -f examples/" in notes
    # Watching every namespace, or the release's, the default stays the release namespace.
    for values in ({}, {"operator": {"watchAllNamespaces": True}}):
        (role,) = conftest.find(render(values), "Role", "kooper-worker")
        assert role["metadata"]["namespace"] == conftest.NAMESPACE


@pytest.mark.parametrize("values", [{"workers": {"serviceAccount": {"create": False}}},
                                    {"workers": {"rbac": {"create": False}}}],
                         ids=["no-service-account", "no-worker-rbac"])
def test_notes_do_not_claim_a_worker_service_account_the_chart_did_not_create(
        render, render_text, values):
    assert conftest.find(render(values), "ServiceAccount", "kooper-worker") == []
    notes = next(t for p, t in render_text(values).items() if p.endswith("NOTES.txt"))
    assert "this chart created" not in notes
    assert '"kooper-worker"' in notes  # still named: the examples' pods use it


SELECTOR = {"app.kubernetes.io/name": "kooper", "app.kubernetes.io/instance": "kooper",
            "app.kubernetes.io/component": "operator"}
"""The operator Deployment's selector for release "kooper": immutable once installed."""


@pytest.mark.parametrize("values", [
    {}, conftest.NON_DEFAULT_VALUES, {"operator": {"watchAllNamespaces": True}},
    {"replicaCount": 1, "leaderElection": {"enabled": False}},
    {"image": {"tag": "9.9.9"}, "operator": {"podLabels": {"tier": "ops"}}},
    {"fullnameOverride": "ops-kooper"},
], ids=["default", "non-default", "all-namespaces", "single", "new-image", "fullname"])
def test_the_selector_never_changes_with_values_users_change_later(render, values):
    # `helm upgrade` cannot change a Deployment's selector ("field is immutable"): it must
    # not carry the chart or app version, the image, or anything but the release and name.
    rendered = render(values)
    (deploy,) = conftest.find(rendered, "Deployment")
    assert deploy["spec"]["selector"] == {"matchLabels": SELECTOR}
    for kind in ("PodDisruptionBudget", "Service"):
        for obj in conftest.find(rendered, kind):
            selector = obj["spec"]["selector"]
            assert selector.get("matchLabels", selector) == SELECTOR


def test_rendered_objects_validate_against_the_oldest_kubernetes_the_chart_admits(render):
    chart = yaml.safe_load((conftest.CHART / "Chart.yaml").read_text())
    match = re.fullmatch(r">=(\d+)\.(\d+)\.0-0", chart["kubeVersion"])
    assert match, chart["kubeVersion"]
    oldest = f"{match.group(1)}.{match.group(2)}.0"
    for values in VALUE_SETS.values():
        for obj in conftest.objects(render(values)):
            if obj["apiVersion"] not in {"monitoring.coreos.com/v1", "kopf.dev/v1"}:
                assert kubernetes_validate.validate(obj, oldest, strict=True)


@pytest.mark.parametrize(("service_account", "expected"), [
    ({"create": False}, "kooper"), ({"create": False, "name": "ops-kooper"}, "ops-kooper"),
    ({"create": True, "name": "ops-kooper"}, "ops-kooper"),
], ids=["existing-unnamed", "existing-named", "created-named"])
def test_the_operator_rights_go_to_the_service_account_values_yaml_names(
        render, service_account, expected):
    # values.yaml: "empty means the generated full name". Falling back to the namespace's
    # `default` ServiceAccount instead would hand the operator's rights (and its exemption
    # in the admission policies) to every pod there that names no account.
    rendered = render({"serviceAccount": service_account})
    (deploy,) = conftest.find(rendered, "Deployment")
    assert deploy["spec"]["template"]["spec"]["serviceAccountName"] == expected
    subjects = [s for kind in ("RoleBinding", "ClusterRoleBinding")
                for b in conftest.find(rendered, kind)
                if not b["metadata"]["name"].endswith("-worker") for s in b["subjects"]]
    assert subjects
    assert {s["name"] for s in subjects} == {expected}
    policies = [p for p in conftest.find(rendered, "ValidatingAdmissionPolicy")
                if p["metadata"]["name"].endswith("operator-writes")]
    assert policies
    assert "system:serviceaccount:kooper-system:default" not in str(policies)
    assert f"system:serviceaccount:kooper-system:{expected}" in str(policies)


def test_app_version_is_the_version_of_the_package_the_image_runs():
    # The default image tag is appVersion: a release that bumps the package but not the
    # chart would install the previous operator.
    import tomllib

    import kooper

    chart = yaml.safe_load((conftest.CHART / "Chart.yaml").read_text())
    project = tomllib.loads((conftest.ROOT / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"] == kooper.__version__


def _readme_rows(heading):
    readme = (conftest.CHART / "README.md").read_text()
    section = readme.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")]
            for line in section.splitlines()
            if line.startswith("| `")]


def test_the_readme_values_table_names_real_values_with_their_defaults():
    values = yaml.safe_load((conftest.CHART / "values.yaml").read_text())
    rows = _readme_rows("Values you will change")
    assert len(rows) >= 10
    checked = 0
    for path_cell, default_cell, _ in rows:
        paths = re.findall(r"`([^`]+)`", path_cell)
        defaults = [d.strip() for d in default_cell.split(" / ")]
        assert len(paths) == len(defaults), path_cell
        for path, default in zip(paths, defaults, strict=True):
            current = values
            for part in path.split("."):
                assert isinstance(current, dict), f"README: {path}"
                assert part in current, f"README: {path}"
                current = current[part]
            literal = re.match(r"`([^`]*)`", default)
            if literal:  # a literal default (else words: "appVersion", "none")
                assert yaml.safe_load(literal.group(1)) == current, (path, default, current)
                checked += 1
    assert checked >= 10
