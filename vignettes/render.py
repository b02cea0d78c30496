"""Execute the vignettes and render them to self-contained HTML (offline).

Each vignette is a jupytext percent-format Python file (``# %%`` code cells, ``# %% [markdown]``
narrative cells). It is converted to a notebook, executed with nbclient in a fresh kernel, and
exported by nbconvert with its figures embedded.

    python vignettes/render.py                 # all vignettes -> vignettes/html/
    python vignettes/render.py borrowing.py    # one
    CAUSALKIT_QUICK=1 python vignettes/render.py --out /tmp/v   # reduced sizes (as the tests do)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def vignette_paths() -> list[Path]:
    """All vignette sources, in name order."""
    return sorted(p for p in HERE.glob("*.py") if p.name != "render.py")


def render(source: Path, out_dir: Path, *, timeout: int = 900) -> Path:
    """Execute ``source`` and write ``out_dir/<name>.html``; return the HTML path."""
    import jupytext
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter

    notebook = jupytext.read(source)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    os.environ.setdefault("MPLBACKEND", "Agg")
    NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(HERE)}}).execute()
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(notebook)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{source.stem}.html"
    target.write_text(body, encoding="utf-8")
    nbformat.validate(notebook)
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
