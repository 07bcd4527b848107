"""The docs site builds with `mkdocs build --strict` (a broken reference fails it), every public name has a
rendered, non-empty docstring in its API reference, and every example notebook is a tutorial page showing the
figures it was executed with."""

import html
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

import bayesval as bv

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "examples" / "notebooks"
PAGES = {"valuate": "valuate", "ValuationResult": "valuate", "SamplerConfig": "config"}  # the rest: privacy
PAGES |= {"plot_privacy_tradeoff": "rewards", "NoiseAwareData": "models"}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(out)},
    )
    assert build.returncode == 0, build.stderr[-3000:]
    return out


def public_names() -> list[tuple[str, str]]:
    """(API page, rendered identifier) of every public name."""
    names = []
    for name in bv.__all__:
        if name in ("games", "models", "estimators", "rewards"):
            continue
        names.append((PAGES.get(name, "privacy"), f"bayesval.{name}"))
    names += [("games", f"bayesval.games.{name}") for name in bv.games.__all__]
    names += [("estimators", f"bayesval.estimators.{name}") for name in bv.estimators.__all__]
    names += [("rewards", f"bayesval.rewards.{name}") for name in bv.rewards.__all__]
    for name in bv.models.__all__:  # rendered from the models/ folder they are installed from
        names.append(("models", f"{getattr(bv.models, name).__module__.replace('bayesval.', '')}.{name}"))
    return names


def test_site_builds_strictly_with_every_page(site):
    for page in ("index.html", "concepts/index.html", "api/valuate/index.html", "games/index.html"):
        assert (site / page).is_file(), page


@pytest.mark.parametrize("page, identifier", public_names(), ids=lambda value: value.split(".")[-1])
def test_every_public_name_has_a_rendered_docstring(site, page, identifier):
    html = (site / "api" / page / "index.html").read_text()
    anchor = f'id="{identifier}"'
    assert anchor in html, f"{identifier} is not rendered on api/{page}"
    section = html[html.index(anchor) :].split('class="doc doc-heading"')[1]  # from its heading to the next one
    assert "<p>" in section, f"{identifier} is rendered without a docstring on api/{page}"


def test_argument_lines_render_as_lists(site):
    """docs/argument_lists.py: a docstring's "key: ..." lines are list items, not one run-on paragraph."""
    html = (site / "api" / "valuate" / "index.html").read_text()
    for name in ("model", "key", "kl", "exact_up_to", "rho"):
        assert f"<li><code>{name}</code>:" in html, name


def tutorial_pages(nav) -> list[str]:
    """Every page path in mkdocs.yml's nav."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in tutorial_pages(value)]
    return [page for item in nav for page in tutorial_pages(item)]


@pytest.mark.parametrize("name", sorted(path.stem for path in NOTEBOOKS.glob("*.ipynb")))
def test_every_notebook_is_a_tutorial_page_with_its_figures(site, name):
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    assert f"tutorials/{name}.ipynb" in tutorial_pages(nav), f"{name} is not under Tutorials in mkdocs.yml's nav"
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    figures = sum("image/png" in o.get("data", {}) for c in notebook.cells if c.cell_type == "code" for o in c.outputs)
    assert figures, f"{name} is stored without its figures: python examples/notebooks/build.py --execute {name}.ipynb"
    page = (site / "tutorials" / name / "index.html").read_text()
    title = notebook.cells[0].source.splitlines()[0].removeprefix("# ")
    assert html.escape(title, quote=False) in page, f"{name}'s title is not on its page"
    assert page.count("<img") >= figures, f"{name}'s page shows fewer than its {figures} figures"
