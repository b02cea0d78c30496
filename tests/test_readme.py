"""Every Python code block of the README runs verbatim, each in a fresh namespace."""

import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_has_code_blocks():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs(code):
    import matplotlib.pyplot as plt

    exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    plt.close("all")


def _readme_tables():
    import importlib.util

    path = README.parent / "tools" / "readme_tables.py"
    spec = importlib.util.spec_from_file_location("readme_tables", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_paper_comparison_tables_match_the_committed_results():
    from causalkit.systems.papers import DRIVERS

    tables = _readme_tables()
    text = README.read_text()
    assert sorted(m.group(2) for m in tables.BLOCK.finditer(text)) == sorted(DRIVERS)
    assert tables.stale(text) == []


def test_a_changed_number_makes_its_table_stale():
    tables = _readme_tables()
    text = README.read_text()
    first = next(tables.BLOCK.finditer(text))
    edited = text[:first.start(3)] + first.group(3).replace("|", "| 0 |", 3) + text[first.end(3):]
    assert tables.stale(edited) == [first.group(2)]
