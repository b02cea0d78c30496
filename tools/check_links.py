"""Check the internal links of a built HTML site: every relative ``href``/``src`` must name a file
of the site, and every ``#fragment`` an ``id`` (or ``name``) in the page it points to.

    python tools/check_links.py docs/_build/html

Exits 1 and lists the broken links when there are any. External links (with a scheme such as
``https:``, or ``//host``) and ``data:`` URIs are not checked: the site is built and read offline.
"""

from __future__ import annotations

import argparse
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    """Collects the link targets and the anchors of one page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.anchors: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if attrs.get(key):
                self.anchors.add(attrs[key])
        for key in ("href", "src"):
            if attrs.get(key) and tag in {"a", "link", "img", "script", "iframe"}:
                self.links.append(attrs[key])


def _parse(path: Path, cache: dict) -> _Page:
    if path not in cache:
        page = _Page()
        page.feed(path.read_text(encoding="utf-8", errors="replace"))
        cache[path] = page
    return cache[path]


def broken_links(site: Path) -> list[str]:
    """``"page: link (reason)"`` for every internal link of ``site`` that does not resolve."""
    site = site.resolve()
    cache: dict[Path, _Page] = {}
    problems = []
    for page_path in sorted(site.rglob("*.html")):
        for link in _parse(page_path, cache).links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc:
                continue
            target = (page_path.parent / unquote(parts.path)).resolve() if parts.path \
                else page_path
            if target.is_dir():
                target = target / "index.html"
            where = f"{page_path.relative_to(site)}: {link}"
            if not target.is_relative_to(site):
                problems.append(f"{where} (outside the site)")
            elif not target.exists():
                problems.append(f"{where} (no such file)")
            elif parts.fragment and target.suffix == ".html" and \
                    unquote(parts.fragment) not in _parse(target, cache).anchors:
                problems.append(f"{where} (no anchor #{parts.fragment})")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, help="folder of the built HTML site")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"check_links: {args.site} has no index.html; build the site first",
              file=sys.stderr)
        return 2
    problems = broken_links(args.site)
    for problem in problems:
        print(problem)
    pages = sum(1 for _ in args.site.rglob("*.html"))
    print(f"{pages} pages, {len(problems)} broken internal links")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
