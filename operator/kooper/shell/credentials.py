"""Credentials: ``--kubeconfig``/``--context``, ``$KUBECONFIG``, the pod's service account,
``~/.kube/config`` (controller-runtime's order).

Kubeconfigs are read by the ``kubernetes`` client's own loader (``kubernetes.config``),
so what works with kubectl works here: exec plugins (EKS, GKE, AKS), ``tokenFile``,
auth-provider tokens, paths relative to the file that names them (``_resolve_local_paths``),
inline ``*-data``, several files in ``$KUBECONFIG``, a context by name, its namespace, a
cluster's ``proxy-url`` (for kopf's watches too). ``tls-server-name``, a SOCKS
``proxy-url`` and a user's impersonation (``as``...) are errors: kopf's client cannot
follow them. The service account is ``sdk.connection.in_cluster``: the same
discovery as the worker's.

Every problem becomes one ``KubeconfigError`` naming the file, never a traceback.
``login(config)`` wraps the choice in a ``login.Login``: the one refreshing source
of credentials for kopf's watches and kooper's writes.

(``pykube-ng``, which kopf can also piggyback on, has had no release since 2023;
kooper does not use it.)
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import pathlib
import shutil
import ssl
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from kooper.core import errors
from kooper.sdk import connection as connections
from kooper.sdk.connection import Connection
from kooper.shell import login as logins
from kooper.shell import settings


class KubeconfigError(errors.KooperError):
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
    from kubernetes import client as k8s_client
    from kubernetes.config import kube_config
    from kubernetes.config.config_exception import ConfigException

    configuration = k8s_client.Configuration()
    try:
        found = [path for path in paths if os.path.exists(path)
                 and yaml.safe_load(pathlib.Path(path).read_text(encoding="utf-8")) is not None]
        if not found:
            raise KubeconfigError(f"kubeconfig {files}: no configuration found")
        files = ", ".join(found)
        merged = kube_config.KubeConfigMerger(  # type: ignore[no-untyped-call]
            os.pathsep.join(found))
        if context is None:
            # kubectl takes the first file's current-context; the python client's merger
            # keeps the last one's.
            context = next((str(c["current-context"]) for c in merged.config_files.values()
                            if isinstance(c, dict) and c.get("current-context")), None)
        known = sorted(str(c.value.get("name")) for c in merged.config.value["contexts"])
        if context is None:
            raise KubeconfigError(f"kubeconfig {files}: no current-context; pass --context "
                                  f"(contexts: {', '.join(known) or 'none'})")
        if context not in known:
            raise KubeconfigError(f"kubeconfig {files}: no context {context!r} "
                                  f"(contexts: {', '.join(known) or 'none'})")
        _resolve_local_paths(merged.config.value)
        # Every path is absolute now: no base path, so an exec plugin runs in our working
        # directory (the loader's default would run it in the cluster's file's folder).
        loader = kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call]
            config_dict=merged.config, active_context=context, config_base_path="")
        with _logged_by_the_loader() as logged:
            loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
        chosen = loader.current_context
        cluster = _entry_of(merged.config.value, chosen, "cluster")
        if not cluster.get("server"):
            raise KubeconfigError(
                f"kubeconfig {files}: context {context!r}: cluster "
                f"{(chosen.get('context') or {}).get('cluster')!r} has no server")
        user = _entry_of(merged.config.value, chosen, "user")
        _check_user(f"kubeconfig {files}: context {context!r}", user, configuration, logged)
        impersonating = [key for key in _IMPERSONATION if user.get(key)]
        if impersonating:
            # client-go sends them as Impersonate-* headers; kopf's client cannot.
            raise KubeconfigError(
                f"kubeconfig {files}: context {context!r}: impersonation "
                f"({', '.join(impersonating)}) is not supported; use a context whose user "
                "has the rights itself")
        if configuration.cert_file and not configuration.key_file:
            # client-go refuses it; the TLS set-up would drop the certificate (anonymous).
            raise KubeconfigError(
                f"kubeconfig {files}: context {context!r}: user "
                f"{(chosen.get('context') or {}).get('user')!r} has a client-certificate "
                "but no client-key or client-key-data")
        proxy = str(cluster.get("proxy-url") or "")
        if proxy and urllib.parse.urlsplit(proxy).scheme not in ("http", "https"):
            # client-go also takes socks5; kopf's client and kooper's speak HTTP CONNECT only.
            raise KubeconfigError(
                f"kubeconfig {files}: context {context!r}: proxy-url {proxy!r} is not "
                "supported; use an http:// or https:// proxy")
        if cluster.get("tls-server-name"):
            # kopf's client cannot set the TLS server name: its watches would fail the
            # certificate check with a message that names neither the file nor the key.
            raise KubeconfigError(
                f"kubeconfig {files}: context {context!r}: tls-server-name is not "
                "supported; use a server URL whose host the API server's certificate names")
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
    header = (configuration.get_api_key_with_prefix("BearerToken")
              or configuration.get_api_key_with_prefix("authorization"))
    scheme, _, token = (header or "").strip().partition(" ")
    token = token.strip()
    if header and not token:
        scheme, token = "Bearer", header
    namespace = (chosen.get("context") or {}).get("namespace") if isinstance(chosen, dict) \
        else None
    expiry = getattr(loader, "expiry", None)
    found_connection = Connection(
        server=str(configuration.host),
        token=token or None,
        scheme=scheme or "Bearer",
        ca_path=configuration.ssl_ca_cert or None,
        insecure=not configuration.verify_ssl,
        certificate_path=configuration.cert_file or None,
        private_key_path=configuration.key_file or None,
        namespace=namespace or None,
        # A ``tokenFile`` is re-read as it rotates (``connection.Bearer``), as client-go does.
        token_file=_token_file(merged.config.value, chosen),
        expires_at=expiry.timestamp() if isinstance(expiry, datetime.datetime) else None,
        # The cluster's own key: the client's Configuration also fills ``proxy`` from
        # the environment, which ``proxy_of`` applies with NO_PROXY.
        proxy_url=str(cluster.get("proxy-url") or "") or None,
    )
    try:
        connections.ssl_context(found_connection)  # what the first request would load
    except (ssl.SSLError, OSError) as exc:
        raise KubeconfigError(
            f"kubeconfig {files}: context {context!r}: its certificate-authority or "
            f"client certificate and key do not load: {_first_line(exc)}") from None
    return found_connection


def _entry_of(config: Mapping[str, Any], context: Any, kind: str) -> Mapping[str, Any]:
    """The ``cluster`` or ``user`` entry the chosen context names in the merged kubeconfig."""
    name = ((context.get("context") or {}).get(kind) if isinstance(context, dict)
            else None)
    for node in config.get(kind + "s") or []:
        entry = getattr(node, "value", node)  # the merger wraps each entry in a ConfigNode
        if isinstance(entry, dict) and entry.get("name") == name:
            found = entry.get(kind)
            return found if isinstance(found, dict) else {}
    return {}


def _token_file(config: Mapping[str, Any], context: Any) -> str | None:
    """The chosen user's ``tokenFile`` (``_resolve_local_paths`` made it absolute), when
    the loader took its token from it (no auth-provider and no ``token``: those come
    first)."""
    user = _entry_of(config, context, "user")
    if user.get("auth-provider") or user.get("token") or not user.get("tokenFile"):
        return None
    return str(user["tokenFile"])


_IMPERSONATION = ("as", "as-uid", "as-groups", "as-user-extra")
"""A kubeconfig user's impersonation keys (``kubectl --as``'s, kept in the file)."""

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


@contextlib.contextmanager
def _logged_by_the_loader() -> Iterator[list[str]]:
    """The errors the ``kubernetes`` loader logs instead of raising (a failed exec plugin),
    kept for ``_check_user`` rather than printed as a second line."""
    logged: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.module == "kube_config":
                logged.append(record.getMessage())

    handler = Keep(logging.ERROR)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield logged
    finally:
        root.removeHandler(handler)


def _check_user(where: str, user: Mapping[str, Any], configuration: Any,
                logged: list[str]) -> None:
    """``KubeconfigError`` when the user's exec plugin or auth-provider gave no credentials
    (the loader would go on without any: every request anonymous)."""
    if configuration.get_api_key_with_prefix("BearerToken") or configuration.cert_file:
        return
    plugin = user.get("exec")
    if isinstance(plugin, dict):
        command = str(plugin.get("command") or "")
        reason = " ".join(" ".join(logged).split()) or "it gave no token or certificate"
        hint = str(plugin.get("installHint") or "")
        if hint and shutil.which(command) is None:
            reason += ". " + " ".join(hint.split())
        raise KubeconfigError(f"{where}: exec plugin {command!r} failed: {reason}")
    provider = user.get("auth-provider")
    if isinstance(provider, dict):
        raise KubeconfigError(
            f"{where}: auth-provider {provider.get('name')!r} gave no token (kubectl dropped "
            "the gcp and azure providers: use an exec credential plugin instead)")


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
