"""Execute the vignettes and render them to self-contained HTML (offline).

Each vignette is a jupytext percent-format Python file (``# %%`` code cells, ``# %% [markdown]``
narrative cells). It is converted to a notebook, executed with nbclient in a fresh kernel whose
matplotlib backend is the inline one (every figure the vignette makes lands in the page), and
exported by nbconvert with its figures embedded.

Every page carries a stamp, ``<meta name="causalkit-vignette" content="{...}">``, with the SHA-256
of the vignette source, the causalkit version, whether it ran at reduced size and how many
matplotlib figures the run created; ``tests/test_vignettes.py`` checks the committed pages against
it (figures shown, source and version current).

    python vignettes/render.py                 # all vignettes -> vignettes/html/
    python vignettes/render.py borrowing.py    # one
    CAUSALKIT_QUICK=1 python vignettes/render.py --out /tmp/v   # reduced sizes (as the tests do)
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAMP_NAME = "causalkit-vignette"
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"

# Run in the kernel before the vignette's first cell and after its last; both cells are removed
# from the page. Every matplotlib Figure (pyplot-managed or not) passes through Figure.__init__.
_COUNT_FIGURES = """\
import matplotlib.figure as _causalkit_mfig
_causalkit_figure_count = [0]
_causalkit_figure_init = _causalkit_mfig.Figure.__init__
def _causalkit_counting_init(self, *args, **kwargs):
    _causalkit_figure_init(self, *args, **kwargs)
    _causalkit_figure_count[0] += 1
_causalkit_mfig.Figure.__init__ = _causalkit_counting_init
"""
_REPORT_FIGURES = "print(_causalkit_figure_count[0])"

_STAMP_RE = re.compile(rf'<meta name="{STAMP_NAME}" content="([^"]*)"\s*/?>')
_IMG_RE = re.compile(r'<img\b[^>]*?\bsrc="data:image/(?:png|jpeg|svg\+xml);base64,([^"]+)"')


def vignette_paths() -> list[Path]:
    """All vignette sources, in name order."""
    return sorted(p for p in HERE.glob("*.py") if p.name != "render.py")


def source_hash(source: Path) -> str:
    """SHA-256 (hex) of the vignette source file's bytes."""
    return hashlib.sha256(Path(source).read_bytes()).hexdigest()


def read_stamp(page: str) -> dict | None:
    """The stamp dictionary of a rendered page, or None when it has none."""
    match = _STAMP_RE.search(page)
    return None if match is None else json.loads(html.unescape(match.group(1)))


def embedded_images(page: str) -> list[str]:
    """The base64 payloads of the ``<img>`` elements embedded in a rendered page, in order."""
    return _IMG_RE.findall(page)


def _package_version() -> str:
    import causalkit

    return causalkit.__version__


def _execute(notebook, timeout: int) -> int:
    """Execute ``notebook`` in place with the inline backend; return the figures it created."""
    import nbformat
    from nbclient import NotebookClient

    cells = notebook.cells
    cells.insert(0, nbformat.v4.new_code_cell(_COUNT_FIGURES))
    cells.append(nbformat.v4.new_code_cell(_REPORT_FIGURES))
    env = dict(os.environ, MPLBACKEND=INLINE_BACKEND)
    try:
        NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(HERE)}}).execute(env=env)
    finally:
        report = cells.pop()
        cells.pop(0)
    for cell in cells:
        if cell.cell_type == "code" and cell.get("execution_count"):
            cell.execution_count -= 1
            for output in cell.outputs:
                if output.get("execution_count"):
                    output.execution_count -= 1
    return int("".join(o.get("text", "") for o in report.outputs).strip())


def render(source: Path, out_dir: Path, *, timeout: int = 900) -> Path:
    """Execute ``source`` and write ``out_dir/<name>.html``; return the HTML path."""
    import jupytext
    import nbformat
    from nbconvert import HTMLExporter

    source = Path(source)
    notebook = jupytext.read(source)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    figures = _execute(notebook, timeout)
    nbformat.validate(notebook)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(notebook)
    if "<head>" not in body:
        raise RuntimeError("the HTML exporter's page has no <head> to carry the render stamp")
    stamp = {"source": source.name, "source_sha256": source_hash(source),
             "causalkit_version": _package_version(),
             "quick": os.environ.get("CAUSALKIT_QUICK") == "1", "figures": figures}
    meta = f'<meta name="{STAMP_NAME}" content="{html.escape(json.dumps(stamp, sort_keys=True))}">'
    body = body.replace("<head>", f"<head>\n{meta}", 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{source.stem}.html"
    target.write_text(body, encoding="utf-8")
    return target


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="vignette files (default: all)")
    parser.add_argument("--out", default=str(HERE / "html"), help="output folder")
    args = parser.parse_args(argv)
    sources = [HERE / n for n in args.names] if args.names else vignette_paths()
    for source in sources:
        start = time.perf_counter()
        target = render(source, Path(args.out))
        print(f"{source.name}: {time.perf_counter() - start:.1f} s -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
