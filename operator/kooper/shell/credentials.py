"""Credentials: ``--kubeconfig``/``--context``, ``$KUBECONFIG``, the pod's service account,
``~/.kube/config`` (controller-runtime's order).

Kubeconfigs are read by the ``kubernetes`` client's own loader (``kubernetes.config``),
so what works with kubectl works here: exec plugins (EKS, GKE, AKS), ``tokenFile``,
auth-provider tokens, paths relative to the file that names them (``_resolve_local_paths``),
inline ``*-data``, several files in ``$KUBECONFIG``, a context by name, its namespace, a
cluster's ``proxy-url`` (for kopf's watches too). ``tls-server-name``, a SOCKS
``proxy-url`` and a user's impersonation (``as``...) are errors: kopf's client cannot
follow them. What kubectl refuses is refused too, and what would send requests
anonymous is an error (``kubeconfig_checks``: a context naming a user no file defines,
an empty ``tokenFile``, an exec plugin that fails or wants a terminal there is not).
Where the loader is not kubectl, kooper makes up for it: an ``oidc`` refresh checks the
IdP and is written back to the file (``_oidc_as_kubectl``), ``provideClusterInfo`` hands
a CA file over as data, a server without a scheme gets client-go's
(``_cluster_as_client_go``). The service account is
``sdk.connection.in_cluster``: the same discovery as the worker's.

Every problem becomes one ``KubeconfigError`` naming the file, never a traceback.
``login(config)`` wraps the choice in a ``login.Login``: the one refreshing source
of credentials for kopf's watches and kooper's writes.

(``pykube-ng``, which kopf can also piggyback on, has had no release since 2023;
kooper does not use it.)
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import os
import pathlib
import ssl
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kooper.core import errors
from kooper.sdk import connection as connections
from kooper.sdk.connection import Connection
from kooper.shell import kubeconfig_checks as checks
from kooper.shell import login as logins
from kooper.shell import settings

logger = logging.getLogger("kooper.credentials")

KubeconfigError = checks.KubeconfigError
"""A kubeconfig file is missing, unreadable, or lacks what the context needs."""


def kubeconfig_paths(explicit: str | None = None) -> list[str]:
    """``--kubeconfig`` (one file, as kubectl takes it), else ``$KUBECONFIG`` (a path list),
    else ``~/.kube/config`` if present."""
    if explicit:
        return [os.path.expanduser(explicit)]
    text = os.environ.get("KUBECONFIG", "")
    if not text:
        default = os.path.expanduser("~/.kube/config")
        return [default] if os.path.exists(default) else []
    return [os.path.expanduser(p.strip()) for p in text.split(os.pathsep) if p.strip()]


def from_kubeconfig(paths: Sequence[str], context: str | None = None) -> Connection:
    """The connection of ``context`` (default: the current one) in the merged ``paths``.

    Merged as kubectl merges them (the first file that names an entry wins; missing and
    empty files are skipped unless nothing else is left). Runs the context's exec plugin,
    if any, now: call again to log in again.
    """
    if not paths:
        raise KubeconfigError("no kubeconfig: no --kubeconfig, $KUBECONFIG or ~/.kube/config")
    if len(paths) == 1 and not os.path.exists(paths[0]):
        raise KubeconfigError(f"kubeconfig {paths[0]}: no such file")
    files = ", ".join(paths)
    import yaml
    from kubernetes.config.config_exception import ConfigException

    try:
        found = checks.read(list(paths))
        if not found:
            raise KubeconfigError(f"kubeconfig {files}: no configuration found")
        files = ", ".join(found)
        return _connect(found, files, context)
    except KubeconfigError:
        raise
    except ConfigException as exc:
        raise KubeconfigError(f"kubeconfig {files}: {_first_line(exc)}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "parse error"
        raise KubeconfigError(f"kubeconfig {files}: not valid YAML{where}: {problem}") from None
    except Exception as exc:  # a file it names is missing, a broken exec plugin...
        raise KubeconfigError(f"kubeconfig {files}: {type(exc).__name__}: "
                              f"{_first_line(exc)}") from None


def _connect(found: list[str], files: str, context: str | None) -> Connection:
    """``from_kubeconfig`` once the files are read: the checks around the loader's run."""
    from kubernetes import client as k8s_client
    from kubernetes.config import kube_config

    merged = kube_config.KubeConfigMerger(os.pathsep.join(found))  # type: ignore[no-untyped-call]
    config = merged.config.value
    _name_entries(config)
    context = _context_name(merged, files, context)
    chosen = next(getattr(n, "value", n) for n in config["contexts"]
                  if getattr(n, "value", n).get("name") == context)
    where = f"kubeconfig {files}: context {context!r}"
    checks.check_entries(where, config, chosen)
    _resolve_local_paths(config)
    names = chosen.get("context") or {}
    user = checks.entry(config, names.get("user"), "user") or {}
    _cluster_as_client_go(config, names.get("cluster"), user)
    cluster = checks.entry(config, names.get("cluster"), "cluster") or {}
    checks.check_before_login(where, names, cluster, user)
    # Every path is absolute now: no base path, so an exec plugin runs in our working
    # directory (the loader's default would run it in the cluster's file's folder).
    loader = kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call]
        config_dict=merged.config, active_context=context, config_base_path="",
        config_persister=_oidc_as_kubectl(user, merged))
    configuration = k8s_client.Configuration()
    with checks.logged_by_the_loader() as logged:
        try:
            loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
        except Exception as exc:
            checks.check_provider_failure(where, user, exc)
            raise
    token_file = _token_file(user)
    checks.check_after_login(where, names, user, configuration, logged=logged,
                             token_file=token_file)
    expiry = getattr(loader, "expiry", None) or _oidc_expiry(user, configuration)
    found_connection = _connection(configuration, names.get("namespace"), token_file,
                                   expiry, cluster)
    try:
        connections.ssl_context(found_connection)  # what the first request would load
    except (ssl.SSLError, OSError) as exc:
        raise KubeconfigError(
            f"{where}: its certificate-authority or client certificate and key do not "
            f"load: {_first_line(exc)}") from None
    return found_connection


def _cluster_as_client_go(config: Mapping[str, Any], name: Any,
                          user: Mapping[str, Any]) -> None:
    """The chosen cluster as client-go reads it where the loader does not: its server URL
    (``_server_url``), and for an exec plugin with ``provideClusterInfo`` a
    ``certificate-authority`` file as ``certificate-authority-data`` (client-go hands the
    plugin the data; the loader passed the path alone, which a plugin never reads)."""
    for node in config.get("clusters") or []:
        if node.value.get("name") != name:
            continue
        cluster = {**node.value["cluster"]}
        if cluster.get("server"):
            cluster["server"] = _server_url(cluster, user)
        plugin = user.get("exec")
        if (isinstance(plugin, dict) and plugin.get("provideClusterInfo")
                and cluster.get("certificate-authority")
                and not cluster.get("certificate-authority-data")):
            data = pathlib.Path(cluster.pop("certificate-authority")).read_bytes()
            cluster["certificate-authority-data"] = base64.b64encode(data).decode()
        node.value = {**node.value, "cluster": cluster}


def _server_url(cluster: Mapping[str, Any], user: Mapping[str, Any]) -> str:
    """client-go's ``DefaultServerURL``: a server without a scheme (``10.0.0.1:6443``) is
    ``https://`` when the cluster or user has TLS material, else ``http://`` (the loader
    kept the bare ``host:port``, which no client can reach), and a scheme is lower case
    (the loader took ``HTTPS://`` for plain HTTP)."""
    server = str(cluster["server"])
    parts = urllib.parse.urlsplit(server)
    if parts.scheme and parts.netloc:
        return parts.scheme.lower() + server[len(parts.scheme):]
    tls = any(cluster.get(key) for key in (
        "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify"))
    tls = tls or any(user.get(key) for key in ("client-certificate", "client-certificate-data"))
    return ("https://" if tls else "http://") + server


def _oidc_as_kubectl(user: Mapping[str, Any], merged: Any) -> Callable[[], None] | None:
    """An ``oidc`` auth-provider's refresh made as kubectl makes it: the IdP's certificate
    checked against the system's roots when the user names no ``idp-certificate-authority``
    (the loader would not check it at all), and the refreshed ``id-token`` and
    ``refresh-token`` written back to the user's file (the loader kept them in memory: the
    next login would spend the old refresh token again, which an IdP that rotates them,
    Dex for one, refuses, and kubectl's next run with it)."""
    provider = user.get("auth-provider")
    if not isinstance(provider, dict) or provider.get("name") != "oidc":
        return None
    config = provider.get("config")
    if not isinstance(config, dict):
        return None
    added = not (config.get("idp-certificate-authority")
                 or config.get("idp-certificate-authority-data"))
    if added:
        config["idp-certificate-authority"] = _system_roots()

    def persist() -> None:
        if added:
            config.pop("idp-certificate-authority", None)  # not ours to write
        try:
            merged.save_changes()
        except OSError as exc:  # a kubeconfig mounted read-only: the token is good anyway
            logger.warning("cannot write the refreshed oidc token back: %s", exc)

    return persist


def _oidc_expiry(user: Mapping[str, Any], configuration: Any) -> datetime.datetime | None:
    """When an ``oidc`` id-token expires (its ``exp`` claim), so that ``login.Login``
    renews it first, as client-go's oidc provider does before a request (the loader says
    nothing: the first request after it expired came back 401)."""
    provider = user.get("auth-provider")
    header = configuration.get_api_key_with_prefix("BearerToken") or ""
    if not isinstance(provider, dict) or provider.get("name") != "oidc" or not header:
        return None
    try:
        claims = header.split()[-1].split(".")[1]
        exp = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))["exp"]
        return datetime.datetime.fromtimestamp(float(exp), tz=datetime.UTC)
    except (IndexError, ValueError, KeyError, TypeError):
        return None


def _system_roots() -> str:
    """The system's CA bundle (client-go checks an IdP against the system's roots)."""
    paths = ssl.get_default_verify_paths()
    for path in (paths.cafile, paths.openssl_cafile):
        if path and os.path.isfile(path):
            return path
    import certifi

    return str(certifi.where())


def _name_entries(config: Mapping[str, Any]) -> None:
    """The loader names an entry in its errors by the repr of the whole entry ("Expected
    key id-token in /home/me/.kube/config/{'name': 'me', 'user': {...}}"): the user's
    token, client secret and key with it. By its file and name instead."""
    for kind in ("clusters", "contexts", "users"):
        for node in config.get(kind) or []:
            if isinstance(getattr(node, "value", None), dict) and hasattr(node, "name"):
                node.name = f"{node.path}/{kind}[name={node.value.get('name')}]"


def _context_name(merged: Any, files: str, context: str | None) -> str:
    """``context``, else the first file's ``current-context`` (kubectl's; the python
    client's merger keeps the last one's); ``KubeconfigError`` if no file defines it."""
    if context is None:
        context = next((str(c["current-context"]) for c in merged.config_files.values()
                        if isinstance(c, dict) and c.get("current-context")), None)
    known = sorted(str(getattr(c, "value", c).get("name"))
                   for c in merged.config.value.get("contexts") or [])
    if context is None:
        raise KubeconfigError(f"kubeconfig {files}: no current-context; pass --context "
                              f"(contexts: {', '.join(known) or 'none'})")
    if context not in known:
        raise KubeconfigError(f"kubeconfig {files}: no context {context!r} "
                              f"(contexts: {', '.join(known) or 'none'})")
    return context


def _connection(configuration: Any, namespace: Any, token_file: str | None, expiry: Any,
                cluster: Mapping[str, Any]) -> Connection:
    """The ``Connection`` the loader's ``configuration`` describes."""
    header = (configuration.get_api_key_with_prefix("BearerToken")
              or configuration.get_api_key_with_prefix("authorization"))
    scheme, _, token = (header or "").strip().partition(" ")
    token = token.strip()
    if header and not token:
        scheme, token = "Bearer", header
    return Connection(
        server=str(configuration.host),
        token=token or None,
        scheme=scheme or "Bearer",
        ca_path=configuration.ssl_ca_cert or None,
        insecure=not configuration.verify_ssl,
        certificate_path=configuration.cert_file or None,
        private_key_path=configuration.key_file or None,
        namespace=str(namespace) if namespace else None,
        # A ``tokenFile`` is re-read as it rotates (``connection.Bearer``), as client-go does.
        token_file=token_file,
        expires_at=expiry.timestamp() if isinstance(expiry, datetime.datetime) else None,
        # The cluster's own key: the client's Configuration also fills ``proxy`` from
        # the environment, which ``proxy_of`` applies with NO_PROXY.
        proxy_url=str(cluster.get("proxy-url") or "") or None,
    )


def _token_file(user: Mapping[str, Any]) -> str | None:
    """The user's ``tokenFile`` (``_resolve_local_paths`` made it absolute), unless an
    auth-provider gives the token. Beside a ``token`` too: client-go's transport sends
    the file's token while the file reads, the ``token`` when it does not (its kubeconfig
    reference says the ``token`` wins; its code does not)."""
    if user.get("auth-provider") or not user.get("tokenFile"):
        return None
    return str(user["tokenFile"])


_LOCAL_PATHS = {"cluster": ("certificate-authority",),
                "user": ("client-certificate", "client-key", "tokenFile")}


def _resolve_local_paths(config: Mapping[str, Any]) -> None:
    """client-go's ``ResolveLocalPaths``: a relative path in an entry is relative to the
    folder of the file that entry came from: a cluster's ``certificate-authority``; a
    user's ``client-certificate``, ``client-key``, ``tokenFile``, and exec ``command``
    when it holds a slash (a bare name is looked up on ``$PATH``). The ``kubernetes``
    loader would take the cluster's file for the user's certificates and plugin too."""
    for kind, keys in _LOCAL_PATHS.items():
        for node in config.get(kind + "s") or []:
            entry, origin = getattr(node, "value", None), getattr(node, "path", None)
            if not origin or not isinstance(entry, dict) or not isinstance(
                    inner := entry.get(kind), dict):
                continue
            base = os.path.dirname(os.path.abspath(str(origin)))

            def resolved(path: Any, base: str = base) -> Any:
                if not isinstance(path, str) or not path or os.path.isabs(path):
                    return path
                return os.path.normpath(os.path.join(base, path))

            fixed = {**inner, **{key: resolved(inner[key]) for key in keys if key in inner}}
            plugin = inner.get("exec")
            if isinstance(plugin, dict) and os.sep in str(plugin.get("command") or ""):
                fixed["exec"] = {**plugin, "command": resolved(plugin["command"])}
            node.value = {**entry, kind: fixed}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def in_cluster(env: Mapping[str, str] | None = None) -> Connection | None:
    """The pod's service account (``sdk.connection.in_cluster``), or None outside a pod."""
    return connections.in_cluster(os.environ if env is None else env)


def loader(*, kube_api: str | None = None, kubeconfig: str | None = None,
           context: str | None = None) -> Callable[[], Connection] | None:
    """How this operator logs in (each call a fresh login), or None without credentials:
    ``KOOPER_KUBE_API``, else the flags' kubeconfig, else ``$KUBECONFIG``, else the pod's
    service account, else ``~/.kube/config``: controller-runtime's order (kubectl's too,
    but for ``~/.kube/config``, which it reads before the service account). A
    ``$KUBECONFIG`` whose files are all missing counts as unset, as in client-go."""
    if kube_api and not (kubeconfig or context):
        api = kube_api
        return lambda: Connection(server=api, insecure=True)
    if kubeconfig or context:
        paths = kubeconfig_paths(kubeconfig)
        return lambda: from_kubeconfig(paths, context)
    if os.environ.get("KUBECONFIG") and any(os.path.exists(p) for p in kubeconfig_paths()):
        named = kubeconfig_paths()
        return lambda: from_kubeconfig(named)
    if in_cluster() is not None:
        def service_account() -> Connection:
            found = in_cluster()
            if found is None:
                raise KubeconfigError("the pod's service-account token is gone")
            return found
        return service_account
    paths = kubeconfig_paths()
    if paths:
        return lambda: from_kubeconfig(paths)
    return None


def login(config: settings.Config, *,
          on_login: Callable[[str], None] | None = None) -> logins.Login:
    """The operator's one refreshing source of credentials (``KooperError`` if none)."""
    load = loader(kube_api=config.kube_api, kubeconfig=config.kubeconfig,
                  context=config.context)
    if load is None:
        absent = connections.no_service_account(os.environ, root=connections.SERVICE_ACCOUNT)
        raise errors.KooperError(f"no Kubernetes credentials: {absent}, no kubeconfig, and "
                                 "KOOPER_KUBE_API is not set")
    return logins.Login(load, on_login=on_login)


def connection_info(conn: Connection, header: str | None) -> Any:
    """kopf's ``ConnectionInfo`` for ``conn`` (its token as of now)."""
    import kopf

    scheme, _, token = (header or "").partition(" ")
    return kopf.ConnectionInfo(
        server=conn.server, ca_path=conn.ca_path,
        ca_data=conn.ca_data, insecure=conn.insecure or None,
        scheme=scheme or None, token=token or None,
        certificate_path=conn.certificate_path, private_key_path=conn.private_key_path,
        default_namespace=conn.namespace,
        # kopf's watches take the proxy the operator's own requests take (one rule).
        proxy_url=connections.proxy_of(conn, conn.server),
    )
