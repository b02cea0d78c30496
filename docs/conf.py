"""Sphinx configuration of the causalkit API reference (built offline: ``make docs``)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VIGNETTES = ROOT / "vignettes"
sys.path.insert(0, str(ROOT))

import causalkit  # noqa: E402

project = "causalkit"
author = "The causalkit developers"
copyright = "2026, The causalkit developers"
release = version = causalkit.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",   # MathJax 3 copied into _static: math renders without a network
    "numpydoc",
]
templates_path = ["_templates"]
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = f"causalkit {release}"
html_static_path: list[str] = []

autosummary_generate = True
autosummary_ignore_module_all = False      # a package's public API is its __all__
autodoc_typehints = "none"                  # the numpydoc Parameters sections give the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# Nitpicky cross-references (``-n``): objects of other libraries have no inventory offline, and
# private modules and classes have no pages by design.
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|scipy|pandas|sklearn|matplotlib|torch|joblib|dask|faiss|simpy)(\..*)?"),
    (r"py:.*", r"causalkit(\.\w+)*\._\w+(\..*)?"),
]
# Standard-library bases shown by ``:show-inheritance:`` (``NicPath(abc.ABC)``).
nitpick_ignore = [("py:class", "abc.ABC")]

# Where each statistical area's estimators are worked through and studied.
AREAS = {
    "causalkit.borrowing": ("borrowing", "simulations/borrowing_*.py"),
    "causalkit.longterm": ("longterm", "simulations/longterm_*.py"),
    "causalkit.policy": ("policy", "simulations/policy_*.py"),
}
autosummary_context = {"areas": AREAS}


def _vignette_title(source: Path) -> str:
    match = re.search(r"^# # (.+)$", source.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return match.group(1).strip() if match else source.stem


def _vignette_list(app, docname, content):
    """Append a link to every rendered vignette to the ``vignettes`` page."""
    if docname != "vignettes":
        return
    items = [f"* `{_vignette_title(src)} <vignettes/{src.stem}.html>`__ "
             f"(source: ``vignettes/{src.name}``)"
             for src in sorted(VIGNETTES.glob("*.py")) if src.name != "render.py"
             and (VIGNETTES / "html" / f"{src.stem}.html").exists()]
    content[0] += "\n" + "\n".join(items) + "\n"


def _copy_vignettes(app, exc):
    if exc is None and app.builder.format == "html":
        target = Path(app.outdir) / "vignettes"
        target.mkdir(parents=True, exist_ok=True)
        for page in (VIGNETTES / "html").glob("*.html"):
            shutil.copy2(page, target / page.name)


def _skip_sklearn_plumbing(app, what, name, obj, skip, options):
    """Leave out the metadata-routing setters scikit-learn adds to every estimator class."""
    return True if _ROUTING.fullmatch(name) else None


_ROUTING = re.compile(r"set_\w+_request|get_metadata_routing")


def setup(app):
    app.connect("autodoc-skip-member", _skip_sklearn_plumbing)
    app.connect("source-read", _vignette_list)
    app.connect("build-finished", _copy_vignettes)
