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
