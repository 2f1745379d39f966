"""The kubeconfigs users bring, as their tools write them (kind, minikube, k3s, kubeadm,
EKS, GKE, AKS, OpenShift, Rancher, oidc), and the broken ones they bring too: kooper
finds what kubectl finds (server, CA, client certificate or token) or says in one line
which file is wrong and why; never a traceback, never anonymous requests."""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest
from tests.cli.test_credentials import CERT, KEY, _b64

from kooper.shell import credentials
from kooper.shell.login import Login


def _plugin(folder: Path, name: str, status: dict[str, object], *,
            api: str = "client.authentication.k8s.io/v1beta1") -> Path:
    """A fake credential plugin ``folder/name``: it records its arguments, environment and
    run count in ``folder/name.seen`` and prints ``status`` as an ExecCredential."""
    folder.mkdir(exist_ok=True)
    plugin = folder / name
    answer = json.dumps({"apiVersion": api, "kind": "ExecCredential", "status": status})
    seen = folder / f"{name}.seen"
    plugin.write_text(
        f"#!{sys.executable}\nimport json, os, pathlib, sys\n"
        f"seen = pathlib.Path({str(seen)!r})\n"
        "runs = json.loads(seen.read_text())['runs'] if seen.exists() else 0\n"
        "seen.write_text(json.dumps({'runs': runs + 1, 'argv': sys.argv[1:], 'env': "
        "dict(os.environ), 'stdin_tty': sys.stdin is not None and sys.stdin.isatty()}))\n"
        f"print({answer!r}.replace('RUN', str(runs + 1)))\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    return plugin


def _seen(plugin: Path) -> dict[str, object]:
    seen: dict[str, object] = json.loads(Path(f"{plugin}.seen").read_text())
    return seen


def _write(tmp_path: Path, text: str, name: str = "config") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _one_line_naming(path: Path, *, match: str | None = None,
                     context: str | None = None) -> str:
    with pytest.raises(credentials.KubeconfigError, match=match) as raised:
        credentials.from_kubeconfig([str(path)], context)
    message = str(raised.value)
    assert str(path) in message
    assert "\n" not in message
    assert "Traceback" not in message
    return message


# --- kubeconfigs as the tools write them -------------------------------------------------


def test_minikube_absolute_paths_and_extensions(tmp_path: Path):
    home = tmp_path / ".minikube"
    (home / "profiles" / "minikube").mkdir(parents=True)
    (home / "ca.crt").write_text(CERT)
    (home / "profiles" / "minikube" / "client.crt").write_text(CERT)
    (home / "profiles" / "minikube" / "client.key").write_text(KEY)
    path = _write(tmp_path, f"""\
apiVersion: v1
clusters:
- cluster:
    certificate-authority: {home}/ca.crt
    extensions:
    - extension:
        last-update: Sun, 29 Nov 2026 10:00:00 UTC
        provider: minikube.sigs.k8s.io
        version: v1.34.0
      name: cluster_info
    server: https://192.168.49.2:8443
  name: minikube
contexts:
- context:
    cluster: minikube
    extensions:
    - extension:
        last-update: Sun, 29 Nov 2026 10:00:00 UTC
        provider: minikube.sigs.k8s.io
        version: v1.34.0
      name: context_info
    namespace: default
    user: minikube
  name: minikube
current-context: minikube
kind: Config
preferences: {{}}
users:
- name: minikube
  user:
    client-certificate: {home}/profiles/minikube/client.crt
    client-key: {home}/profiles/minikube/client.key
""")
    conn = credentials.from_kubeconfig([str(path)])
    assert (conn.server, conn.ca_path, conn.certificate_path, conn.private_key_path,
            conn.token, conn.namespace) == (
        "https://192.168.49.2:8443", f"{home}/ca.crt",
        f"{home}/profiles/minikube/client.crt", f"{home}/profiles/minikube/client.key",
        None, "default")


@pytest.mark.parametrize(("context", "user"), [
    ("default", "default"),  # k3s's /etc/rancher/k3s/k3s.yaml
    ("kubernetes-admin@kubernetes", "kubernetes-admin"),  # kubeadm's admin.conf
])
def test_k3s_and_kubeadm_inline_certificates(context: str, user: str, tmp_path: Path):
    cluster = "default" if context == "default" else "kubernetes"
    path = _write(tmp_path, f"""\
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: {_b64(CERT)}
    server: https://127.0.0.1:6443
  name: {cluster}
contexts:
- context:
    cluster: {cluster}
    user: {user}
  name: {context}
current-context: {context}
kind: Config
preferences: {{}}
users:
- name: {user}
  user:
    client-certificate-data: {_b64(CERT)}
    client-key-data: {_b64(KEY)}
""")
    conn = credentials.from_kubeconfig([str(path)])
    assert conn.server == "https://127.0.0.1:6443"
    assert conn.certificate_path
    assert Path(conn.certificate_path).read_text() == CERT
    assert conn.private_key_path
    assert Path(conn.private_key_path).read_text() == KEY
    assert conn.ca_path
    assert Path(conn.ca_path).read_text() == CERT
    assert conn.token is None


@pytest.mark.parametrize(("server", "tls", "url"), [
    ("10.0.0.1:6443", f"certificate-authority-data: {_b64(CERT)}", "https://10.0.0.1:6443"),
    ("localhost:6443", "insecure-skip-tls-verify: true", "https://localhost:6443"),
    ("127.0.0.1:8080", "", "http://127.0.0.1:8080"),
    ("HTTPS://api.example:6443", f"certificate-authority-data: {_b64(CERT)}",
     "https://api.example:6443"),
])
def test_a_server_url_without_a_scheme_is_read_as_client_go_reads_it(
        server: str, tls: str, url: str, tmp_path: Path):
    """client-go's ``DefaultServerURL``: https:// when there is TLS material, else
    http://; the loader kept ``10.0.0.1:6443``, which kooper's clients and kopf's cannot
    reach, and read ``HTTPS://`` as plain HTTP (no CA loaded)."""
    path = _write(tmp_path, "current-context: c\ncontexts: [{name: c, context: {cluster: c, "
                            f"user: u}}}}]\nclusters: [{{name: c, cluster: {{server: '{server}'"
                            f"{', ' + tls if tls else ''}}}}}]\nusers: [{{name: u, user: "
                            "{token: t}}]\n")
    conn = credentials.from_kubeconfig([str(path)])
    assert conn.server == url
    assert (conn.ca_path is not None) == ("authority" in tls)


def test_openshift_token_user_with_slashes_in_its_names(tmp_path: Path):
    path = _write(tmp_path, """\
apiVersion: v1
clusters:
- cluster:
    insecure-skip-tls-verify: true
    server: https://api.crc.testing:6443
  name: api-crc-testing:6443
contexts:
- context:
    cluster: api-crc-testing:6443
    namespace: myproject
    user: kubeadmin/api-crc-testing:6443
  name: myproject/api-crc-testing:6443/kubeadmin
current-context: myproject/api-crc-testing:6443/kubeadmin
kind: Config
preferences: {}
users:
- name: kubeadmin/api-crc-testing:6443
  user:
    token: sha256~Gq3qQ8pdKi6zM0HXnIMa0RiXGtqO4BO2qWwpzCxMvUw
""")
    conn = credentials.from_kubeconfig([str(path)])
    assert (conn.server, conn.token, conn.insecure, conn.namespace) == (
        "https://api.crc.testing:6443", "sha256~Gq3qQ8pdKi6zM0HXnIMa0RiXGtqO4BO2qWwpzCxMvUw",
        True, "myproject")


def test_rancher_server_url_with_a_path_and_a_token_with_a_colon(tmp_path: Path):
    path = _write(tmp_path, f"""\
apiVersion: v1
kind: Config
clusters:
- name: "prod"
  cluster:
    server: "https://rancher.example.com/k8s/clusters/c-m-4x2vqk7p"
    certificate-authority-data: "{_b64(CERT)}"
users:
- name: "prod"
  user:
    token: "kubeconfig-user-abcde:q8wlx7rzvn4tjk"
contexts:
- name: "prod"
  context:
    user: "prod"
    cluster: "prod"
current-context: "prod"
""")
    conn = credentials.from_kubeconfig([str(path)])
    assert conn.server == "https://rancher.example.com/k8s/clusters/c-m-4x2vqk7p"
    assert conn.token == "kubeconfig-user-abcde:q8wlx7rzvn4tjk"


def test_aks_admin_certificate_and_token_together(tmp_path: Path):
    """``az aks get-credentials --admin``: a client certificate and a token, both sent."""
    path = _write(tmp_path, f"""\
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: {_b64(CERT)}
    server: https://aks-prod-dns-1a2b3c4d.hcp.westeurope.azmk8s.io:443
  name: aks-prod
contexts:
- context:
    cluster: aks-prod
    user: clusterAdmin_rg_aks-prod
  name: aks-prod-admin
current-context: aks-prod-admin
kind: Config
preferences: {{}}
users:
- name: clusterAdmin_rg_aks-prod
  user:
    client-certificate-data: {_b64(CERT)}
    client-key-data: {_b64(KEY)}
    token: 0f1e2d3c4b5a69788796a5b4c3d2e1f0
""")
    conn = credentials.from_kubeconfig([str(path)])
    assert conn.token == "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    assert conn.certificate_path
    assert conn.private_key_path


def _cloud_exec_config(tmp_path: Path, user: str, *, cluster: str = "") -> Path:
    return _write(tmp_path, f"""\
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: {_b64(CERT)}
    server: https://cloud.example:443
{cluster}  name: cloud
contexts:
- context:
    cluster: cloud
    user: cloud-user
  name: cloud
current-context: cloud
kind: Config
preferences: {{}}
users:
- name: cloud-user
  user:
{user}""")


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch) -> Path:
    """A folder on $PATH for fake plugins named as the real ones are (``aws``...)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return folder


@pytest.mark.parametrize(("api", "mode"), [
    ("client.authentication.k8s.io/v1beta1", ""),
    ("client.authentication.k8s.io/v1beta1", "      interactiveMode: IfAvailable\n"),
    ("client.authentication.k8s.io/v1", "      interactiveMode: IfAvailable\n"),
])
def test_eks_aws_eks_get_token(api: str, mode: str, tmp_path: Path, bin_dir: Path):
    plugin = _plugin(bin_dir, "aws", {"kind": "ExecCredential", "token": "k8s-aws-v1.aHR0c",
                                      "expirationTimestamp": "2099-01-01T00:14:00Z"}, api=api)
    path = _cloud_exec_config(tmp_path, f"""\
    exec:
      apiVersion: {api}
      args:
      - --region
      - eu-west-1
      - eks
      - get-token
      - --cluster-name
      - prod
      - --output
      - json
      command: aws
      env:
      - name: AWS_PROFILE
        value: prod-admin
{mode}""")
    conn = credentials.from_kubeconfig([str(path)])
    assert conn.token == "k8s-aws-v1.aHR0c"
    assert conn.expires_at == pytest.approx(4070909640.0)
    seen = _seen(plugin)
    assert seen["argv"] == ["--region", "eu-west-1", "eks", "get-token", "--cluster-name",
                            "prod", "--output", "json"]
    env = seen["env"]
    assert isinstance(env, dict)
    assert env["AWS_PROFILE"] == "prod-admin"
    assert json.loads(env["KUBERNETES_EXEC_INFO"])["spec"]["interactive"] is False


def test_gke_gcloud_auth_plugin_with_provide_cluster_info(tmp_path: Path, bin_dir: Path):
    plugin = _plugin(bin_dir, "gke-gcloud-auth-plugin",
                     {"token": "ya29.a0AfB", "expirationTimestamp": "2099-01-01T00:00:00Z"})
    path = _cloud_exec_config(tmp_path, """\
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
      installHint: Install gke-gcloud-auth-plugin for use with kubectl by following
        https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin
      provideClusterInfo: true
""")
    assert credentials.from_kubeconfig([str(path)]).token == "ya29.a0AfB"
    env = _seen(plugin)["env"]
    assert isinstance(env, dict)
    cluster = json.loads(env["KUBERNETES_EXEC_INFO"])["spec"]["cluster"]
    assert cluster["server"] == "https://cloud.example:443"
    assert base64.b64decode(cluster["certificate-authority-data"]).decode() == CERT


def test_provide_cluster_info_hands_the_plugin_a_ca_file_as_data(tmp_path: Path,
                                                                bin_dir: Path):
    """client-go reads a ``certificate-authority`` file into the ExecCredential's
    ``spec.cluster.certificate-authority-data``; the loader handed the plugin the path
    alone (under a key client-go's ExecCredential does not have)."""
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_text(CERT)
    plugin = _plugin(bin_dir, "gke-gcloud-auth-plugin", {"token": "ya29.a0AfB"})
    path = _write(tmp_path, _cloud_exec_config(tmp_path, """\
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
      provideClusterInfo: true
""").read_text().replace(f"certificate-authority-data: {_b64(CERT)}",
                         "certificate-authority: pki/ca.crt"))
    conn = credentials.from_kubeconfig([str(path)])
    assert conn.token == "ya29.a0AfB"
    assert conn.ca_path
    assert Path(conn.ca_path).read_text() == CERT
    env = _seen(plugin)["env"]
    assert isinstance(env, dict)
    cluster = json.loads(env["KUBERNETES_EXEC_INFO"])["spec"]["cluster"]
    assert base64.b64decode(cluster["certificate-authority-data"]).decode() == CERT
    assert "certificate-authority" not in cluster


def test_aks_kubelogin_with_env_null(tmp_path: Path, bin_dir: Path):
    plugin = _plugin(bin_dir, "kubelogin", {"token": "eyJ0eXAiOiJKV1Qi",
                                            "expirationTimestamp": "2099-01-01T00:00:00Z"})
    path = _cloud_exec_config(tmp_path, """\
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args:
      - get-token
      - --login
      - azurecli
      - --server-id
      - 6dae42f8-4368-4678-94ff-3960e28e3630
      command: kubelogin
      env: null
      installHint: |2

        kubelogin is not installed which is required to connect to AAD enabled cluster.

        To learn more, please go to https://aka.ms/aks/kubelogin
      interactiveMode: IfAvailable
      provideClusterInfo: false
""")
    assert credentials.from_kubeconfig([str(path)]).token == "eyJ0eXAiOiJKV1Qi"
    assert _seen(plugin)["argv"] == ["get-token", "--login", "azurecli", "--server-id",
                                     "6dae42f8-4368-4678-94ff-3960e28e3630"]


def test_an_exec_plugin_that_answers_with_a_client_certificate(tmp_path: Path,
                                                                bin_dir: Path):
    """Teleport's ``tsh kube credentials``, Pinniped: a certificate and key, no token."""
    _plugin(bin_dir, "tsh", {"clientCertificateData": CERT, "clientKeyData": KEY,
                             "expirationTimestamp": "2099-01-01T00:00:00Z"})
    path = _cloud_exec_config(tmp_path, """\
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args: [kube, credentials, --kube-cluster=prod]
      command: tsh
      env: null
      provideClusterInfo: false
""")
    conn = credentials.from_kubeconfig([str(path)])
    assert conn.token is None
    assert conn.certificate_path
    assert Path(conn.certificate_path).read_text() == CERT
    assert conn.private_key_path
    assert Path(conn.private_key_path).read_text() == KEY


def test_an_exec_token_is_renewed_after_its_expiration_timestamp(tmp_path: Path,
                                                                 bin_dir: Path):
    expiry = "2099-01-01T00:00:00Z"
    plugin = _plugin(bin_dir, "aws", {"token": "token-RUN", "expirationTimestamp": expiry})
    path = _cloud_exec_config(tmp_path, """\
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args: [eks, get-token, --cluster-name, prod]
      command: aws
""")
    wall = [4070908800.0 - 3600]
    login = Login(lambda: credentials.from_kubeconfig([str(path)]), wall=lambda: wall[0],
                  min_interval_s=0.0)
    assert login.current()[1] == "Bearer token-1"
    wall[0] = 4070908800.0 + 1
    assert login.current()[1] == "Bearer token-2"
    assert _seen(plugin)["runs"] == 2


def test_oidc_auth_provider_with_a_valid_id_token(tmp_path: Path):
    claims = base64.urlsafe_b64encode(json.dumps(
        {"iss": "https://dex.example", "exp": int(time.time()) + 3600}).encode()).decode()
    id_token = f"eyJhbGciOiJSUzI1NiJ9.{claims.rstrip('=')}.c2lnbmF0dXJl"
    path = _cloud_exec_config(tmp_path, f"""\
    auth-provider:
      config:
        client-id: kubernetes
        client-secret: s3cr3t
        id-token: {id_token}
        idp-issuer-url: https://dex.example
        refresh-token: ChlvYXV0aC1yZWZyZXNo
      name: oidc
""")
    conn = credentials.from_kubeconfig([str(path)])
    assert conn.token == id_token
    # renewed before it expires, as client-go's oidc provider does (the loader gave no
    # expiry: the first request after the token's exp came back 401)
    assert conn.expires_at == json.loads(base64.urlsafe_b64decode(claims))["exp"]


def test_a_token_file_with_whitespace_around_the_token(tmp_path: Path):
    (tmp_path / "token").write_text("\n  eyJhbGciOi.token  \n\n")
    path = _cloud_exec_config(tmp_path, "    tokenFile: token\n")
    conn = credentials.from_kubeconfig([str(path)])
    assert Login(lambda: conn).current()[1] == "Bearer eyJhbGciOi.token"


# --- broken kubeconfigs: one line naming the file ----------------------------------------


def test_an_empty_token_file_is_one_error_not_anonymous_requests(tmp_path: Path):
    """client-go: "read empty token from file"."""
    (tmp_path / "token").write_text(" \n")
    path = _cloud_exec_config(tmp_path, "    tokenFile: token\n")
    assert "token" in _one_line_naming(path, match="empty")


def test_a_missing_token_file_is_one_error(tmp_path: Path):
    path = _cloud_exec_config(tmp_path, "    tokenFile: gone\n")
    assert str(tmp_path / "gone") in _one_line_naming(path)


def test_current_context_naming_a_missing_context(tmp_path: Path):
    path = _write(tmp_path, "current-context: gone\ncontexts:\n"
                            "- {name: here, context: {cluster: c, user: u}}\n"
                            "clusters: [{name: c, cluster: {server: 'https://c'}}]\n"
                            "users: [{name: u, user: {token: t}}]\n")
    assert "'gone'" in _one_line_naming(path, match="no context")


def test_a_context_whose_cluster_is_missing(tmp_path: Path):
    path = _write(tmp_path, "current-context: c\ncontexts:\n"
                            "- {name: c, context: {cluster: gone, user: u}}\n"
                            "clusters: [{name: other, cluster: {server: 'https://c'}}]\n"
                            "users: [{name: u, user: {token: t}}]\n")
    assert "gone" in _one_line_naming(path)


def test_a_context_that_names_no_cluster(tmp_path: Path):
    path = _write(tmp_path, "current-context: c\ncontexts:\n"
                            "- {name: c, context: {user: u, namespace: n}}\n"
                            "clusters: [{name: c, cluster: {server: 'https://c'}}]\n"
                            "users: [{name: u, user: {token: t}}]\n")
    assert "None" not in _one_line_naming(path, match="names no cluster")


def test_a_context_whose_user_is_missing_is_one_error_not_anonymous_requests(
        tmp_path: Path):
    """client-go goes on anonymous (its ``ConfirmUsable`` looks the user up by name and takes
    an empty one); the requests come back 401/403 naming neither the context nor the user:
    a misspelt user, or the file that holds it left out of ``$KUBECONFIG``."""
    path = _write(tmp_path, "current-context: c\ncontexts:\n"
                            "- {name: c, context: {cluster: c, user: gone}}\n"
                            "clusters: [{name: c, cluster: {server: 'https://c'}}]\n"
                            "users: [{name: other, user: {token: t}}]\n")
    message = _one_line_naming(path, match="user")
    assert "'gone'" in message


def test_a_context_without_a_user_stays_anonymous_as_in_kubectl(tmp_path: Path):
    path = _write(tmp_path, "current-context: c\ncontexts:\n"
                            "- {name: c, context: {cluster: c}}\n"
                            "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:8080'}}]\n")
    conn = credentials.from_kubeconfig([str(path)])
    assert (conn.server, conn.token, conn.certificate_path) == (
        "http://127.0.0.1:8080", None, None)


@pytest.mark.parametrize(("provider", "words"), [
    # GKE's kubeconfigs before gke-gcloud-auth-plugin; the loader's gcp refresh needs
    # google-auth, which kooper's image does not hold.
    ("{name: gcp}", "AttributeError"),
    ("{name: gcp, config: {cmd-path: /opt/google-cloud-sdk/bin/gcloud, cmd-args: config "
     "config-helper --format=json, token-key: '{.credential.access_token}'}}",
     "No such file or directory"),
    ("{name: oidc, config: {client-id: k, idp-issuer-url: 'https://dex.example'}}",
     "id-token"),
])
def test_an_auth_provider_that_fails_is_named_with_what_to_do(provider: str, words: str,
                                                              tmp_path: Path):
    path = _cloud_exec_config(tmp_path, f"    auth-provider: {provider}\n")
    message = _one_line_naming(path, match="auth-provider")
    assert words in message
    assert ("exec credential plugin" in message) == ("gcp" in provider)


@pytest.mark.parametrize("user", [
    "    auth-provider:\n      name: oidc\n      config: {client-id: k, client-secret: "
    "SECRET, refresh-token: SECRET, idp-issuer-url: 'https://dex.example'}\n",
    "    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: vault-login, "
    "args: [--secret-id, SECRET], env: [{name: VAULT_ADDR}]}\n",
    "    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: vault-login, "
    "args: [--secret-id, SECRET], env: [{value: x}]}\n",
])
def test_an_error_in_a_user_entry_does_not_print_its_secrets(user: str, tmp_path: Path):
    """The loader names the entry it finds a key missing in by the repr of the whole entry:
    its token, client secret, refresh token or key landed in the error, on the terminal
    and in the operator's log."""
    message = _one_line_naming(_cloud_exec_config(tmp_path, user))
    assert "SECRET" not in message
    assert "users[name=cloud-user]" in message


def test_a_kubeconfig_that_is_a_directory(tmp_path: Path):
    folder = tmp_path / "config"
    folder.mkdir()
    _one_line_naming(folder, match="directory")


@pytest.mark.parametrize("text", [
    "just a string\n",
    "42\n",
    "- a\n- list\n",
    "contexts: {c: {cluster: c}}\ncurrent-context: c\n",
    "current-context: c\ncontexts: [{name: c}]\nclusters: [{name: c}]\n",
    "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    "clusters: [{name: c, cluster: {server: 'https://c'}}]\nusers: null\n",
    "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    "clusters: [{name: c, cluster: {server: 'https://c'}}]\nusers: [{name: u}]\n",
    "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    "clusters: [{name: c, cluster: {server: 'https://c'}}]\nusers: [{name: u, user: null}]\n",
    "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    "clusters: [{name: c, cluster: {server: 'https://c'}}]\nusers: [a, b]\n",
])
def test_yaml_that_is_not_a_kubeconfig(text: str, tmp_path: Path):
    message = _one_line_naming(_write(tmp_path, text))
    assert "Error:" not in message, message  # no python exception names


class _Stdin:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


_ALWAYS = """\
    exec:
      apiVersion: client.authentication.k8s.io/v1
      args: [get-token, --login, devicecode]
      command: kubelogin
      interactiveMode: Always
"""


def test_interactive_mode_always_without_a_terminal(tmp_path: Path, bin_dir: Path,
                                                    monkeypatch):
    """client-go: "exec plugin cannot support interactive mode: standard input is not a
    terminal"; the loader ran the plugin anyway (a device-code login waiting for a user
    who is not there)."""
    monkeypatch.setattr(sys, "stdin", _Stdin(tty=False))
    plugin = _plugin(bin_dir, "kubelogin", {"token": "t"},
                     api="client.authentication.k8s.io/v1")
    message = _one_line_naming(_cloud_exec_config(tmp_path, _ALWAYS), match="interactive")
    assert "standard input is not a terminal" in message
    assert not Path(f"{plugin}.seen").exists()


def test_interactive_mode_always_with_a_terminal_runs_the_plugin(tmp_path: Path,
                                                                 bin_dir: Path, monkeypatch):
    monkeypatch.setattr(sys, "stdin", _Stdin(tty=True))
    _plugin(bin_dir, "kubelogin", {"token": "t"}, api="client.authentication.k8s.io/v1")
    assert credentials.from_kubeconfig([str(_cloud_exec_config(tmp_path, _ALWAYS))]).token == "t"


def test_insecure_skip_tls_verify_beside_a_ca_is_refused_as_kubectl_does(tmp_path: Path):
    """kubectl: "specifying a root certificates file with the insecure flag is not
    allowed"; the loader dropped the CA and went on without checking the server."""
    path = _cloud_exec_config(tmp_path, "    token: t\n",
                              cluster="    insecure-skip-tls-verify: true\n")
    assert "insecure" in _one_line_naming(path, match="certificate-authority")


def test_a_broken_file_among_several_is_named_alone(tmp_path: Path, monkeypatch):
    good = _cloud_exec_config(tmp_path, "    token: t\n")
    bad = _write(tmp_path, "contexts: {c: {cluster: c}}\n", name="bad")
    with pytest.raises(credentials.KubeconfigError) as raised:
        credentials.from_kubeconfig([str(good), str(bad)])
    assert str(raised.value).startswith(f"kubeconfig {bad}: not a kubeconfig: contexts is a "
                                        "mapping instead of a list")


def test_an_exec_plugin_that_prints_garbage(tmp_path: Path, bin_dir: Path):
    plugin = bin_dir / "aws"
    plugin.write_text("#!/bin/sh\necho 'Unable to locate credentials'\n")
    plugin.chmod(0o755)
    path = _cloud_exec_config(tmp_path, """\
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: aws
      args: [eks, get-token]
""")
    assert "'aws'" in _one_line_naming(path, match="exec")


# --- oidc refresh, as kubectl does it -----------------------------------------------------

# A self-signed certificate for 127.0.0.1 and its key: the fake IdP's.
IDP_CERT = (
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBmTCCAT+gAwIBAgIUbV0G7x1ic0w5Rlv28xaOZODYS4UwCgYIKoZIzj0EAwIw\n"
    "FDESMBAGA1UEAwwJMTI3LjAuMC4xMB4XDTI2MTEyOTEyNDAyOFoXDTM2MTEyNjEy\n"
    "NDAyOFowFDESMBAGA1UEAwwJMTI3LjAuMC4xMFkwEwYHKoZIzj0CAQYIKoZIzj0D\n"
    "AQcDQgAEZA4Mivy49wWnPmTV6+7uIsAyaPEJrX+BWHwVefvkbiDfoEIvHaRlz5ez\n"
    "cn5SI6+rh2VevRaqqgA13IWjm3nEJaNvMG0wHQYDVR0OBBYEFFayLpK+W8v6z7jP\n"
    "o9NCj9Gh0XkuMB8GA1UdIwQYMBaAFFayLpK+W8v6z7jPo9NCj9Gh0XkuMA8GA1Ud\n"
    "EwEB/wQFMAMBAf8wGgYDVR0RBBMwEYcEfwAAAYIJbG9jYWxob3N0MAoGCCqGSM49\n"
    "BAMCA0gAMEUCIECnEI5XNvNoQ+27zDN35V2V4tASh1HNAZPue7nWppNnAiEA2WlO\n"
    "K9XY8jrk6Z31tu3k99+auvSJodwkg+WX5lHQzWI=\n"
    "-----END CERTIFICATE-----\n"
)
IDP_KEY = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgyN15RqP5EY/v3r8z\n"
    "8lzqk++Gt2ymA77TB6J/efabThShRANCAARkDgyK/Lj3Bac+ZNXr7u4iwDJo8Qmt\n"
    "f4FYfBV5++RuIN+gQi8dpGXPl7NyflIjr6uHZV69FqqqADXchaObecQl\n"
    "-----END PRIVATE KEY-----\n"
)


def _jwt(expires_in: float) -> str:
    claims = json.dumps({"iss": "https://127.0.0.1", "exp": int(time.time() + expires_in)})
    body = base64.urlsafe_b64encode(claims.encode()).decode().rstrip("=")
    return f"eyJhbGciOiJSUzI1NiJ9.{body}.c2lnbmF0dXJl"


@pytest.fixture
def idp(tmp_path: Path):
    """An OIDC IdP on https://127.0.0.1: discovery, and a token endpoint that rotates the
    refresh token (Dex's way) and counts its refreshes."""
    import http.server
    import ssl
    import threading

    fresh = _jwt(3600)
    refreshes: list[str] = []
    discoveries: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            discoveries.append(self.path)
            url = f"https://127.0.0.1:{self.server.server_address[1]}"
            self._answer({"issuer": url, "token_endpoint": url + "/token"})

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            refreshes.append(body)
            self._answer({"access_token": "a", "token_type": "Bearer", "expires_in": 3600,
                          "id_token": fresh, "refresh_token": f"r{len(refreshes) + 1}"})

        def _answer(self, document: dict[str, object]) -> None:
            data = json.dumps(document).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    (tmp_path / "idp.crt").write_text(IDP_CERT)
    (tmp_path / "idp.key").write_text(IDP_KEY)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(tmp_path / "idp.crt", tmp_path / "idp.key")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}", fresh, refreshes, discoveries
    server.shutdown()


def _oidc_config(tmp_path: Path, issuer: str, *, ca: bool) -> Path:
    trust = f"        idp-certificate-authority-data: {_b64(IDP_CERT)}\n" if ca else ""
    return _cloud_exec_config(tmp_path, f"""\
    auth-provider:
      config:
        client-id: kubernetes
        client-secret: s3cr3t
        id-token: {_jwt(-600)}
{trust}        idp-issuer-url: {issuer}
        refresh-token: r1
      name: oidc
""")


def test_an_expired_oidc_token_is_refreshed_once_and_written_back_as_kubectl_does(
        idp, tmp_path: Path):
    """kubectl writes the refreshed id-token and refresh-token back to the file; the
    loader kept them in memory, so every login spent the file's old refresh token again:
    an IdP that rotates them (Dex) refuses it, and kubectl's next run with it."""
    issuer, fresh, refreshes, _ = idp
    path = _oidc_config(tmp_path, issuer, ca=True)
    assert credentials.from_kubeconfig([str(path)]).token == fresh
    assert credentials.from_kubeconfig([str(path)]).token == fresh
    assert len(refreshes) == 1
    assert "refresh_token=r1" in refreshes[0]
    import yaml

    written = yaml.safe_load(path.read_text())["users"][0]["user"]["auth-provider"]["config"]
    assert (written["id-token"], written["refresh-token"]) == (fresh, "r2")
    assert "idp-certificate-authority" not in written


def test_an_oidc_refresh_checks_the_idps_certificate_against_the_systems_roots(
        idp, tmp_path: Path):
    """Without ``idp-certificate-authority`` the loader read the IdP's discovery document
    unchecked: whoever answered named the token endpoint, which then got the refresh token
    and the client secret. client-go checks the IdP against the system's roots, where this
    self-signed one is not."""
    issuer, _, refreshes, discoveries = idp
    path = _oidc_config(tmp_path, issuer, ca=False)
    assert "CERTIFICATE_VERIFY_FAILED" in _one_line_naming(path)
    assert (discoveries, refreshes) == ([], [])
