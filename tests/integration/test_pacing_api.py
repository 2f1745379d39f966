"""``spec.balancing.maxMovesPerRound`` as the real kube-apiserver admits it."""

from __future__ import annotations

import pytest
import yaml
from tests.integration.conftest import get_json, refused

pytestmark = [pytest.mark.realk8s, pytest.mark.usefixtures("crds")]


def group(**balancing):
    return yaml.safe_dump({"apiVersion": "kooper.dev/v1alpha1", "kind": "WorkerGroup",
                           "metadata": {"name": "paced"},
                           "spec": {"selector": {"matchLabels": {"app": "w"}},
                                    "balancing": balancing}})


def test_a_percentage_and_a_count_are_admitted_and_unset_stays_unset(k, namespace):
    # No stored default: the operator reads an unset limit as its policy's (25% under
    # kooper, none under kip415, which does not pace, as Kafka Connect does not).
    k.kubectl("apply", "-n", namespace, "-f", "-", input_text=group())
    spec = get_json(k, "-n", namespace, "workergroup", "paced")["spec"]
    assert spec["balancing"] == {}
    for value in (7, "100%"):
        k.kubectl("apply", "-n", namespace, "-f", "-", input_text=group(maxMovesPerRound=value))
        spec = get_json(k, "-n", namespace, "workergroup", "paced")["spec"]
        assert spec["balancing"] == {"maxMovesPerRound": value}


@pytest.mark.parametrize("value", [0, "0%", "101%", "ten"])
def test_a_cap_that_could_stop_balancing_or_is_not_a_cap_is_refused(k, namespace, value):
    err = refused(k, "apply", "-n", namespace, "-f", "-",
                  input_text=group(maxMovesPerRound=value))
    assert "spec.balancing.maxMovesPerRound" in err
