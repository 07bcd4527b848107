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

import numpy as np
import pytest

import bayesval as bv
from bayesval.deprecated import MOVED_MODULES, MOVED_NAMES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bayesval"
LONGEST_FUNCTION = 100  # lines, decorators and docstring included
LONGEST_FRONT_DOOR = 60
LONGEST_PARTY_CLASS = 199  # lines of a class on the path from parties to coalition posteriors, under 200


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


def test_no_class_of_the_party_path_reaches_two_hundred_lines():
    """The path from parties to coalition posteriors stays a planner, an executor and a cache (docs/architecture.md):
    none of its classes grows back into the one class that did every job."""
    path_modules = ("surprise", "plan", "execute", "importance", "reruns", "keys", "valuation", "replay")
    lengths = {
        f"{path.relative_to(ROOT)} {node.name}": node.end_lineno - node.lineno + 1
        for path in (PACKAGE / "parties" / f"{name}.py" for name in path_modules)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    }
    assert max(lengths.values()) <= LONGEST_PARTY_CLASS, max(lengths.items(), key=lambda item: item[1])


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


def test_importing_the_package_loads_jax_and_not_the_samplers():
    """`import bayesval` is JAX and the results layer (docs/architecture.md, "Importing on first use"): NumPyro, the
    party path and the privacy library load on first use, so a CLI command that fails on its arguments fails
    before them."""
    heavy = ("numpyro", "bayesval.parties", "bayesval.models", "dp_accounting")
    code = f"import sys, bayesval; print(sorted(m for m in {heavy} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"
    assert sorted(bv.__all__) == sorted([*bv._PUBLIC, "valuate"])  # every public name loads on first use


def test_a_result_reads_its_ledger_in_a_process_that_never_imported_privacy(tmp_path):
    """A saved result holds a privacy ledger (a record of `bayesval.privacy`, registered when that module loads):
    read back in a fresh process that imported only the results layer, the kind is still found."""
    ledger = bv.PrivacyLedger()
    result = bv.ValuationResult("exact", np.array([1.0, 2.0]), np.zeros(2), ["a", "b"], privacy=ledger)
    path = result.save(tmp_path / "result.npz")
    code = (
        "import sys; from bayesval.results import ValuationResult; assert 'bayesval.privacy' not in sys.modules; "
        f"r = ValuationResult.load({str(path)!r}); print(type(r.privacy).__name__)"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.strip() == "PrivacyLedger"


def architecture_layers() -> list[str]:
    """The layers of the code block under "The house" in docs/architecture.md, top down: each line's names before
    its description (a line that starts with spaces continues the description above)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("## The house", 1)[1].split("```\n", 2)[1]
    return [" ".join(line.split("  ", 1)[0].split()) for line in block.splitlines() if line and line[0] != " "]


def test_the_architecture_page_draws_the_layers_that_import_linter_keeps():
    """The page's layers are pyproject.toml's import-linter layers, in order (a layer added to one is added to both:
    `compilation` was missing from the page)."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [layers] = [c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers"]
    assert architecture_layers() == layers


def test_the_architecture_page_counts_the_model_contracts_required_members():
    """ "`valuate()` asks a model for N things": N is the number of `REQUIRED_MEMBERS`, each named in that paragraph."""
    from bayesval.models.protocol import REQUIRED_MEMBERS

    text = (ROOT / "docs" / "architecture.md").read_text()
    paragraph = text.split("### The model protocol", 1)[1].split("\n\n", 2)[1]
    numbers = {"three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
    count = re.search(r"asks a model for (\w+) things", paragraph).group(1)
    assert numbers[count] == len(REQUIRED_MEMBERS)
    assert all(f"`{name}" in paragraph for name in REQUIRED_MEMBERS)


def cited_sections() -> list[tuple[str, str, str]]:
    """(module, page, title) of every citation `docs/PAGE.md, "Title"` in the package's source, lines joined."""
    cited = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = re.sub(r"\s*\n\s*(#\s*)?", " ", path.read_text())
        for page, title in re.findall(r'docs/([\w/]+\.md), "([^"]+)"', text):
            cited.append((path.relative_to(ROOT).as_posix(), page, title))
    return cited


def section_titles(page: str) -> list[str]:
    """A docs page's headings and bold paragraph leads (`**Title.**`), without markup."""
    text = (ROOT / "docs" / page).read_text()
    headings = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
    return [title.replace("`", "") for title in headings + re.findall(r"\*\*(.+?)\*\*", text)]


def test_every_section_the_code_cites_exists():
    """A docstring that sends the reader to `docs/page.md, "Title"` finds a heading or a bold paragraph lead that
    begins with that title (a heading may go on: "Programs compiled ahead (issue 30)")."""
    cited = cited_sections()
    assert len(cited) > 50  # the pattern still finds the package's citations
    titles = {page: section_titles(page) for page in {page for _, page, _ in cited}}
    missing = [
        (module, page, title) for module, page, title in cited if not any(t.startswith(title) for t in titles[page])
    ]
    assert not missing, missing
