"""A small group formed on the embedded cluster: the real operator, real worker processes."""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Iterator

from kooper.demo import cluster, drill, pods


@contextlib.contextmanager
def group(tmp_path: pathlib.Path, settings: drill.Settings, *, run: str,
          operator_command: tuple[str, ...] | None = None,
          ) -> Iterator[tuple[cluster.EmbeddedCluster, pods.PodRunner]]:
    """The cluster and its pods once every resource runs once and the pods are balanced;
    the workers are shut down on exit."""
    with cluster.EmbeddedCluster(workdir=tmp_path, operator_command=operator_command) as embedded:
        runner = pods.PodRunner(embedded.api, workdir=tmp_path, replicas=settings.pods,
                                worker_args=drill.worker_args(settings, run=run))
        try:
            drill.create_objects(embedded, settings, protocol="compatible", policy="kooper",
                                 app_label=runner.app_label)
            runner.start_all()
            drill.wait_converged(runner, embedded, expected=settings.resources, settle_s=0.5,
                                 timeout_s=60, balanced=True)
            yield embedded, runner
        finally:
            runner.shutdown()
