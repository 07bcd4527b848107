"""Every example notebook runs top to bottom at the tiny budget (BAYESVAL_BUDGET=tiny), shows at least one plot,
imports only the public API, and is what examples/notebooks/build.py writes."""

import os
import runpy
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from public_api import internal_imports

from bayesval.datasets.paths import data_file

NOTEBOOKS = Path(__file__).resolve().parents[1] / "examples" / "notebooks"
NEEDS = {"sim2023_diab.ipynb": "pima_indians_diabetes.csv", "knn_detection.ipynb": "openml/2dplanes.npz"}
NEEDS |= {"sim2023_rewards.ipynb": "pima_indians_diabetes.csv"}

NEEDS["layered_shapley.ipynb"] = "adult.csv.gz"  # and Pima


def notebooks() -> list[str]:
    return sorted(path.name for path in NOTEBOOKS.glob("*.ipynb"))


def test_the_notebooks_are_what_build_writes():
    built = runpy.run_path(str(NOTEBOOKS / "build.py"))["NOTEBOOKS"]
    assert sorted(built) == notebooks()
    for name, cells in built.items():
        on_disk = nbformat.read(NOTEBOOKS / name, as_version=4).cells
        assert [c.source for c in on_disk] == [c.source for c in cells], f"{name}: run examples/notebooks/build.py"


@pytest.mark.parametrize("name", notebooks())
def test_notebook_runs_at_the_tiny_budget_and_shows_a_plot(name, monkeypatch):
    if name in NEEDS:
        try:
            data_file(NEEDS[name])
        except FileNotFoundError as missing:
            pytest.skip(f"{name} needs {NEEDS[name]}: {missing}")
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert not internal_imports(cell.source), f"{name} imports internals: {internal_imports(cell.source)}"
    monkeypatch.setenv("BAYESVAL_BUDGET", "tiny")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", os.path.join(tempfile.gettempdir(), "bayesval-tests-jax-cache"))
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": tempfile.gettempdir()}}
    ).execute()
    images = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert images, f"{name} shows no plot"
