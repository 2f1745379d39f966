"""Where the API server is and how to reach it: one ``Connection``, one discovery.

Both clients start here: the worker's standard-library ``sdk.kube.Api`` and the
operator's asyncio ``shell.kube.Client`` (whose kubeconfigs are read by the
``kubernetes`` client's loader in ``shell.credentials`` and land in this same value).

Discovery (``discover``), in order, as client-go's ``rest.InClusterConfig``:

1. ``KOOPER_KUBE_API=http://127.0.0.1:PORT``: an unauthenticated URL (the emulator);
2. the in-cluster service account: ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``,
   the token and CA under ``/var/run/secrets/kubernetes.io/serviceaccount``.

A token file is re-read (``bearer``) rather than copied: the kubelet rotates it.
Proxies follow one rule for every request and watch (``proxy_for``): the
environment's ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY``, as urllib reads them.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import os
import pathlib
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping

from kooper.core import errors
from kooper.sdk import apierrors

logger = logging.getLogger("kooper.connection")

API_ENV = "KOOPER_KUBE_API"
SERVICE_ACCOUNT = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_FILE_PERIOD_S = 60.0
"""How long a token read from a file is used before it is read again (client-go: 1 min)."""


class NoCredentialsError(errors.KooperError):
    """Neither ``KOOPER_KUBE_API``, an in-cluster service account nor a kubeconfig is available."""


@dataclasses.dataclass(frozen=True, slots=True)
class Connection:
    """An API server and the credentials to present to it."""

    server: str
    token: str | None = None
    """A bearer token as given (kubeconfig ``token``, an exec plugin's answer)."""
    token_file: str | None = None
    """A file holding the token, re-read every ``TOKEN_FILE_PERIOD_S`` (wins over ``token``,
    which is used while the file cannot be read, as client-go's transport does)."""
    scheme: str = "Bearer"
    ca_path: str | None = None
    ca_data: bytes | None = None
    insecure: bool = False
    certificate_path: str | None = None
    private_key_path: str | None = None
    namespace: str | None = None
    """The kubeconfig context's namespace, or the pod's own (in-cluster)."""
    expires_at: float | None = None
    """Wall-clock second the token expires (an exec plugin's ``expirationTimestamp``)."""
    proxy_url: str | None = None
    """The kubeconfig cluster's ``proxy-url``: every request goes through it, whatever
    the environment says (``proxy_of``)."""

    def expiring(self, now: float, *, skew_s: float = 30.0) -> bool:
        """Whether the token expires within ``skew_s`` of ``now`` (log in again first)."""
        return self.expires_at is not None and now >= self.expires_at - skew_s


def discover(env: Mapping[str, str] | None = None, *,
             root: pathlib.Path = SERVICE_ACCOUNT) -> Connection:
    """``KOOPER_KUBE_API``, else the in-cluster service account; ``NoCredentialsError``."""
    env = os.environ if env is None else env
    if env.get(API_ENV):
        return Connection(server=env[API_ENV], insecure=True)
    found = in_cluster(env, root=root)
    if found is None:
        raise NoCredentialsError(f"{no_service_account(env, root=root)} and {API_ENV} is not set")
    return found


def no_service_account(env: Mapping[str, str], *, root: pathlib.Path = SERVICE_ACCOUNT) -> str:
    """Why ``in_cluster`` found nothing, in a few words: outside a pod, or a pod without its
    token (client-go's in-cluster config names the token file it could not read)."""
    if not env.get("KUBERNETES_SERVICE_HOST") or not env.get("KUBERNETES_SERVICE_PORT"):
        return "not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset)"
    return (f"in a pod without a service-account token: no {root / 'token'} "
            "(automountServiceAccountToken: false?)")


def in_cluster(env: Mapping[str, str], *,
               root: pathlib.Path = SERVICE_ACCOUNT) -> Connection | None:
    """The pod's service account, as client-go reads it; None outside a pod."""
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    token = root / "token"
    if not host or not port or not token.exists():
        return None
    namespace_file = root / "namespace"
    namespace = (namespace_file.read_text().strip() or None) if namespace_file.exists() else None
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    ca = root / "ca.crt"
    return Connection(server=server, token_file=str(token),
                      ca_path=str(ca) if ca.exists() else None, namespace=namespace)


class Bearer:
    """The current ``Authorization`` value of a connection; a token file is re-read
    every ``TOKEN_FILE_PERIOD_S`` and at once after ``forget`` (a 401). A file that is
    gone or empty when read again leaves the token read before in use (client-go's
    caching token source: "Unable to rotate token"), until it can be read."""

    def __init__(self, connection: Connection, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._connection = connection
        self._clock = clock
        self._value: str | None = None
        self._read_at = float("-inf")

    def header(self) -> str | None:
        """``"Bearer <token>"``, or None without a token."""
        conn = self._connection
        if conn.token_file is None:
            return f"{conn.scheme} {conn.token}" if conn.token else None
        now = self._clock()
        if self._value is None or now - self._read_at >= TOKEN_FILE_PERIOD_S:
            try:
                token = pathlib.Path(conn.token_file).read_text().strip()
                problem = "it is empty"
            except OSError as exc:
                token, problem = "", str(exc)
            if token:
                self._value, self._read_at = f"{conn.scheme} {token}", now
            elif self._value is None and conn.token:  # a kubeconfig's token beside the file
                self._value, self._read_at = f"{conn.scheme} {conn.token}", now
            elif self._value is None:
                raise apierrors.Unreachable(
                    f"cannot read the token {conn.token_file}: {problem}", status=0)
            else:  # tried again a period later (one warning a period, not one a request)
                self._read_at = now
                logger.warning("unable to rotate the token %s (%s): keeping the one read "
                               "before", conn.token_file, problem)
        return self._value

    def forget(self) -> None:
        """The server rejected the token: read the file again on the next request."""
        self._value = None


def ssl_context(connection: Connection) -> ssl.SSLContext | None:
    """TLS for ``connection`` (its CA, its client certificate); None for plain HTTP."""
    if not connection.server.startswith("https"):
        return None
    if connection.insecure:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context = ssl.create_default_context(
            cafile=connection.ca_path,
            cadata=connection.ca_data.decode() if connection.ca_data else None)
    if connection.certificate_path and connection.private_key_path:
        context.load_cert_chain(connection.certificate_path, connection.private_key_path)
    return context


def proxy_for(url: str, env: Mapping[str, str] | None = None) -> str | None:
    """The proxy URL for ``url`` from ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY``, or None to
    connect directly: the one proxy rule of both clients' requests and watches.

    As Go's ``httpproxy`` (client-go): the lowercase spelling wins; a proxy without a
    scheme is ``http://``; ``localhost`` and loopback addresses are never proxied;
    ``NO_PROXY`` holds ``*``, host names (``.svc``, ``*.svc`` and ``svc`` all match
    subdomains), IP addresses, CIDR blocks (``10.96.0.0/12``), ``host:port`` and
    ``[IPv6]:port`` (a URL without a port has its scheme's: 443, 80).
    """
    env = os.environ if env is None else env
    parts = urllib.parse.urlsplit(url)
    proxy = _env(env, f"{parts.scheme}_proxy")
    port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    if not proxy or not parts.hostname or _bypassed(parts.hostname, port,
                                                    _env(env, "no_proxy") or ""):
        return None
    given = urllib.parse.urlsplit(proxy)
    # Go's httpproxy: a proxy without a scheme (``proxy.corp:3128``) is an http:// one.
    return proxy if given.scheme and given.netloc else "http://" + proxy


def proxy_of(conn: Connection, url: str, env: Mapping[str, str] | None = None) -> str | None:
    """The proxy for ``url`` on ``conn``: its kubeconfig's ``proxy-url``, else the
    environment's (``proxy_for``), as client-go (a ``proxy-url`` replaces the
    environment's proxies, ``NO_PROXY`` included)."""
    return conn.proxy_url or proxy_for(url, env)


def _env(env: Mapping[str, str], name: str) -> str | None:
    return env.get(name.lower()) or env.get(name.upper()) or None


_DEFAULT_PORTS = {"http": 80, "https": 443}
"""The port a URL without one is compared with ``NO_PROXY``'s ``host:port`` (Go's portMap)."""


def _bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    host = host.lower().strip("[]")
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = (
            ipaddress.ip_address(host))
    except ValueError:
        address = None
    if host == "localhost" or (address is not None and address.is_loopback):
        return True  # Go's httpproxy never proxies these, whatever NO_PROXY says
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        if "/" in entry and address is not None:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
            continue
        if entry.startswith("[") and "]:" in entry:  # [IPv6]:port
            name, entry_port = entry[1:].split("]:", 1)
        else:
            name, _, entry_port = (entry.rpartition(":") if entry.count(":") == 1
                                   else (entry, "", ""))
        if entry_port and (not entry_port.isdigit() or port != int(entry_port)):
            continue
        name = name.strip("[]").removeprefix("*").lstrip(".")  # *.corp, .corp, corp
        if host == name or host.endswith("." + name):
            return True
    return False
