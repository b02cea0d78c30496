"""Start-up cost of the command line: ``causalkit --help`` against a bare ``import causalkit``.

Both commands run in fresh Python processes, interleaved (A, B, A, B, ...) so that drift of the
machine affects them alike; prints the median wall time of each and the ratio of medians with a
bootstrap 95% interval over the paired runs. Target: ratio <= 1.2.

Usage: ``python benchmarks/cli_startup.py [--rounds 20]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np

COMMANDS = {
    "import causalkit": [sys.executable, "-c", "import causalkit"],
    "causalkit --help": [sys.executable, "-m", "causalkit", "--help"],
}


def measure(rounds: int) -> dict:
    times = {name: [] for name in COMMANDS}
    for _ in range(rounds):
        for name, cmd in COMMANDS.items():
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            times[name].append(time.perf_counter() - start)
    return {name: np.array(v) for name, v in times.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    t = measure(args.rounds)
    base, cli = t["import causalkit"], t["causalkit --help"]
    rng = np.random.default_rng(0)
    idx = rng.integers(0, base.size, size=(2000, base.size))
    boot = np.median(cli[idx], axis=1) / np.median(base[idx], axis=1)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    for name, v in t.items():
        print(f"{name:<20} median {1000 * np.median(v):7.0f} ms over {v.size} runs")
    print(f"ratio --help / import: {np.median(cli) / np.median(base):.2f} "
          f"(95% CI {lo:.2f}-{hi:.2f}; target <= 1.2)")


if __name__ == "__main__":
    main()
