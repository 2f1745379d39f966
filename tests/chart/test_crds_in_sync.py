"""The chart's CRDs are copies of crds/ (Helm's .Files cannot reach outside the chart)."""

from __future__ import annotations

from tests.chart import conftest

FIX = "cp crds/*.yaml charts/kooper/files/crds/"


def test_chart_copy_of_every_crd_is_byte_identical_to_the_source():
    sources = sorted(p.name for p in conftest.CRDS.glob("*.yaml"))
    copies = sorted(p.name for p in (conftest.CHART / "files" / "crds").glob("*.yaml"))
    assert sources == copies, f"the chart's CRD files differ from crds/: run `{FIX}`"
    for name in sources:
        source = (conftest.CRDS / name).read_bytes()
        copy = (conftest.CHART / "files" / "crds" / name).read_bytes()
        assert source == copy, (
            f"charts/kooper/files/crds/{name} drifted from crds/{name}: run `{FIX}`"
        )


def test_rendered_crds_carry_exactly_the_source_spec(render, crds):
    rendered = {
        o["spec"]["names"]["kind"]: o
        for o in conftest.find(render(), "CustomResourceDefinition")
        if o["spec"]["group"] == "kooper.dev"
    }
    assert set(rendered) == set(crds) == {"WorkerGroup", "Connector"}
    for kind, crd in crds.items():
        assert rendered[kind]["metadata"]["name"] == crd["metadata"]["name"]
        assert rendered[kind]["spec"] == crd["spec"], f"{kind}: the template changed the spec"
