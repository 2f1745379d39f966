"""kubeconfig: a context by name, merged files, and one clear error for a broken file."""

from __future__ import annotations

from pathlib import Path

import pytest

from kooper.shell import credentials

TWO_CONTEXTS = """\
current-context: dev
contexts:
- {name: dev, context: {cluster: dev, user: dev, namespace: team}}
- {name: prod, context: {cluster: prod, user: prod}}
clusters:
- {name: dev, cluster: {server: "https://dev:6443", insecure-skip-tls-verify: true}}
- {name: prod, cluster: {server: "https://prod:6443", certificate-authority: /ca.pem}}
users:
- {name: dev, user: {token: dev-token}}
- {name: prod, user: {client-certificate: /c.pem, client-key: /k.pem}}
"""


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "config"
    path.write_text(TWO_CONTEXTS, encoding="utf-8")
    return path


def test_the_current_context_by_default(kubeconfig: Path):
    info = credentials.from_kubeconfig([str(kubeconfig)])
    assert (info.server, info.token, info.insecure, info.default_namespace) == (
        "https://dev:6443", "dev-token", True, "team")


def test_another_context_by_name(kubeconfig: Path):
    info = credentials.from_kubeconfig([str(kubeconfig)], "prod")
    assert (info.server, info.ca_path, info.certificate_path, info.private_key_path,
            info.token) == ("https://prod:6443", "/ca.pem", "/c.pem", "/k.pem", None)


def test_merged_files_the_first_that_names_a_thing_wins(kubeconfig: Path, tmp_path: Path):
    first = tmp_path / "first"
    first.write_text("current-context: prod\nclusters:\n"
                     "- {name: prod, cluster: {server: 'https://elsewhere'}}\n", encoding="utf-8")
    info = credentials.from_kubeconfig([str(first), str(kubeconfig)])
    assert info.server == "https://elsewhere"
    assert info.certificate_path == "/c.pem"


def test_an_unknown_context_lists_the_known_ones(kubeconfig: Path):
    with pytest.raises(credentials.KubeconfigError, match=r"no context 'staging' \(contexts: "
                                                          r"dev, prod\)"):
        credentials.from_kubeconfig([str(kubeconfig)], "staging")


@pytest.mark.parametrize(("text", "message"), [
    ("garbage: [\n", r"not valid YAML \(line 2, column 1\)"),
    ("- a list\n", "expected a mapping, got list"),
    ("contexts: {dev: 1}\n", "contexts must be a list"),
    ("contexts: [{context: {}}]\n", "every entry of contexts needs a name"),
    ("contexts: [{name: a, context: {cluster: x}}]\ncurrent-context: a\n",
     "context 'a' names no cluster with a server"),
    ("clusters: []\n", "no current-context; pass --context"),
])
def test_a_broken_file_is_one_error_naming_it(text: str, message: str, tmp_path: Path):
    path = tmp_path / "broken"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(credentials.KubeconfigError, match=message) as caught:
        credentials.from_kubeconfig([str(path)])
    assert str(path) in str(caught.value)


def test_explicit_paths_win_over_the_environment(kubeconfig: Path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", "/elsewhere/config")
    assert credentials.kubeconfig_paths(str(kubeconfig)) == [str(kubeconfig)]
    assert credentials.kubeconfig_paths() == ["/elsewhere/config"]


@pytest.mark.skipif(Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists(),
                    reason="in a pod the service account is found first")
def test_no_kubeconfig_anywhere_is_no_credentials(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    import kopf

    assert credentials.connection_info(kopf.OperatorSettings()) is None
    with pytest.raises(credentials.KubeconfigError, match="no kubeconfig"):
        credentials.connection_info(kopf.OperatorSettings(), context="dev")


CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"


def _b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


def test_inline_kind_style_credentials_become_pem_and_private_files(tmp_path: Path):
    path = tmp_path / "kind"
    path.write_text(
        "current-context: kind\n"
        "contexts: [{name: kind, context: {cluster: kind, user: kind}}]\n"
        f"clusters: [{{name: kind, cluster: {{server: 'https://127.0.0.1:6443', "
        f"certificate-authority-data: {_b64(CERT)}}}}}]\n"
        f"users: [{{name: kind, user: {{client-certificate-data: {_b64(CERT)}, "
        f"client-key-data: {_b64(KEY)}}}}}]\n", encoding="utf-8")
    connection = credentials.connection(credentials.from_kubeconfig([str(path)]))
    assert connection.ca_data == CERT.encode()
    assert connection.certificate_path is not None
    assert connection.private_key_path is not None
    assert Path(connection.certificate_path).read_text() == CERT
    assert Path(connection.private_key_path).read_text() == KEY
    assert Path(connection.private_key_path).stat().st_mode & 0o777 == 0o600


def test_paths_and_pem_pass_through_and_garbage_is_named():
    import kopf

    connection = credentials.connection(kopf.ConnectionInfo(
        server="https://x", ca_data=CERT, certificate_path="/c.pem", private_key_path="/k.pem"))
    assert (connection.ca_data, connection.certificate_path, connection.private_key_path) == (
        CERT.encode(), "/c.pem", "/k.pem")
    with pytest.raises(credentials.KubeconfigError,
                       match="certificate-authority-data: neither PEM nor base64"):
        credentials.connection(kopf.ConnectionInfo(server="https://x", ca_data="not base64!"))
