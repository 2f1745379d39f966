"""Every spec default is written once (``core.defaults``); the CRDs agree with it."""

from pathlib import Path

import pytest
import yaml

from kooper.control import views
from kooper.core import defaults, durations, model

ROOT = Path(__file__).resolve().parents[2]
COPIES = [ROOT / "crds", ROOT / "charts" / "kooper" / "files" / "crds"]
"""The CRDs, and the chart's copy that ``charts/kooper/templates/crds.yaml`` renders."""

WORKERGROUP = {
    "protocol": defaults.PROTOCOL,
    "policy": defaults.POLICY,
    "scheduledRebalanceMaxDelay": defaults.SCHEDULED_REBALANCE_MAX_DELAY,
    "leaseDurationSeconds": defaults.LEASE_DURATION_S,
    "clockSkewSeconds": defaults.CLOCK_SKEW_S,
}
CONNECTOR = {"tasksMax": defaults.TASKS_MAX, "state": defaults.CONNECTOR_STATE}


def spec_defaults(path: Path) -> dict[str, object]:
    crd = yaml.safe_load(path.read_text())
    (version,) = crd["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    return {name: field["default"] for name, field in spec.items() if "default" in field}


@pytest.mark.parametrize("folder", COPIES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_crd_defaults_are_the_code_defaults(folder: Path):
    assert spec_defaults(folder / "workergroups.yaml") == WORKERGROUP
    assert spec_defaults(folder / "connectors.yaml") == CONNECTOR


def test_the_operator_reads_an_empty_spec_with_the_same_defaults():
    group = views.parse_group({"metadata": {"name": "g"}, "spec": {}})
    assert group.settings == model.Settings(model.Protocol(defaults.PROTOCOL),
                                            model.Policy(defaults.POLICY),
                                            defaults.SCHEDULED_REBALANCE_MAX_DELAY_MS)
    assert durations.parse_ms(defaults.SCHEDULED_REBALANCE_MAX_DELAY) == \
        defaults.SCHEDULED_REBALANCE_MAX_DELAY_MS
    assert (group.lease_duration_s, group.clock_skew_s) == (defaults.LEASE_DURATION_S,
                                                            defaults.CLOCK_SKEW_S)
    connector = views.parse_connector({"metadata": {"name": "c"}, "spec": {}})
    assert (connector.tasks_max, connector.state) == (defaults.TASKS_MAX, "running")
    assert views.CONNECTOR_STATES[defaults.CONNECTOR_STATE] == "running"
    assert model.Settings().max_delay_ms == defaults.SCHEDULED_REBALANCE_MAX_DELAY_MS
