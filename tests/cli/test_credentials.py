"""kubeconfigs as kubectl reads them (the `kubernetes` client's loader): contexts, merged
files, exec plugins, tokenFile, paths relative to the file, one clear error for a broken
file; and the pod's service account where client-go finds it."""

from __future__ import annotations

import base64
import json
import stat
import sys
from pathlib import Path

import pytest

from kooper.sdk import connection as connections
from kooper.shell import credentials
from kooper.shell.login import Login

TWO_CONTEXTS = """\
current-context: dev
contexts:
- {name: dev, context: {cluster: dev, user: dev, namespace: team}}
- {name: prod, context: {cluster: prod, user: prod}}
clusters:
- {name: dev, cluster: {server: "https://dev:6443", insecure-skip-tls-verify: true}}
- {name: prod, cluster: {server: "https://prod:6443", certificate-authority: pki/ca.pem}}
users:
- {name: dev, user: {token: dev-token}}
- {name: prod, user: {client-certificate: pki/c.pem, client-key: pki/k.pem}}
"""
# A self-signed certificate and its key (the CA and the client both): the TLS set-up
# loads them as the first request would.
CERT = (
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBgDCCASegAwIBAgIUBGjpMVos00ze/NgmmLnkSGal9BUwCgYIKoZIzj0EAwIw\n"
    "FjEUMBIGA1UEAwwLa29vcGVyLXRlc3QwHhcNMjYxMTI5MDYyNDU0WhcNMzYxMTI2\n"
    "MDYyNDU0WjAWMRQwEgYDVQQDDAtrb29wZXItdGVzdDBZMBMGByqGSM49AgEGCCqG\n"
    "SM49AwEHA0IABJ14kinbl3wxnE7vGWWkejC3PUt12l8sZpo8UMHZaH9Z7RKm74FF\n"
    "WBTzfpunwvwn3EgfAAurcmvfywnqGf3hkx6jUzBRMB0GA1UdDgQWBBR7v9sV13pq\n"
    "9KH4YmDRYbKdf9a66zAfBgNVHSMEGDAWgBR7v9sV13pq9KH4YmDRYbKdf9a66zAP\n"
    "BgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0cAMEQCIGSPoEgxKOMUyRxnRMvJ\n"
    "R8wuGhKjzUkEO1t5d0A/RWqPAiB1WPnlOy2pm8fRo/mm/V4s2Lv/k6SGBVUglJxD\n"
    "lVaE6g==\n"
    "-----END CERTIFICATE-----\n"
)
KEY = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgSGJ2doehb46PIsbN\n"
    "voXRv4pRwhEYqTTMG+BSxS+1fuuhRANCAASdeJIp25d8MZxO7xllpHowtz1Lddpf\n"
    "LGaaPFDB2Wh/We0Spu+BRVgU836bp8L8J9xIHwALq3Jr38sJ6hn94ZMe\n"
    "-----END PRIVATE KEY-----\n"
)


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    (tmp_path / "pki").mkdir()
    for name, text in (("ca.pem", CERT), ("c.pem", CERT), ("k.pem", KEY)):
        (tmp_path / "pki" / name).write_text(text)
    path = tmp_path / "config"
    path.write_text(TWO_CONTEXTS, encoding="utf-8")
    return path


def test_the_current_context_by_default_with_its_namespace(kubeconfig: Path):
    conn = credentials.from_kubeconfig([str(kubeconfig)])
    assert (conn.server, conn.token, conn.insecure, conn.namespace) == (
        "https://dev:6443", "dev-token", True, "team")


def test_another_context_by_name_with_paths_relative_to_the_file(kubeconfig: Path):
    conn = credentials.from_kubeconfig([str(kubeconfig)], "prod")
    pki = kubeconfig.parent / "pki"
    assert (conn.server, conn.token, conn.namespace) == ("https://prod:6443", None, None)
    assert [Path(p or "").resolve() for p in (conn.ca_path, conn.certificate_path,
                                              conn.private_key_path)] == [
        (pki / "ca.pem").resolve(), (pki / "c.pem").resolve(), (pki / "k.pem").resolve()]


def test_merged_files_the_first_that_names_a_thing_wins(kubeconfig: Path, tmp_path: Path):
    first = tmp_path / "first"
    first.write_text("current-context: prod\nclusters:\n"
                     "- {name: prod, cluster: {server: 'https://elsewhere'}}\n", encoding="utf-8")
    conn = credentials.from_kubeconfig([str(first), str(kubeconfig)])
    assert conn.server == "https://elsewhere"
    assert conn.certificate_path is not None
    assert Path(conn.certificate_path).name == "c.pem"


def test_an_unknown_context_is_one_error_naming_the_file(kubeconfig: Path):
    with pytest.raises(credentials.KubeconfigError, match="staging") as caught:
        credentials.from_kubeconfig([str(kubeconfig)], "staging")
    assert str(kubeconfig) in str(caught.value)


@pytest.mark.parametrize("text", [
    "garbage: [\n",
    "- a list\n",
    "contexts: [{name: a, context: {cluster: x}}]\ncurrent-context: a\n",
    "clusters: []\n",
])
def test_a_broken_file_is_one_error_naming_it(text: str, tmp_path: Path):
    path = tmp_path / "broken"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(credentials.KubeconfigError) as caught:
        credentials.from_kubeconfig([str(path)])
    assert str(path) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_missing_file_is_named(tmp_path: Path):
    with pytest.raises(credentials.KubeconfigError, match="no such file"):
        credentials.from_kubeconfig([str(tmp_path / "nope")])


def test_explicit_paths_win_over_the_environment(kubeconfig: Path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", "/elsewhere/config")
    assert credentials.kubeconfig_paths(str(kubeconfig)) == [str(kubeconfig)]
    assert credentials.kubeconfig_paths() == ["/elsewhere/config"]


def test_the_kubeconfig_flag_names_one_file_as_in_kubectl(tmp_path: Path, monkeypatch):
    """``$KUBECONFIG`` is a path list; ``--kubeconfig`` is one path, even with a colon."""
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/a:{tmp_path}/b")
    assert credentials.kubeconfig_paths() == [f"{tmp_path}/a", f"{tmp_path}/b"]
    assert credentials.kubeconfig_paths(f"{tmp_path}/x:y") == [f"{tmp_path}/x:y"]


def test_no_kubeconfig_anywhere_is_no_credentials(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert credentials.loader() is None
    load = credentials.loader(context="dev")
    assert load is not None
    with pytest.raises(credentials.KubeconfigError, match="no kubeconfig"):
        load()


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_inline_kind_style_credentials_land_in_files(tmp_path: Path):
    path = tmp_path / "kind"
    path.write_text(
        "current-context: kind\n"
        "contexts: [{name: kind, context: {cluster: kind, user: kind}}]\n"
        f"clusters: [{{name: kind, cluster: {{server: 'https://127.0.0.1:6443', "
        f"certificate-authority-data: {_b64(CERT)}}}}}]\n"
        f"users: [{{name: kind, user: {{client-certificate-data: {_b64(CERT)}, "
        f"client-key-data: {_b64(KEY)}}}}}]\n", encoding="utf-8")
    conn = credentials.from_kubeconfig([str(path)])
    assert conn.ca_path
    assert conn.certificate_path
    assert conn.private_key_path
    assert Path(conn.ca_path).read_text() == CERT
    assert Path(conn.certificate_path).read_text() == CERT
    assert Path(conn.private_key_path).read_text() == KEY


def _exec_plugin(tmp_path: Path, token: str, expires: str | None = None) -> Path:
    """A credential plugin that prints an ExecCredential and counts its runs."""
    status: dict[str, str] = {"token": token}
    if expires:
        status["expirationTimestamp"] = expires
    answer = json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind":
                         "ExecCredential", "status": status})
    plugin = tmp_path / "plugin"
    plugin.write_text(f"#!{sys.executable}\nimport pathlib\n"
                      f"runs = pathlib.Path({str(tmp_path / 'runs')!r})\n"
                      "runs.write_text(str(int(runs.read_text() or 0) + 1) "
                      "if runs.exists() else '1')\n"
                      f"print({answer!r})\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    return plugin


def _exec_kubeconfig(tmp_path: Path, plugin: Path) -> Path:
    path = tmp_path / "exec-config"
    path.write_text(
        "current-context: eks\n"
        "contexts: [{name: eks, context: {cluster: eks, user: eks, namespace: apps}}]\n"
        "clusters: [{name: eks, cluster: {server: 'https://eks:443', "
        "insecure-skip-tls-verify: true}}]\n"
        "users:\n- name: eks\n  user:\n    exec:\n"
        "      apiVersion: client.authentication.k8s.io/v1\n"
        f"      command: {plugin}\n      interactiveMode: Never\n", encoding="utf-8")
    return path


def test_an_exec_plugin_gives_the_token_and_its_expiry(tmp_path: Path):
    plugin = _exec_plugin(tmp_path, "from-plugin", "2099-01-01T00:00:00Z")
    conn = credentials.from_kubeconfig([str(_exec_kubeconfig(tmp_path, plugin))])
    assert (conn.token, conn.namespace) == ("from-plugin", "apps")
    assert conn.expires_at == pytest.approx(4070908800.0)


def _one_user(tmp_path: Path, user: str) -> Path:
    """A kubeconfig with one context whose user is ``user`` (YAML flow style)."""
    path = tmp_path / "config"
    path.write_text(
        "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'https://c:6443'}}]\n"
        f"users: [{{name: u, user: {user}}}]\n", encoding="utf-8")
    return path


def test_a_token_file_is_read_by_the_loader(tmp_path: Path):
    (tmp_path / "token").write_text("file-token\n")
    path = _one_user(tmp_path, "{tokenFile: token}")
    assert credentials.from_kubeconfig([str(path)]).token == "file-token"


def test_a_token_file_is_read_again_as_it_rotates_without_a_new_login(tmp_path: Path):
    """A kubeconfig's ``tokenFile`` (relative to the file that names the user) is re-read
    every ``TOKEN_FILE_PERIOD_S``, as client-go does: a rotated token is used before any
    request is rejected."""
    (tmp_path / "secrets").mkdir()
    token = tmp_path / "secrets" / "token"
    token.write_text("first\n")
    path = _one_user(tmp_path, "{tokenFile: secrets/token}")
    now = [0.0]
    login = Login(lambda: credentials.from_kubeconfig([str(path)]), clock=lambda: now[0])
    assert login.current()[1] == "Bearer first"
    token.write_text("second\n")
    now[0] += connections.TOKEN_FILE_PERIOD_S
    assert login.current()[1] == "Bearer second"
    assert login.logins == 1


def test_a_token_file_beside_a_token_wins_while_it_reads_as_in_client_go(tmp_path: Path):
    """client-go's transport (``NewBearerAuthWithRefreshRoundTripper``) sends the file's
    token whenever the file reads and the inline ``token`` otherwise; its kubeconfig
    reference says the ``token`` wins, and kooper followed the reference."""
    token = tmp_path / "token"
    token.write_text("file-token\n")
    path = _one_user(tmp_path, "{token: inline, tokenFile: token}")
    login = Login(lambda: credentials.from_kubeconfig([str(path)]))
    assert login.current()[1] == "Bearer file-token"
    token.unlink()
    assert Login(lambda: credentials.from_kubeconfig([str(path)])).current()[1] == \
        "Bearer inline"


def test_the_service_variables_name_the_server_as_client_go_reads_them(tmp_path: Path):
    (tmp_path / "token").write_text("sa")
    (tmp_path / "namespace").write_text("kooper-system")
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "36443"}
    conn = connections.in_cluster(env, root=tmp_path)
    assert conn is not None
    assert (conn.server, conn.token_file, conn.namespace) == (
        "https://127.0.0.1:36443", str(tmp_path / "token"), "kooper-system")
    six = connections.in_cluster(
        {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, root=tmp_path)
    assert six is not None
    assert six.server == "https://[fd00::1]:443"
    assert connections.in_cluster({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, root=tmp_path) is None


def _proxied_kubeconfig(tmp_path: Path, cluster: str) -> Path:
    path = tmp_path / "proxied"
    path.write_text(
        "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://api.corp:6443', {cluster}}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n", encoding="utf-8")
    return path


def test_a_clusters_proxy_url_is_the_proxy_of_every_request_and_of_kopfs_watches(
        tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://from-env:3128")
    path = _proxied_kubeconfig(tmp_path, "proxy-url: 'http://corp-proxy:8080'")
    conn = credentials.from_kubeconfig([str(path)])
    assert conn.proxy_url == "http://corp-proxy:8080"
    assert connections.proxy_of(conn, conn.server) == "http://corp-proxy:8080"
    assert credentials.connection_info(conn, "Bearer t").proxy_url == "http://corp-proxy:8080"


def test_kopfs_watches_take_the_environments_proxy_as_the_operators_requests_do(
        tmp_path: Path, monkeypatch):
    """Until the sixteenth session kopf's watches ignored ``HTTPS_PROXY`` while the
    operator's own requests went through it."""
    monkeypatch.setenv("HTTPS_PROXY", "http://from-env:3128")
    path = _proxied_kubeconfig(tmp_path, "insecure-skip-tls-verify: true")
    conn = credentials.from_kubeconfig([str(path)])
    assert conn.proxy_url is None
    assert credentials.connection_info(conn, "Bearer t").proxy_url == "http://from-env:3128"
    monkeypatch.setenv("NO_PROXY", ".corp")
    assert credentials.connection_info(conn, "Bearer t").proxy_url is None


def test_tls_server_name_is_one_error_naming_the_file(tmp_path: Path):
    path = _proxied_kubeconfig(tmp_path, "tls-server-name: kubernetes.default")
    with pytest.raises(credentials.KubeconfigError) as raised:
        credentials.from_kubeconfig([str(path)])
    message = str(raised.value)
    assert str(path) in message
    assert "tls-server-name is not supported" in message
    assert "\n" not in message


def test_kooper_status_does_not_import_kopf():
    import subprocess

    code = ("import sys; from kooper.commands import status; from kooper.shell import "
            "credentials, kube; print('kopf' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"


def _failing_plugin(tmp_path: Path) -> Path:
    """A credential plugin that fails as an expired cloud login does."""
    plugin = tmp_path / "failing-plugin"
    plugin.write_text(f"#!{sys.executable}\nimport sys\n"
                      "sys.stderr.write('the SSO session has expired\\n')\nsys.exit(1)\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    return plugin


def test_a_failing_exec_plugin_is_one_error_naming_the_file_and_the_plugins_words(
        tmp_path: Path, capsys):
    """The `kubernetes` loader logs a plugin's failure and goes on without credentials:
    requests would go out anonymous and come back 401 without saying why."""
    path = _exec_kubeconfig(tmp_path, _failing_plugin(tmp_path))
    with pytest.raises(credentials.KubeconfigError) as raised:
        credentials.from_kubeconfig([str(path)])
    message = str(raised.value)
    assert str(path) in message
    assert "exec" in message
    assert "the SSO session has expired" in message
    assert "\n" not in message
    assert capsys.readouterr().err == ""


def test_a_missing_exec_plugin_names_its_install_hint(tmp_path: Path):
    path = tmp_path / "config"
    path.write_text(
        "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'https://c:6443'}}]\n"
        "users:\n- name: u\n  user:\n    exec:\n"
        "      apiVersion: client.authentication.k8s.io/v1beta1\n"
        "      command: kooper-no-such-plugin\n"
        "      installHint: install it with your package manager\n", encoding="utf-8")
    with pytest.raises(credentials.KubeconfigError,
                       match=r"kooper-no-such-plugin.*install it with your package manager"):
        credentials.from_kubeconfig([str(path)])


def test_a_plugin_that_fails_at_renewal_leaves_the_old_token_in_use(tmp_path: Path):
    from kooper.shell.login import Login

    plugin = _exec_plugin(tmp_path, "first")
    path = _exec_kubeconfig(tmp_path, plugin)
    login = Login(lambda: credentials.from_kubeconfig([str(path)]), min_interval_s=0.0)
    plugin.write_bytes(_failing_plugin(tmp_path).read_bytes())
    login.relogin()
    assert login.current()[1] == "Bearer first"


@pytest.mark.parametrize("provider", [
    "{name: azure, config: {access-token: t}}",
    "{name: oidc, config: {id-token: not-a-jwt, client-id: k, idp-issuer-url: 'https://idp'}}",
])
def test_an_auth_provider_that_gives_no_token_is_one_error_not_anonymous_requests(
        provider: str, tmp_path: Path):
    path = tmp_path / "config"
    path.write_text(
        "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'https://c:6443'}}]\n"
        f"users: [{{name: u, user: {{auth-provider: {provider}}}}}]\n", encoding="utf-8")
    with pytest.raises(credentials.KubeconfigError, match="auth-provider") as raised:
        credentials.from_kubeconfig([str(path)])
    assert str(path) in str(raised.value)


def test_missing_and_empty_files_in_kubeconfig_are_skipped_as_kubectl_does(
        kubeconfig: Path, tmp_path: Path, monkeypatch):
    (tmp_path / "empty").write_text("")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'gone'}:{tmp_path / 'empty'}:{kubeconfig}")
    conn = credentials.from_kubeconfig(credentials.kubeconfig_paths())
    assert (conn.server, conn.token) == ("https://dev:6443", "dev-token")


def test_kubeconfig_naming_only_missing_or_empty_files_is_one_error(tmp_path: Path):
    (tmp_path / "empty").write_text("")
    paths = [str(tmp_path / "gone"), str(tmp_path / "empty")]
    with pytest.raises(credentials.KubeconfigError, match="no configuration") as raised:
        credentials.from_kubeconfig(paths)
    assert all(path in str(raised.value) for path in paths)


def test_a_cluster_without_a_server_is_one_error_naming_the_file_and_the_cluster(
        kubeconfig: Path):
    kubeconfig.write_text(TWO_CONTEXTS.replace('server: "https://dev:6443", ', ""),
                          encoding="utf-8")
    with pytest.raises(credentials.KubeconfigError, match="no server") as raised:
        credentials.from_kubeconfig([str(kubeconfig)])
    assert str(kubeconfig) in str(raised.value)
    assert "'dev'" in str(raised.value)


@pytest.mark.parametrize(("where", "entry"), [
    ('insecure-skip-tls-verify: true}}', f'certificate-authority-data: {_b64("not a PEM")}}}}}'),
    ("{token: dev-token}", f"{{client-certificate-data: {_b64(CERT)}, "
                           f"client-key-data: {_b64('not a PEM')}}}"),
])
def test_tls_material_that_does_not_load_is_one_error_naming_the_file(
        where: str, entry: str, kubeconfig: Path):
    """Else the first request fails with OpenSSL's words alone (`[X509:
    NO_CERTIFICATE_OR_CRL_FOUND] no certificate or crl found`)."""
    kubeconfig.write_text(TWO_CONTEXTS.replace(where, entry, 1), encoding="utf-8")
    with pytest.raises(credentials.KubeconfigError) as raised:
        credentials.from_kubeconfig([str(kubeconfig)])
    assert str(kubeconfig) in str(raised.value)
    assert "\n" not in str(raised.value)


def _in_a_pod(tmp_path: Path, monkeypatch) -> None:
    """A pod's service account under ``tmp_path/sa`` and its service variables."""
    root = tmp_path / "sa"
    root.mkdir()
    (root / "token").write_text("sa-token")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    real = connections.in_cluster
    monkeypatch.setattr(connections, "in_cluster",
                        lambda env, root=root: real(env, root=root))


def test_kubeconfig_in_the_environment_wins_over_the_pods_service_account(
        kubeconfig: Path, tmp_path: Path, monkeypatch):
    """As client-go's default loading rules (kubectl) and controller-runtime's GetConfig:
    a pod that sets ``$KUBECONFIG`` (a mounted kubeconfig of another cluster) talks to
    that cluster, not to its own through the service account."""
    _in_a_pod(tmp_path, monkeypatch)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    load = credentials.loader()
    assert load is not None
    assert (load().server, load().token) == ("https://dev:6443", "dev-token")


def test_the_service_account_wins_over_a_kubeconfig_in_home_as_in_controller_runtime(
        kubeconfig: Path, tmp_path: Path, monkeypatch):
    _in_a_pod(tmp_path, monkeypatch)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(kubeconfig.read_text())
    monkeypatch.setenv("HOME", str(tmp_path))
    load = credentials.loader()
    assert load is not None
    assert load().server == "https://10.96.0.1:443"


def _split_kubeconfig(tmp_path: Path, user: str) -> list[str]:
    """The context and cluster in ``a/config`` (its CA beside it), the user in
    ``b/config``: as ``$KUBECONFIG=a/config:b/config`` names them."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "ca.pem").write_text(CERT)
    (a / "config").write_text(
        "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'https://c:6443', "
        "certificate-authority: ca.pem}}]\n", encoding="utf-8")
    (b / "config").write_text(f"users:\n- name: u\n  user:\n{user}", encoding="utf-8")
    return [str(a / "config"), str(b / "config")]


def test_a_users_certificate_paths_are_relative_to_the_file_that_names_the_user(
        tmp_path: Path):
    """client-go resolves a user's client-certificate, client-key, tokenFile and exec
    command against the file the user came from (``ResolveLocalPaths``), a cluster's
    certificate-authority against the cluster's; the python loader took the cluster's
    file for the user's certificates too."""
    paths = _split_kubeconfig(tmp_path, "    client-certificate: pki/c.pem\n"
                                        "    client-key: pki/k.pem\n")
    (tmp_path / "b" / "pki").mkdir()
    (tmp_path / "b" / "pki" / "c.pem").write_text(CERT)
    (tmp_path / "b" / "pki" / "k.pem").write_text(KEY)
    conn = credentials.from_kubeconfig(paths)
    assert [Path(p or "") for p in (conn.ca_path, conn.certificate_path,
                                    conn.private_key_path)] == [
        tmp_path / "a" / "ca.pem", tmp_path / "b" / "pki" / "c.pem",
        tmp_path / "b" / "pki" / "k.pem"]


def test_an_exec_command_with_a_slash_is_relative_to_the_users_file_and_runs_here(
        tmp_path: Path, monkeypatch):
    """client-go: ``./bin/plugin`` is found beside the file that names the user (a bare
    name on $PATH), and the plugin runs in the caller's working directory."""
    paths = _split_kubeconfig(tmp_path, "    exec:\n"
                                        "      apiVersion: client.authentication.k8s.io/v1\n"
                                        "      command: ./bin/plugin\n"
                                        "      interactiveMode: Never\n")
    (tmp_path / "b" / "bin").mkdir()
    plugin = tmp_path / "b" / "bin" / "plugin"
    answer = json.dumps({"apiVersion": "client.authentication.k8s.io/v1",
                         "kind": "ExecCredential", "status": {"token": "from-b"}})
    plugin.write_text(f"#!{sys.executable}\nimport os, pathlib\n"
                      f"pathlib.Path({str(tmp_path / 'cwd')!r}).write_text(os.getcwd())\n"
                      f"print({answer!r})\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert credentials.from_kubeconfig(paths).token == "from-b"
    assert (tmp_path / "cwd").read_text() == str(tmp_path / "work")


def test_a_client_certificate_without_its_key_is_one_error_not_anonymous_requests(
        kubeconfig: Path):
    """client-go refuses it ("client-key-data or client-key must be specified ... to use
    the clientCert authentication method"); the TLS set-up would leave the certificate
    out and every request would go anonymous."""
    kubeconfig.write_text(TWO_CONTEXTS.replace(", client-key: pki/k.pem", ""),
                          encoding="utf-8")
    with pytest.raises(credentials.KubeconfigError, match="client-key") as raised:
        credentials.from_kubeconfig([str(kubeconfig)], "prod")
    assert str(kubeconfig) in str(raised.value)
    assert "'prod'" in str(raised.value)


@pytest.mark.parametrize("proxy", ["socks5://corp-proxy:1080", "corp-proxy:8080"])
def test_a_proxy_url_kooper_cannot_speak_is_one_error_naming_the_file(
        proxy: str, tmp_path: Path):
    """client-go takes http, https and socks5 proxies and refuses other schemes; kopf's
    client and kooper's send an HTTP CONNECT whatever the scheme, which a SOCKS proxy
    answers with a reset that names neither the proxy nor the file."""
    path = _proxied_kubeconfig(tmp_path, f"proxy-url: '{proxy}'")
    with pytest.raises(credentials.KubeconfigError, match="proxy-url") as raised:
        credentials.from_kubeconfig([str(path)])
    assert str(path) in str(raised.value)
    assert proxy in str(raised.value)


def test_an_operator_in_a_pod_without_its_token_is_told_which_file_is_missing(
        tmp_path: Path, monkeypatch):
    from kooper.core import errors
    from kooper.shell import settings

    root = tmp_path / "sa"
    root.mkdir()
    real = connections.in_cluster
    monkeypatch.setattr(connections, "in_cluster", lambda env, root=root: real(env, root=root))
    monkeypatch.setattr(connections, "SERVICE_ACCOUNT", root)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KOOPER_KUBE_API", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(errors.KooperError, match="no Kubernetes credentials") as raised:
        credentials.login(settings.Config())
    assert str(root / "token") in str(raised.value)


@pytest.mark.parametrize("impersonation", [
    "as: system:admin", "as-groups: [system:masters]", "as-uid: '1234'",
])
def test_a_user_that_impersonates_is_one_error_not_requests_as_the_user_itself(
        impersonation: str, tmp_path: Path):
    """client-go sends the ``as``/``as-groups``/``as-uid`` of a kubeconfig user as
    Impersonate-* headers; the python loader drops them, and kopf's client cannot send
    them, so kooper would act with the user's own rights, not the ones kubectl uses."""
    path = _one_user(tmp_path, f"{{token: t, {impersonation}}}")
    with pytest.raises(credentials.KubeconfigError, match="impersonat") as raised:
        credentials.from_kubeconfig([str(path)])
    assert str(path) in str(raised.value)
