from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_operator_folder_is_a_source_root_not_a_package_that_shadows_the_stdlib():
    assert not (ROOT / "operator" / "__init__.py").exists()


def test_ci_runs_exactly_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme
    assert "make test" in readme
