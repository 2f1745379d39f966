"""kopf glue: indexes, event handlers, startup/cleanup, login and probes. Decisions live elsewhere.

Indexes hold small views (``views.py``); kopf fills them all from the initial
listings before it runs any other handler, so the first round after a start (or
restart) already sees every ConfigMap and Lease: nothing is planned from a
half-listed cluster. Event handlers only tell the ``Shell`` what they saw; the
per-group runners do the work.

``register(registry)`` puts the handlers on a registry of the caller's choosing,
so tests can run several operators (one after the other) in one process.
"""

from __future__ import annotations

from typing import Any

import kopf

from kooper.control import views
from kooper.shell import controller, credentials, metrics, settings
from kooper.shell.login import Login

_serving_metrics: set[int] = set()


def _shell(memo: Any) -> controller.Shell:
    shell = memo.get("shell") if hasattr(memo, "get") else getattr(memo, "shell", None)
    if not isinstance(shell, controller.Shell):
        raise kopf.PermanentError("the operator was started without a kooper Shell in its memo")
    return shell


def register(registry: kopf.OperatorRegistry, *, login: bool = True) -> None:
    """Add every kooper handler to ``registry`` (``login=False`` when the caller logs in)."""

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, memo: Any, **kwargs: Any) -> None:
        shell = _shell(memo)
        settings_module_tune(settings, shell.config)
        indices = {name: kwargs[name] for name in (
            "kooper_groups", "kooper_pods", "kooper_leases", "kooper_connectors",
            "kooper_configmaps")}
        shell.start(indices)
        port = shell.config.metrics_port
        if port and port not in _serving_metrics:
            metrics.serve(port)
            _serving_metrics.add(port)

    @kopf.on.cleanup(registry=registry)
    async def cleanup(memo: Any, **_: Any) -> None:
        await _shell(memo).stop()

    if login:
        @kopf.on.login(registry=registry, errors=kopf.ErrorsMode.TEMPORARY)
        def login_handler(memo: Any, **_: Any) -> kopf.ConnectionInfo:
            # kopf asks once at start, then again only once its vault has no valid
            # credentials left (a 401): the first answer is the login kooper made already,
            # the later ones log in again. Handing kopf back the token it just saw
            # rejected would make it give up and stop the operator; waiting and asking
            # again (TemporaryError) keeps the watches paused until the source has a
            # new one (the kubelet rotated the file, the exec plugin answers again).
            shell = _shell(memo)
            login = shell.ensure_login()
            if shell.kopf_token is not None:
                login.relogin()
            conn, header = login.current()
            if shell.kopf_token is not None and header == shell.kopf_token:
                raise kopf.TemporaryError("the API server rejected the token and the "
                                          "credentials have no newer one yet", delay=5)
            shell.kopf_token = header or ""
            info: kopf.ConnectionInfo = credentials.connection_info(conn, header)
            return info

    # --- indexes (filled before any other handler runs) ------------------------------

    @kopf.index(views.GROUP, views.VERSION, "workergroups", registry=registry,
                id="kooper_groups")
    def kooper_groups(body: kopf.Body, **_: Any) -> dict[Any, Any]:
        view = views.parse_group(body)
        return {(view.namespace, view.name): view}

    @kopf.index(views.GROUP, views.VERSION, "connectors", registry=registry,
                id="kooper_connectors")
    def kooper_connectors(body: kopf.Body, **_: Any) -> dict[Any, Any]:
        view = views.parse_connector(body)
        return {(view.namespace, view.group): view}

    @kopf.index("v1", "pods", registry=registry, id="kooper_pods")
    def kooper_pods(body: kopf.Body, **_: Any) -> dict[Any, Any]:
        view = views.parse_pod(body)
        return {view.namespace: view}

    @kopf.index("coordination.k8s.io", "v1", "leases", registry=registry, id="kooper_leases",
                labels={views.MEMBER_LABEL: kopf.PRESENT})
    def kooper_leases(body: kopf.Body, **_: Any) -> dict[Any, Any]:
        view = views.parse_lease(body)
        return {view.namespace: view}

    @kopf.index("v1", "configmaps", registry=registry, id="kooper_configmaps",
                labels={views.GROUP_LABEL: kopf.PRESENT})
    def kooper_configmaps(body: kopf.Body, **_: Any) -> dict[Any, Any]:
        view = views.parse_configmap(body)
        return {(view.namespace, view.group): view}

    # --- events: tell the shell, which pokes the right runners ------------------------

    @kopf.on.event(views.GROUP, views.VERSION, "workergroups", registry=registry)
    async def on_group(body: kopf.Body, type: str | None, memo: Any, **_: Any) -> None:
        meta = body.get("metadata", {})
        _shell(memo).group_seen(meta.get("namespace", ""), meta.get("name", ""),
                                deleted=type == "DELETED", uid=str(meta.get("uid", "")),
                                generation=int(meta.get("generation") or 0),
                                resource_version=str(meta.get("resourceVersion", "")),
                                status=dict(body.get("status") or {}))

    @kopf.on.event(views.GROUP, views.VERSION, "connectors", registry=registry)
    async def on_connector(body: kopf.Body, type: str | None, memo: Any,
                           **_: Any) -> None:
        await _shell(memo).connector_seen(views.parse_connector(body), deleted=type == "DELETED")

    @kopf.on.event("v1", "pods", registry=registry)
    async def on_pod(body: kopf.Body, type: str | None, memo: Any, **_: Any) -> None:
        _shell(memo).pod_seen(views.parse_pod(body), deleted=type == "DELETED")

    @kopf.on.event("coordination.k8s.io", "v1", "leases", registry=registry,
                   labels={views.MEMBER_LABEL: kopf.PRESENT})
    async def on_lease(body: kopf.Body, type: str | None, memo: Any, **_: Any) -> None:
        _shell(memo).lease_seen(views.parse_lease(body), deleted=type == "DELETED")

    @kopf.on.event("v1", "configmaps", registry=registry,
                   labels={views.GROUP_LABEL: kopf.PRESENT})
    async def on_configmap(body: kopf.Body, type: str | None, memo: Any,
                     **_: Any) -> None:
        _shell(memo).configmap_seen(views.parse_configmap(body), deleted=type == "DELETED")


def settings_module_tune(kopf_settings: kopf.OperatorSettings, config: settings.Config) -> None:
    """Apply ``settings.tune`` (kept here so ``settings.py`` needs no kopf import)."""
    settings.tune(kopf_settings, config)


def make_memo(config: settings.Config, login: Login | None = None) -> kopf.Memo:
    """The memo to start kopf with: it carries the ``Shell`` (and the login, if made)."""
    memo = kopf.Memo()
    memo["shell"] = controller.Shell(config, login)
    return memo
