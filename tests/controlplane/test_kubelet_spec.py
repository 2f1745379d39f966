"""How the kubelet stand-in turns a pod spec into a local process (pure parts)."""

from __future__ import annotations

from kooper.controlplane import kubelet

POD = {
    "metadata": {"name": "w-0", "namespace": "team", "uid": "u-1",
                 "labels": {"app": "w"}, "annotations": {"a/b": "c"}},
    "spec": {"nodeName": "kooper-local", "serviceAccountName": "kooper-worker"},
}


def test_kooper_images_run_the_local_kooper_command_with_the_containers_args():
    container = {"image": "registry.example:5000/team/kooper-worker:0.1.0",
                 "args": ["worker", "--demo"]}
    assert kubelet.entrypoint(container) == [*kubelet.PYTHON_KOOPER, "worker", "--demo"]


def test_a_command_wins_over_the_image_and_kooper_is_the_local_kooper():
    assert kubelet.entrypoint({"image": "busybox", "command": ["kooper"], "args": ["run"]}) == [
        *kubelet.PYTHON_KOOPER, "run"]
    assert kubelet.entrypoint({"image": "busybox", "command": ["true"]}) == ["true"]


def test_an_unknown_image_without_a_command_cannot_run_here():
    assert kubelet.entrypoint({"image": "nginx:1.27"}) is None


def test_downward_api_fields():
    assert [kubelet.field_value(POD, f) for f in (
        "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
        "spec.serviceAccountName", "metadata.labels['app']", "metadata.annotations['a/b']",
        "status.podIP")] == ["w-0", "team", "u-1", "kooper-local", "kooper-worker", "w", "c",
                             "127.0.0.1"]


def test_only_an_exact_container_port_is_remapped():
    ports = {8080: 41234}
    assert [kubelet.remap(v, ports) for v in ("8080", "80800", "--port=8080", "9090")] == [
        "41234", "80800", "--port=8080", "9090"]


def test_image_repository_drops_registry_tag_and_digest():
    assert kubelet.image_repository("kooper:0.1.0") == "kooper"
    assert kubelet.image_repository("r.io/x/kooper-worker@sha256:ab") == "kooper-worker"


def test_a_pods_process_gets_its_own_mounts_and_the_pods_name_as_hostname(tmp_path):
    node = kubelet.Kubelet(None, state_dir=tmp_path, api_host="127.0.0.1", api_port=6443,
                           ca_file=tmp_path / "ca.crt")
    local = kubelet.LocalPod(
        uid="u-1", namespace="team", name="w-0", container="worker", image="kooper-worker",
        dir=tmp_path / "w-0", argv=["kooper", "worker"], env={"HOSTNAME": "w-0"}, probe=None,
        restart_policy="Always", token_sa="kooper-worker")
    command = node._command(local)
    assert command[:command.index("--")][:3] == ["unshare", "--mount", "--uts"]
    script = command[command.index("sh") + 2]
    assert 'hostname "$HOSTNAME"' in script
    assert command[-2:] == ["kooper", "worker"]
