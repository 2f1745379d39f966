"""Credentials: --kubeconfig/--context, else the in-cluster service account, else kubeconfig.

kopf's own ``login_with_kubeconfig`` reads only the current context and lets a
broken file escape as a YAML or ``KeyError`` traceback; this reader takes a
context by name and turns every problem into one ``KooperError`` naming the file.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import kopf
import yaml

from kooper.core import errors
from kooper.shell import kube


class KubeconfigError(errors.KooperError):
    """A kubeconfig file is missing, unreadable, or lacks what the context needs."""


def kubeconfig_paths(explicit: str | None = None) -> list[str]:
    """``--kubeconfig``, else ``$KUBECONFIG`` (a path list), else ``~/.kube/config`` if present."""
    text = explicit or os.environ.get("KUBECONFIG", "")
    if not text:
        default = os.path.expanduser("~/.kube/config")
        return [default] if os.path.exists(default) else []
    return [os.path.expanduser(p.strip()) for p in text.split(os.pathsep) if p.strip()]


def _load(path: str) -> Mapping[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
    except OSError as exc:
        raise KubeconfigError(f"kubeconfig {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise KubeconfigError(f"kubeconfig {path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "parse error"
        raise KubeconfigError(f"kubeconfig {path}: not valid YAML{where}: {problem}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise KubeconfigError(f"kubeconfig {path}: expected a mapping, got "
                              f"{type(document).__name__}")
    return document


def _named(document: Mapping[str, Any], key: str, path: str) -> dict[str, dict[str, Any]]:
    items = document.get(key) or []
    if not isinstance(items, list):
        raise KubeconfigError(f"kubeconfig {path}: {key} must be a list")
    named: dict[str, dict[str, Any]] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise KubeconfigError(f"kubeconfig {path}: every entry of {key} needs a name")
        body = item.get(key.rstrip("s")) or {}
        if not isinstance(body, dict):
            raise KubeconfigError(f"kubeconfig {path}: {key} {item['name']!r} is not a mapping")
        named[item["name"]] = body
    return named


def from_kubeconfig(paths: Sequence[str], context: str | None = None) -> kopf.ConnectionInfo:
    """The connection of ``context`` (default: the current one) in the merged ``paths``.

    Merged the way kubectl does: the first file that names a context, cluster or user
    wins, and the first ``current-context`` wins.
    """
    if not paths:
        raise KubeconfigError("no kubeconfig: no --kubeconfig, $KUBECONFIG or ~/.kube/config")
    current: str | None = None
    contexts: dict[str, dict[str, Any]] = {}
    clusters: dict[str, dict[str, Any]] = {}
    users: dict[str, dict[str, Any]] = {}
    for path in paths:
        document = _load(path)
        if current is None and isinstance(document.get("current-context"), str):
            current = str(document["current-context"]) or None
        for target, key in ((contexts, "contexts"), (clusters, "clusters"), (users, "users")):
            for entry, body in _named(document, key, path).items():
                target.setdefault(entry, body)
    files = ", ".join(paths)
    name = context or current
    if name is None:
        raise KubeconfigError(f"kubeconfig {files}: no current-context; pass --context "
                              f"(contexts: {', '.join(sorted(contexts)) or 'none'})")
    if name not in contexts:
        raise KubeconfigError(f"kubeconfig {files}: no context {name!r} (contexts: "
                              f"{', '.join(sorted(contexts)) or 'none'})")
    chosen = contexts[name]
    cluster = clusters.get(str(chosen.get("cluster")))
    if cluster is None or not cluster.get("server"):
        raise KubeconfigError(f"kubeconfig {files}: context {name!r} names no cluster with "
                              f"a server")
    user = users.get(str(chosen.get("user")), {})
    token = user.get("token") or (
        (user.get("auth-provider") or {}).get("config") or {}).get("access-token")
    return kopf.ConnectionInfo(
        server=cluster["server"],
        ca_path=cluster.get("certificate-authority"),
        ca_data=cluster.get("certificate-authority-data"),
        insecure=cluster.get("insecure-skip-tls-verify"),
        certificate_path=user.get("client-certificate"),
        certificate_data=user.get("client-certificate-data"),
        private_key_path=user.get("client-key"),
        private_key_data=user.get("client-key-data"),
        username=user.get("username"),
        password=user.get("password"),
        token=token,
        default_namespace=chosen.get("namespace"),
    )


def in_cluster_server(env: Mapping[str, str]) -> str | None:
    """``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``, as client-go reads it.

    kopf's service-account login always names ``https://kubernetes.default.svc``
    (port 443, resolved by the cluster's DNS); every pod also gets these two
    variables, and a cluster whose API server is elsewhere (the local control
    plane without root: a free port of 127.0.0.1) is found only through them.
    None when either is missing.
    """
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        return None
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def connection_info(kopf_settings: Any, *, kubeconfig: str | None = None,
                    context: str | None = None) -> kopf.ConnectionInfo | None:
    """``kubeconfig``/``context`` if given; else the service account; else kubeconfig; else None."""
    if kubeconfig or context:
        return from_kubeconfig(kubeconfig_paths(kubeconfig), context)
    in_cluster = kopf.login_with_service_account(settings=kopf_settings)
    if in_cluster is not None:
        server = in_cluster_server(os.environ)
        return dataclasses.replace(in_cluster, server=server) if server else in_cluster
    paths = kubeconfig_paths()
    return from_kubeconfig(paths) if paths else None


def connection(info: kopf.ConnectionInfo) -> kube.Connection:
    """kooper's client connection from kopf's ``ConnectionInfo``.

    A kubeconfig carries the CA as base64 of PEM (``certificate-authority-data``) and
    often the client certificate and key inline (``client-*-data``, as kind writes
    them); the CA is decoded to PEM and the inline pair goes to a private folder,
    removed at exit, because Python's ``ssl`` loads a certificate chain from files only.
    """
    certificate = _path(info.certificate_path) or _file(info.certificate_data, "client.crt")
    key = _path(info.private_key_path) or _file(info.private_key_data, "client.key")
    return kube.Connection(
        server=info.server, token=info.token, scheme=info.scheme,
        ca_path=_path(info.ca_path), ca_data=pem(info.ca_data, "certificate-authority-data"),
        insecure=bool(info.insecure), certificate_path=certificate, private_key_path=key,
    )


def pem(data: str | bytes | None, what: str) -> bytes | None:
    """PEM text as given, or decoded from the base64 a kubeconfig holds."""
    if data is None or data in ("", b""):
        return None
    raw = data.encode("ascii", "replace") if isinstance(data, str) else data
    if raw.lstrip().startswith(b"-----BEGIN "):
        return raw
    try:
        decoded = base64.b64decode(raw, validate=True)
    except binascii.Error:
        raise KubeconfigError(f"{what}: neither PEM nor base64") from None
    if not decoded.lstrip().startswith(b"-----BEGIN "):
        raise KubeconfigError(f"{what}: the base64 does not hold PEM")
    return decoded


_folder: list[str] = []


def _file(data: str | bytes | None, name: str) -> str | None:
    content = pem(data, name)
    if content is None:
        return None
    if not _folder:
        _folder.append(tempfile.mkdtemp(prefix="kooper-credentials-"))  # mode 0700
        atexit.register(shutil.rmtree, _folder[0], ignore_errors=True)
    path = os.path.join(_folder[0], name)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(content)
    return path


def _path(value: object) -> str | None:
    if value is None or value == "":
        return None
    return os.fsdecode(value)  # type: ignore[arg-type]
