"""The Connector CRD's bounds fit the protocol: one connector at its limits, all on one
member, fits one assignment (a ConfigMap) and one report (the Lease annotation)."""

import pytest
from tests.chart import conftest

from kooper.core import defaults, model
from kooper.protocol import codec, messages


@pytest.fixture(scope="module")
def bounds():
    (crd,) = conftest.load_yaml_docs(conftest.CRDS / "connectors.yaml")
    (version,) = crd["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    (rule,) = spec["config"]["x-kubernetes-validations"]
    total = int(rule["rule"].rpartition("<=")[2])
    return {"tasks_max": spec["tasksMax"]["maximum"], "config_chars": total}


def test_the_stated_bounds(bounds):
    assert bounds == {"tasks_max": 10_000, "config_chars": 65_536}
    assert bounds["tasks_max"] == defaults.TASKS_MAX_LIMIT  # kooper replay's and drill's too


def test_a_connector_at_its_bounds_fits_one_assignment(bounds):
    tasks = [f"orders-{n}" for n in range(bounds["tasks_max"])]
    # The costliest config the rule admits: characters outside the BMP, each written as
    # a 12-byte surrogate pair escape ("\ud83d\ude00").
    config = {"k": "\U0001f600" * (bounds["config_chars"] - 1)}
    assignment = messages.Assignment(
        group="connect",
        member="workers-0",
        generation=2**40,
        protocol=model.Protocol.COMPATIBLE,
        assigned=model.ConnectorsAndTasks.of(["orders"], tasks),
        leader="kooper-operator-7d9f4c6b5-x2x9q/1a2b3c4d",
        epochs={task: 10**12 for task in [*tasks, "orders"]},
        configs={"orders": config},
        incarnation="5c1e0a77",
    )
    size = len(codec.encode_assignment(assignment))
    assert size <= messages.MAX_ASSIGNMENT_BYTES
    print(f"{size} bytes of {messages.MAX_ASSIGNMENT_BYTES}")


def test_a_connector_at_its_bounds_fits_one_report_even_if_every_task_failed(bounds):
    tasks = [f"orders-{n}" for n in range(bounds["tasks_max"])]
    report = messages.Report(
        member="workers-0",
        incarnation="5c1e0a77",
        protocols=frozenset(model.Protocol),
        generation=2**40,
        owned=model.ConnectorsAndTasks.of(["orders"], tasks[::2]),
        failed={
            task: "x" * messages.MAX_ERROR_CHARS
            for task in tasks[1 : 2 * messages.MAX_FAILURE_REASONS : 2]
        },
        failure_counts={task: 1000 + n for n, task in enumerate(tasks[1::2])},
    )
    text = codec.encode_report(report)
    assert len(text) <= messages.MAX_REPORT_BYTES
    assert codec.decode_report(text) == report
