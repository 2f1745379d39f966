"""Names the chart derives from the release: valid for their kind whatever name Helm
accepts, a selector `helm upgrade` can keep, and one leader Lease (and kopf peering
object) per release, owned so that `helm uninstall` leaves none behind."""

from __future__ import annotations

import re

import pytest
from tests.chart import conftest
from tests.chart.test_operator_write_policy import refusals

DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
"""Service names (the API server's ValidateServiceName)."""
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

DOTTED = "my.release"
"""A release name Helm accepts (its own check allows dots) that is no DNS-1035 label."""


def _args(deploy):
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    return {flag: args[i + 1] for i, flag in enumerate(args)
            if flag.startswith("--") and i + 1 < len(args) and not args[i + 1].startswith("--")}


def _valid_name(kind: str, name: str) -> bool:
    if kind == "Service":
        return len(name) <= 63 and DNS1035_LABEL.fullmatch(name) is not None
    if kind == "CustomResourceDefinition":
        return DNS1123_SUBDOMAIN.fullmatch(name) is not None
    # Everything else the chart names is a 63-character label (pods of the Deployment
    # take its name as their prefix and hostname).
    return len(name) <= 63 and DNS1123_LABEL.fullmatch(name) is not None


@pytest.mark.parametrize("release", [DOTTED, "a.b.c", "r" * 26 + "." + "r" * 26])
def test_a_dotted_release_name_renders_names_the_api_server_accepts(render, release):
    values = {**conftest.NON_DEFAULT_VALUES, "kopfPeering": {"enabled": True},
              "replicaCount": 1}
    rendered = render(values, name=release)
    named = [(o["kind"], o["metadata"]["name"]) for o in conftest.objects(rendered)]
    assert [n for n in named if not _valid_name(*n)] == []
    (service,) = conftest.find(rendered, "Service")
    (deploy,) = conftest.find(rendered, "Deployment")
    args = _args(deploy)
    # Every object of the release is named alike ("." becomes "-"), not just the Service.
    base = release.replace(".", "-")[:40]
    assert deploy["metadata"]["name"].startswith(base)
    assert service["metadata"]["name"].startswith(base)
    assert service["metadata"]["name"].endswith("-metrics")
    for flag in ("--leader-lease", "--owner", "--peering"):
        assert DNS1123_LABEL.fullmatch(args[flag]), (flag, args[flag])
    # Label values may hold dots: the instance label (and selector) keeps the name as is.
    assert deploy["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] == release


def test_a_dotted_release_is_named_like_its_dashed_twin(render):
    dotted = {(o["kind"], o["metadata"]["name"]) for o in conftest.objects(render(name=DOTTED))}
    dashed = {(o["kind"], o["metadata"]["name"])
              for o in conftest.objects(render(name="my-release"))}
    assert dotted == dashed


@pytest.mark.parametrize(("release", "values"), [
    ("1st", {}),
    ("kooper", {"fullnameOverride": "1ops"}),
])
def test_a_service_name_that_cannot_start_with_a_letter_fails_with_one_message(
        helm, render, release, values):
    with pytest.raises(helm.HelmRenderError, match=re.escape(
            "is not a DNS-1035 label (it must start with a letter): install under a release "
            "name that starts with a letter, or set fullnameOverride")):
        render(values, name=release)
    # Without the Service every name is a DNS-1123 label: nothing to refuse.
    rendered = render({**values, "metrics": {"service": {"enabled": False}}}, name=release)
    assert all(_valid_name(o["kind"], o["metadata"]["name"])
               for o in conftest.objects(rendered))


@pytest.mark.parametrize(("release", "values", "selector"), [
    ("kooper", {}, {"name": "kooper", "instance": "kooper"}),
    ("team-a", {"fullnameOverride": "ops"}, {"name": "kooper", "instance": "team-a"}),
    ("team-a", {"fullnameOverride": "other-ops"}, {"name": "kooper", "instance": "team-a"}),
    ("team-a", {"nameOverride": "ops"}, {"name": "ops", "instance": "team-a"}),
    (DOTTED, {}, {"name": "kooper", "instance": DOTTED}),
])
def test_the_selector_is_the_starter_charts_name_and_instance(render, release, values, selector):
    """Helm's starter chart: app.kubernetes.io/name (the chart name or nameOverride) and
    app.kubernetes.io/instance (the release name), here plus the component. The full name
    (fullnameOverride, the "." → "-" rewrite) never enters it, so changing it keeps the
    selector; nameOverride does, as in the starter chart (values.yaml says so)."""
    rendered = render(values, name=release)
    (deploy,) = conftest.find(rendered, "Deployment")
    expected = {"app.kubernetes.io/name": selector["name"],
                "app.kubernetes.io/instance": selector["instance"],
                "app.kubernetes.io/component": "operator"}
    assert deploy["spec"]["selector"] == {"matchLabels": expected}
    labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert {k: labels[k] for k in expected} == expected
    for kind in ("PodDisruptionBudget", "Service"):
        (obj,) = conftest.find(rendered, kind)
        assert obj["spec"]["selector"].get("matchLabels", obj["spec"]["selector"]) == expected


PEERING = {"replicaCount": 1, "kopfPeering": {"enabled": True}}


def test_two_releases_in_one_namespace_each_get_their_own_lease_and_peering_object(render):
    leases, peerings = {}, {}
    for release in ("team-a", "team-b"):
        (deploy,) = conftest.find(render(name=release), "Deployment")
        leases[release] = _args(deploy)["--leader-lease"]
        rendered = render(PEERING, name=release)
        (deploy,) = conftest.find(rendered, "Deployment")
        (peering,) = conftest.find(rendered, "KopfPeering")
        assert _args(deploy)["--peering"] == peering["metadata"]["name"]
        peerings[release] = peering["metadata"]["name"]
    assert leases == {"team-a": "team-a-kooper-operator-leader",
                      "team-b": "team-b-kooper-operator-leader"}
    assert peerings == {"team-a": "team-a-kooper", "team-b": "team-b-kooper"}
    # An explicit peering name still wins (shared with other kopf operators on purpose).
    (peering,) = conftest.find(
        render({**PEERING, "kopfPeering": {"enabled": True, "name": "shared"}}), "KopfPeering")
    assert peering["metadata"]["name"] == "shared"


def test_the_lease_keeps_its_old_name_for_the_release_named_kooper(render):
    """Release "kooper" (the docs' name) upgrades onto the Lease every earlier chart used:
    no second leader Lease during the roll."""
    (deploy,) = conftest.find(render(name="kooper"), "Deployment")
    assert _args(deploy)["--leader-lease"] == "kooper-operator-leader"


def test_each_release_may_renew_and_write_its_own_lease_only(render):
    rendered = render({"operator": {"watchAllNamespaces": True}}, name="team-a")
    (role,) = conftest.find(rendered, "Role", "team-a-kooper-leader-election")
    renew = [r for r in role["rules"] if r.get("resourceNames") and r["resources"] == ["leases"]]
    assert renew == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                      "resourceNames": ["team-a-kooper-operator-leader"],
                      "verbs": ["get", "update", "delete"]}]
    (policy,) = conftest.find(rendered, "ValidatingAdmissionPolicy",
                              "team-a-kooper-kooper-system-operator-writes")
    user = f"system:serviceaccount:{conftest.NAMESPACE}:team-a-kooper"
    lease = {"metadata": {"name": "team-a-kooper-operator-leader"}}
    for operation in ("CREATE", "UPDATE"):
        assert refusals(policy, resource="leases", name="team-a-kooper-operator-leader",
                        operation=operation, obj=lease, user=user) == []
        # Not the other release's, nor a ConfigMap that takes the Lease's name.
        assert refusals(policy, resource="leases", name="team-b-kooper-operator-leader",
                        operation=operation, obj=lease, user=user)
        assert refusals(policy, resource="configmaps", name="team-a-kooper-operator-leader",
                        operation=operation, obj={"metadata": {"labels": {}}}, user=user)


@pytest.mark.parametrize("values", [{}, {"replicaCount": 1, "leaderElection": {"enabled": False},
                                        "kopfPeering": {"enabled": True}}],
                         ids=["leader-election", "peering"])
@pytest.mark.parametrize("release", ["kooper", "team-a", DOTTED])
def test_the_operator_is_told_its_deployment_and_may_read_only_that_one(
        render, release, values):
    """`helm uninstall` deletes the Deployment; the operator put an ownerReference to it on
    the Lease and the KopfPeering it runs with (``--owner``), so the garbage collector
    deletes them too. It may read that one Deployment (for its uid) and no other."""
    rendered = render(values, name=release)
    (deploy,) = conftest.find(rendered, "Deployment")
    name = deploy["metadata"]["name"]
    assert _args(deploy)["--owner"] == name
    (role,) = conftest.find(rendered, "Role", f"{name}-owner")
    assert role["metadata"]["namespace"] == deploy["metadata"]["namespace"]
    assert role["rules"] == [{"apiGroups": ["apps"], "resources": ["deployments"],
                              "resourceNames": [name], "verbs": ["get"]}]
    (binding,) = conftest.find(rendered, "RoleBinding", f"{name}-owner")
    assert binding["roleRef"]["name"] == f"{name}-owner"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name,
                                    "namespace": deploy["metadata"]["namespace"]}]
    assert not [r for o in conftest.find(rendered, "Role") if o is not role
                for r in o["rules"] if "deployments" in r["resources"]]


@pytest.mark.parametrize(("watch", "owned"), [("", True), ("team-a", False)])
def test_the_operator_may_delete_only_the_peering_object_it_owns(render, watch, owned):
    """Setting an ownerReference needs the right to delete the object where the
    OwnerReferencesPermissionEnforcement admission plugin runs: granted for the one
    peering object the operator owns (in the release namespace), nowhere else."""
    rendered = render({**PEERING, "operator": {"watchNamespace": watch}}, name="team-a")
    (role,) = conftest.find(rendered, "Role", "team-a-kooper")
    deletes = [r for r in role["rules"] if r["apiGroups"] == ["kopf.dev"]
               and "delete" in r["verbs"]]
    assert deletes == ([{"apiGroups": ["kopf.dev"], "resources": ["kopfpeerings"],
                         "resourceNames": ["team-a-kooper"], "verbs": ["delete"]}]
                       if owned else [])
