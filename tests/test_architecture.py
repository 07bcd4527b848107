"""The package's shape (docs/architecture.md): its layers and the import contracts that keep them, the length of
its functions, the module map of the docs, and the old import paths kept for one release."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import bayesval as bv
from bayesval.deprecated import MOVED_MODULES, MOVED_NAMES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bayesval"
LONGEST_FUNCTION = 100  # lines, decorators and docstring included
LONGEST_FRONT_DOOR = 60


def test_import_contracts_hold():
    """import-linter checks the contracts in pyproject.toml: the layers, a game layer that knows nothing of parties,
    privacy, Bayes or models, results as a leaf, and no cycles in any package (imports inside functions count)."""
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout and "4 kept" in run.stdout, run.stdout[-2000:]


def package_functions():
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                yield f"{path.relative_to(ROOT)}:{node.lineno} {node.name}", node.end_lineno - first + 1


def test_no_function_is_longer_than_a_hundred_lines():
    long = {where: lines for where, lines in package_functions() if lines > LONGEST_FUNCTION}
    assert not long, long


def test_the_front_door_is_short():
    lengths = {where.rsplit(" ", 1)[1]: lines for where, lines in package_functions() if "bayesval/valuate.py" in where}
    assert lengths["valuate"] <= LONGEST_FRONT_DOOR, lengths["valuate"]


def documented_modules() -> set[str]:
    """The module paths of the table "Modules, one line each" in docs/architecture.md, one row each."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("### Modules, one line each", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `(bayesval/[\w/]+\.py)` \|", table, flags=re.M)
    assert len(rows) == len(set(rows)), "a module has two rows"
    return set(rows)


def test_every_module_has_one_line_in_the_architecture_page():
    modules = {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    documented = documented_modules()
    assert not modules - documented, f"modules missing from docs/architecture.md: {sorted(modules - documented)}"
    assert not documented - modules, f"docs/architecture.md names modules that do not exist: {documented - modules}"


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_an_old_module_path_warns_and_gives_the_module_at_its_new_home(old):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=re.escape(MOVED_MODULES[old])):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED_MODULES[old])
    assert module.__spec__.name == MOVED_MODULES[old]  # the module keeps its own spec


MOVED_OUT = [(package, name) for package, home in MOVED_NAMES.items() for name in importlib.import_module(home).__all__]


@pytest.mark.parametrize("package, name", MOVED_OUT)
def test_a_name_that_moved_out_of_a_package_warns_and_is_the_same_object(package, name):
    with pytest.warns(DeprecationWarning, match=f"{MOVED_NAMES[package]}.{name}"):
        old = getattr(importlib.import_module(package), name)
    assert old is getattr(importlib.import_module(MOVED_NAMES[package]), name)


def test_the_names_that_moved_to_experiments_are_the_twelve_estimators_exported():
    assert len(MOVED_OUT) == 12 and ("bayesval.estimators", "flip_labels") in MOVED_OUT


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'KNNShapely'"):
        bv.estimators.KNNShapely  # noqa: B018


def test_public_names_need_no_old_path():
    """The public API imports without a deprecation warning."""
    code = (
        "import warnings; warnings.simplefilter('error'); import bayesval as bv; bv.rewards.Tempering; bv.experiments"
    )
    run = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in bv.__all__:
            getattr(bv, name)


def test_importing_the_package_leaves_scikit_learn_for_the_functions_that_use_it():
    """scikit-learn is 0.7 s of start-up that no valuation needs: the AUROC, the Watson datasets and Layered's
    retraining utilities import it when called, so `import bayesval` (every CLI command) does not."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, bayesval; print('sklearn' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.strip() == "False"
