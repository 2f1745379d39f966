import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_operator_folder_is_a_source_root_not_a_package_that_shadows_the_stdlib():
    assert not (ROOT / "operator" / "__init__.py").exists()


def test_ci_runs_exactly_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme
    assert "make test" in readme


DECISIONS = [ROOT / "operator" / "kooper" / part for part in ("control", "core")]
"""The decision code a newcomer reads (issue 23): small modules, short functions."""
MODULE_LINES = 400
FUNCTION_LINES = 60


def _decision_modules() -> list[Path]:
    return sorted(path for folder in DECISIONS for path in folder.rglob("*.py"))


def test_no_decision_module_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in _decision_modules()
            if (n := len(p.read_text().splitlines())) > MODULE_LINES}
    assert not long, f"split these (at most {MODULE_LINES} lines each): {long}"


def test_no_decision_function_is_over_60_lines():
    long = {}
    for path in _decision_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = length
    assert not long, f"shorten these (at most {FUNCTION_LINES} lines each): {long}"
