"""A member's ConfigMap edited by hand into a newer document (~10 s): the worker takes
it (its generation is newer than the one it holds), and the operator must win it back.

The operator rewrote the member's document at the generation its state held for the
member, older than the edited one, so the worker ignored the rewrite and ran what the
edit said: here nothing, its work stopped for good (nothing else moved it)."""

import dataclasses

from tests.demo import formed

from kooper.core import model
from kooper.demo import drill, recorder
from kooper.protocol import codec, messages
from kooper.sim import metrics

SETTINGS = drill.Settings(pods=2, connectors=(("orders-source", 3),), max_delay_s=0,
                          lease_s=6, start_ms=100, stop_ms=200)


def test_a_configmap_edited_into_a_newer_document_is_won_back(tmp_path):
    with formed.group(tmp_path, SETTINGS, run="edit") as (embedded, runner):
        api, ns = embedded.api, embedded.namespace
        pod = sorted(runner.pods)[0]
        name = f"kooper-{pod}"
        body = api.get("configmaps", name, namespace=ns)
        ours = codec.decode_assignment(body["data"][messages.CONFIGMAP_KEY])
        assert ours.assigned != model.EMPTY
        edited = dataclasses.replace(ours, generation=ours.generation + 1,
                                     assigned=model.EMPTY, revoked=ours.assigned)
        body["data"] = {messages.CONFIGMAP_KEY: codec.encode_assignment(edited)}
        api.replace("configmaps", name, body, namespace=ns)
        drill.wait_converged(runner, embedded, expected=SETTINGS.resources, settle_s=1.0,
                             timeout_s=30)
        now = codec.decode_assignment(
            api.get("configmaps", name, namespace=ns)["data"][messages.CONFIGMAP_KEY])
        assert now.generation > edited.generation
    rows = recorder.collect(worker_files=runner.events_files(), audit_file=None,
                            run="edit", group="demo", protocol="compatible", policy="kooper")
    assert metrics.run_metrics(rows).overlaps == 0
