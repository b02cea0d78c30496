"""Every vignette executes (at reduced size) and shows every figure it makes; the committed HTML
pages are rendered from the current vignette sources and package version."""

import html
import importlib.util
import json
from pathlib import Path

import pytest

import causalkit

VIGNETTES = Path(__file__).resolve().parents[1] / "vignettes"
_spec = importlib.util.spec_from_file_location("render", VIGNETTES / "render.py")
render = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render)

SOURCES = render.vignette_paths()
RENDER_COMMAND = "make vignettes  (or: .venv/bin/python vignettes/render.py NAME.py)"


def _check_figures(page: str, stamp: dict) -> None:
    """Each figure the run created is embedded once as an image, and nothing else is."""
    images = render.embedded_images(page)
    assert stamp["figures"] >= 1, "a vignette should make at least one figure"
    assert len(set(images)) == len(images), "a figure is shown more than once"
    assert len(images) == stamp["figures"], (
        f"the run made {stamp['figures']} figures but the page shows {len(images)}")


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_vignette_executes_and_shows_its_figures(source, tmp_path, monkeypatch):
    monkeypatch.setenv("CAUSALKIT_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")   # the renderer must switch the kernel to inline
    page = render.render(source, tmp_path, timeout=600).read_text()
    assert "Traceback" not in page
    stamp = render.read_stamp(page)
    assert stamp["source_sha256"] == render.source_hash(source)
    assert stamp["quick"] is True
    _check_figures(page, stamp)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_committed_page_is_current(source):
    committed = VIGNETTES / "html" / f"{source.stem}.html"
    assert committed.exists(), f"{committed.name} is missing: run {RENDER_COMMAND}"
    page = committed.read_text(encoding="utf-8")
    stamp = render.read_stamp(page)
    assert stamp is not None, f"{committed.name} has no render stamp: run {RENDER_COMMAND}"
    assert stamp["source_sha256"] == render.source_hash(source), (
        f"{committed.name} was rendered from an older {source.name}: run {RENDER_COMMAND}")
    assert stamp["causalkit_version"] == causalkit.__version__, (
        f"{committed.name} was rendered with causalkit {stamp['causalkit_version']}")
    assert stamp["quick"] is False, f"{committed.name} was rendered at reduced size"
    assert "Traceback" not in page
    _check_figures(page, stamp)


def test_committed_pages_have_sources():
    names = {p.stem for p in SOURCES}
    orphans = [p.name for p in (VIGNETTES / "html").glob("*.html") if p.stem not in names]
    assert not orphans, f"rendered pages without a vignette source: {orphans}"


def test_stamp_and_images_are_read_back():
    stamp = {"source": "x.py", "source_sha256": "0" * 64, "causalkit_version": "9.9",
             "quick": False, "figures": 2}
    meta = f'<meta name="{render.STAMP_NAME}" content="{html.escape(json.dumps(stamp))}">'
    page = (f"<html><head>{meta}<style>a{{background:url(data:image/png;base64,AAAA)}}</style>"
            '</head><body><img alt="" src="data:image/png;base64,QUJD">'
            '<img src="data:image/png;base64,REVG"></body></html>')
    assert render.read_stamp(page) == stamp
    assert render.embedded_images(page) == ["QUJD", "REVG"]   # the CSS background is no figure
    assert render.read_stamp("<html><head></head></html>") is None
