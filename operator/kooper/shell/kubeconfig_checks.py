"""What kubectl refuses in a kubeconfig, and what kopf's client cannot follow: the checks
``credentials.from_kubeconfig`` makes around the ``kubernetes`` loader, each one
``KubeconfigError`` line naming the file and the problem.

Before the loader (the file alone): a file that is not a kubeconfig mapping, a context
naming a cluster or user no file defines, a cluster without a server, a CA beside
``insecure-skip-tls-verify``, ``tls-server-name``, a SOCKS ``proxy-url``, impersonation,
an exec plugin that wants a terminal there is not. After it (what it found): an exec
plugin or auth-provider that gave nothing, a certificate without its key, an empty
``tokenFile``: requests would go out anonymous.
"""

from __future__ import annotations

import contextlib
import logging
import pathlib
import shutil
import sys
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

from kooper.core import errors


class KubeconfigError(errors.KooperError):
    """A kubeconfig file is missing, unreadable, or lacks what the context needs."""


def read(paths: list[str]) -> list[str]:
    """The files of ``paths`` that hold a configuration (missing and empty ones are
    skipped, as kubectl skips them); ``KubeconfigError`` for one that is not a kubeconfig
    (the loader would fail on it with a python ``TypeError``)."""
    import yaml

    found = []
    for path in paths:
        if not pathlib.Path(path).exists():
            continue
        if pathlib.Path(path).is_dir():
            raise KubeconfigError(f"kubeconfig {path}: is a directory, not a file")
        text = yaml.safe_load(pathlib.Path(path).read_text(encoding="utf-8"))
        if text is None:
            continue
        _check_shape(path, text)
        found.append(path)
    return found


def _check_shape(path: str, config: Any) -> None:
    where = f"kubeconfig {path}: not a kubeconfig"
    if not isinstance(config, dict):
        raise KubeconfigError(f"{where}: a YAML {_kind(config)} instead of a mapping "
                              "(clusters, contexts, users, current-context)")
    for key, inner in (("clusters", "cluster"), ("contexts", "context"), ("users", "user")):
        entries = config.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise KubeconfigError(f"{where}: {key} is a {_kind(entries)} instead of a list")
        for entry in entries:
            if not isinstance(entry, dict) or not entry.get("name"):
                raise KubeconfigError(f"{where}: an entry of {key} has no name")
            if not isinstance(entry.get(inner), dict):
                raise KubeconfigError(
                    f"{where}: {key[:-1]} {entry['name']!r} has no {inner} mapping")


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "mapping"
    return "string" if isinstance(value, str) else type(value).__name__


def entry(config: Mapping[str, Any], name: Any, kind: str) -> Mapping[str, Any] | None:
    """The ``cluster`` or ``user`` named ``name`` in the merged kubeconfig, or None."""
    for node in config.get(kind + "s") or []:
        found = getattr(node, "value", node)  # the merger wraps each entry in a ConfigNode
        if isinstance(found, dict) and found.get("name") == name:
            inner = found.get(kind)
            return inner if isinstance(inner, dict) else {}
    return None


def check_entries(where: str, config: Mapping[str, Any], chosen: Mapping[str, Any]) -> None:
    """The chosen context's cluster, and its user if it names one (a context without a
    user is anonymous in kubectl too), are defined in one of the files."""
    names = chosen.get("context") or {}
    if not names.get("cluster"):
        raise KubeconfigError(f"{where}: the context names no cluster")
    for kind in ("cluster", "user"):
        name = names.get(kind)
        if name and entry(config, name, kind) is None:
            known = sorted(str(getattr(n, "value", n).get("name"))
                           for n in config.get(kind + "s") or [])
            # client-go would go on anonymous for a user it does not find.
            raise KubeconfigError(f"{where}: {kind} {name!r} is in none of the files "
                                  f"({kind}s: {', '.join(known) or 'none'})")


_IMPERSONATION = ("as", "as-uid", "as-groups", "as-user-extra")
"""A kubeconfig user's impersonation keys (``kubectl --as``'s, kept in the file)."""


def check_before_login(where: str, names: Mapping[str, Any], cluster: Mapping[str, Any],
                       user: Mapping[str, Any]) -> None:
    """What kubectl refuses, or kopf's client cannot follow, in the file alone (``names``:
    the context's ``cluster`` and ``user``)."""
    if not cluster.get("server"):
        raise KubeconfigError(f"{where}: cluster {names.get('cluster')!r} has no server")
    if cluster.get("insecure-skip-tls-verify") and (
            cluster.get("certificate-authority") or cluster.get("certificate-authority-data")):
        # client-go's words; the loader would silently skip the CA check.
        raise KubeconfigError(
            f"{where}: insecure-skip-tls-verify with a certificate-authority: specifying a "
            "root certificates file with the insecure flag is not allowed (drop one)")
    impersonating = [key for key in _IMPERSONATION if user.get(key)]
    if impersonating:
        # client-go sends them as Impersonate-* headers; kopf's client cannot.
        raise KubeconfigError(
            f"{where}: impersonation ({', '.join(impersonating)}) is not supported; use a "
            "context whose user has the rights itself")
    proxy = str(cluster.get("proxy-url") or "")
    if proxy and urllib.parse.urlsplit(proxy).scheme not in ("http", "https"):
        # client-go also takes socks5; kopf's client and kooper's speak HTTP CONNECT only.
        raise KubeconfigError(f"{where}: proxy-url {proxy!r} is not supported; use an "
                              "http:// or https:// proxy")
    if cluster.get("tls-server-name"):
        # kopf's client cannot set the TLS server name: its watches would fail the
        # certificate check with a message that names neither the file nor the key.
        raise KubeconfigError(f"{where}: tls-server-name is not supported; use a server URL "
                              "whose host the API server's certificate names")
    plugin = user.get("exec")
    if (isinstance(plugin, dict) and plugin.get("interactiveMode") == "Always"
            and not stdin_is_a_terminal()):
        # client-go's refusal; the loader would run it (a device-code login, say) anyway.
        raise KubeconfigError(
            f"{where}: exec plugin {plugin.get('command')!r} has interactiveMode: Always: "
            "exec plugin cannot support interactive mode: standard input is not a terminal")


def stdin_is_a_terminal() -> bool:
    """Whether standard input is a terminal (client-go's test for interactive plugins)."""
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError, OSError):
        return False


@contextlib.contextmanager
def logged_by_the_loader() -> Iterator[list[str]]:
    """The errors the ``kubernetes`` loader logs instead of raising (a failed exec plugin),
    kept for ``check_after_login`` rather than printed as a second line."""
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


def check_after_login(where: str, names: Mapping[str, Any], user: Mapping[str, Any],
                      configuration: Any, *, logged: list[str], token_file: str | None) -> None:
    """``KubeconfigError`` when the user's exec plugin or auth-provider gave no credentials,
    its certificate has no key, or its ``tokenFile`` is empty (the loader would go on
    without any: every request anonymous)."""
    if configuration.cert_file and not configuration.key_file:
        # client-go refuses it; the TLS set-up would drop the certificate (anonymous).
        raise KubeconfigError(f"{where}: user {names.get('user')!r} has a client-certificate "
                              "but no client-key or client-key-data")
    if (token_file is not None and not user.get("token")
            and not pathlib.Path(token_file).read_text().strip()):
        raise KubeconfigError(f"{where}: read empty token from tokenFile {token_file}")
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
        raise KubeconfigError(f"{where}: auth-provider {provider.get('name')!r} gave no "
                              f"token{_DROPPED}")


_DROPPED = (" (kubectl dropped the gcp and azure providers: use an exec credential plugin "
            "instead)")


def check_provider_failure(where: str, user: Mapping[str, Any], exc: Exception) -> None:
    """``KubeconfigError`` naming the user's auth-provider when the loader failed in it
    (a gcp provider without google-auth: ``AttributeError: 'NoneType' object has no
    attribute 'token'``); nothing for a user without one."""
    provider = user.get("auth-provider")
    if not isinstance(provider, dict):
        return
    name = provider.get("name")
    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    if not isinstance(exc, KubeconfigError) and type(exc).__name__ != "ConfigException":
        text = f"{type(exc).__name__}: {text}"
    raise KubeconfigError(f"{where}: auth-provider {name!r} failed: {text}"
                          f"{_DROPPED if name in ('gcp', 'azure') else ''}") from None
