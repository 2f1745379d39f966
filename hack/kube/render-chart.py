"""Render charts/kooper with the test extra's Helm (no helm CLI needed), CRDs first.

    .venv/bin/python hack/kube/render-chart.py --crds | kubectl apply --server-side -f -
    .venv/bin/python hack/kube/render-chart.py NS | kubectl apply --server-side -n NS -f -

The same rendering the realk8s tests and drills apply (e2e.localcluster.render_chart):
release "kooper", images kooper:0.1.0 / kooper-worker:0.1.0, the operator watching
NAMESPACE (default: kooper) only.
"""

from __future__ import annotations

import pathlib
import sys

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from e2e.localcluster import render_chart

args = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
namespace = args[0] if args else "kooper"
docs = render_chart({"image": {"repository": "kooper", "tag": "0.1.0"},
                     "operator": {"watchNamespace": namespace}},
                    release="kooper", namespace=namespace)
if "--crds" in sys.argv:
    docs = [doc for doc in docs if doc["kind"] == "CustomResourceDefinition"]
print(yaml.safe_dump_all(docs), end="")
