"""Rewrite (or check) the README's paper-comparison tables from the committed results.

Each table sits between ``<!-- paper_comparison: DRIVER -->`` and ``<!-- /paper_comparison -->``
and is :func:`causalkit.systems.papers.markdown` of that driver, so no number in it is typed by
hand. ``python tools/readme_tables.py`` rewrites the tables in place; ``--check`` exits with
status 1 and names the stale tables instead (the test suite runs the same check).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from causalkit.systems.papers import markdown

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"(<!-- paper_comparison: (\w+) -->\n)(.*?)(<!-- /paper_comparison -->)",
                   flags=re.DOTALL)


def render(text: str) -> str:
    """``text`` with every paper-comparison block replaced by its current table."""
    return BLOCK.sub(lambda m: f"{m.group(1)}\n{markdown(m.group(2))}\n\n{m.group(4)}", text)


def stale(text: str) -> list[str]:
    """Drivers whose table in ``text`` differs from the committed results."""
    fresh = {m.group(2): m.group(3) for m in BLOCK.finditer(render(text))}
    return [m.group(2) for m in BLOCK.finditer(text) if m.group(3) != fresh[m.group(2)]]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="report stale tables (exit status 1) instead of rewriting them")
    args = parser.parse_args(argv)
    text = README.read_text()
    if args.check:
        drivers = stale(text)
        if drivers:
            print(f"stale README tables: {', '.join(drivers)} "
                  "(run python tools/readme_tables.py)", file=sys.stderr)
        return 1 if drivers else 0
    README.write_text(render(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
