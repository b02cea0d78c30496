"""Every public estimator follows the sklearn protocol of the design (constructor arguments
stored unchanged, clone, get_params, docstrings), checked by the project's protocol script."""

import subprocess
import sys
from pathlib import Path

import pytest

CHECK = Path(__file__).resolve().parents[2] / "shared" / "checks" / "protocol.py"


@pytest.mark.skipif(not CHECK.exists(), reason="the protocol script lives in ../shared/checks")
def test_every_estimator_follows_the_protocol():
    proc = subprocess.run([sys.executable, str(CHECK)], capture_output=True, text=True,
                          cwd=Path(__file__).parents[1])
    assert proc.returncode == 0, proc.stdout + proc.stderr
