"""The command line: help for every subcommand, the main job end to end."""

import subprocess
import sys

import pandas as pd
import pytest

from causalkit.cli import PACKAGE_COMMANDS, SYSTEMS_COMMANDS, main


def _help(args):
    with pytest.raises(SystemExit) as exc:
        main(args + ["--help"])
    assert exc.value.code == 0


@pytest.mark.parametrize("args", [[], ["demo"], ["simulate"], ["systems"]]
                         + [[name] for name in PACKAGE_COMMANDS]
                         + [["systems", name] for name in SYSTEMS_COMMANDS])
def test_every_subcommand_has_help(args, capsys):
    _help(args)
    assert "usage: causalkit" in capsys.readouterr().out


def test_demo_prints_table_and_writes_figure(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "causalkit", "demo", "--out", str(tmp_path)],
                          capture_output=True, text=True, check=True)
    assert "Trial only" in proc.stdout and "1,794" in proc.stdout
    table = pd.read_csv(tmp_path / "nsw_cps_comparison.csv", index_col=0)
    assert {"estimate", "std_error", "ci_lower", "ci_upper", "n_borrowed"} <= set(table.columns)
    trial_only = [i for i in table.index if i.startswith("Trial only")]
    assert trial_only
    assert (tmp_path / "nsw_cps_comparison.png").stat().st_size > 10_000


def test_simulate_runs_a_registered_study(tmp_path, capsys):
    out = tmp_path / "dim.csv"
    assert main(["simulate", "difference-in-means", "--reps", "30", "--out", str(out)]) == 0
    assert "difference_in_means" in capsys.readouterr().out
    assert pd.read_csv(out)["rep"].nunique() == 30


def test_every_registered_study_resolves_to_a_study_function():
    import importlib
    import inspect

    from causalkit.studies import STUDIES

    for name, (module, function) in STUDIES.items():
        study = getattr(importlib.import_module(module), function)
        params = set(inspect.signature(study).parameters)
        assert {"reps", "seed", "n_jobs", "backend", "scheduler", "out", "quick"} <= params, name


def test_simulate_quick_flag(tmp_path):
    out = tmp_path / "dim.csv"
    assert main(["simulate", "difference-in-means", "--quick", "--out", str(out)]) == 0
    assert pd.read_csv(out)["rep"].nunique() == 200
