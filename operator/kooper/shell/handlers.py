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
from kooper.core import errors
from kooper.shell import controller, credentials, kube, metrics, settings

_serving_metrics: set[int] = set()


def _shell(memo: Any) -> controller.Shell:
    shell = memo.get("shell") if hasattr(memo, "get") else getattr(memo, "shell", None)
    if not isinstance(shell, controller.Shell):
        raise kopf.PermanentError("the operator was started without a kooper Shell in its memo")
    return shell


def connection_for(config: settings.Config, kopf_settings: Any) -> kube.Connection:
    """API connection details: ``KOOPER_KUBE_API``, else in-cluster, else kubeconfig."""
    if config.kube_api:
        return kube.Connection(server=config.kube_api, insecure=True)
    info = credentials.connection_info(kopf_settings, kubeconfig=config.kubeconfig,
                                       context=config.context)
    if info is None:
        raise errors.KooperError("no Kubernetes credentials: no in-cluster service account, "
                                 "no kubeconfig, and KOOPER_KUBE_API is not set")
    return credentials.connection(info)


def register(registry: kopf.OperatorRegistry, *, login: bool = True) -> None:
    """Add every kooper handler to ``registry`` (``login=False`` when the caller logs in)."""

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, memo: Any, **kwargs: Any) -> None:
        shell = _shell(memo)
        settings_module_tune(settings, shell.config)
        indices = {name: kwargs[name] for name in (
            "kooper_groups", "kooper_pods", "kooper_leases", "kooper_connectors",
            "kooper_configmaps")}
        shell.start(connection_for(shell.config, settings), indices)
        port = shell.config.metrics_port
        if port and port not in _serving_metrics:
            metrics.serve(port)
            _serving_metrics.add(port)

    @kopf.on.cleanup(registry=registry)
    async def cleanup(memo: Any, **_: Any) -> None:
        await _shell(memo).stop()

    if login:
        @kopf.on.login(registry=registry)
        def login_handler(memo: Any, settings: kopf.OperatorSettings, **_: Any
                          ) -> kopf.ConnectionInfo | None:
            config = _shell(memo).config
            if config.kube_api:
                return kopf.ConnectionInfo(server=config.kube_api, insecure=True)
            return credentials.connection_info(settings, kubeconfig=config.kubeconfig,
                                         context=config.context)


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
                                generation=int(meta.get("generation") or 0))

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


def make_memo(config: settings.Config) -> kopf.Memo:
    """The memo to start kopf with: it carries the ``Shell``."""
    memo = kopf.Memo()
    memo["shell"] = controller.Shell(config)
    return memo
