"""Every vignette executes (at reduced size) and renders to HTML with its figures."""

import importlib.util
from pathlib import Path

import pytest

VIGNETTES = Path(__file__).resolve().parents[1] / "vignettes"
_spec = importlib.util.spec_from_file_location("render", VIGNETTES / "render.py")
render = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render)


@pytest.mark.parametrize("source", render.vignette_paths(), ids=lambda p: p.stem)
def test_vignette_executes_and_renders(source, tmp_path, monkeypatch):
    monkeypatch.setenv("CAUSALKIT_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    html = render.render(source, tmp_path, timeout=600).read_text()
    assert "data:image/png;base64" in html, "a vignette should show at least one figure"
    assert "Traceback" not in html
