"""In a pod the operator finds the API server where client-go does: KUBERNETES_SERVICE_*."""

from kooper.shell import credentials


def test_the_service_variables_name_the_server_as_client_go_reads_them():
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "36443"}
    assert credentials.in_cluster_server(env) == "https://127.0.0.1:36443"
    assert credentials.in_cluster_server(
        {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    ) == "https://[fd00::1]:443"


def test_without_both_variables_kopfs_service_account_login_stands():
    assert credentials.in_cluster_server({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) is None
    assert credentials.in_cluster_server({}) is None
