"""The command line: help for every subcommand, the main job end to end."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from causalkit.cli import ESTIMATOR_COMMANDS, SYSTEMS_COMMANDS, main


def _help(args):
    with pytest.raises(SystemExit) as exc:
        main(args + ["--help"])
    assert exc.value.code == 0


@pytest.mark.parametrize("args", [[], ["demo"], ["simulate"], ["systems"]]
                         + [[name] for name in ESTIMATOR_COMMANDS]
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
    assert "PSID" in proc.stdout and (tmp_path / "nsw_psid_comparison.png").stat().st_size > 10_000


def test_every_registered_study_resolves_to_a_study_function():
    import importlib
    import inspect

    from causalkit.studies import STUDIES

    for name, (module, function) in STUDIES.items():
        study = getattr(importlib.import_module(module), function)
        params = set(inspect.signature(study).parameters)
        assert {"reps", "seed", "n_jobs", "backend", "scheduler", "out", "quick"} <= params, name


# --------------------------------------------------------------- estimator subcommands on CSV
def _causalkit(*args):
    """Run the installed command line; returns (exit status, stdout, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "causalkit", *map(str, args)],
                          capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def nsw_csv(tmp_path_factory):
    """NSW trial + the first 400 CPS controls written by ``DataFrame.to_csv`` (index included)."""
    from causalkit.datasets import NSW_COVARIATES, load_nsw_cps

    data = load_nsw_cps()
    data = pd.concat([data[data.trial == 1], data[data.trial == 0].head(400)])
    path = tmp_path_factory.mktemp("csv") / "nsw.csv"
    data[["re78", "treat", "trial", *NSW_COVARIATES]].reset_index(drop=True).to_csv(path)
    return path


def _user_error(code, out, err, command):
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"causalkit {command}: "), err
    assert "Traceback" not in err


def test_borrow_csv_never_uses_the_index_column(nsw_csv):
    from causalkit.datasets import NSW_COVARIATES

    code, out, err = _causalkit("borrow", "--data", nsw_csv, "--estimators", "trial,full",
                                "--inference", "influence")
    assert code == 0, err
    assert "ignoring identifier column(s) ['Unnamed: 0']" in out
    assert f"covariates ({len(NSW_COVARIATES)}): {', '.join(NSW_COVARIATES)}" in out
    code2, out2, _ = _causalkit("borrow", "--data", nsw_csv, "--estimators", "trial,full",
                                "--inference", "influence", "--covariates",
                                ",".join(NSW_COVARIATES))
    assert code2 == 0
    table = out.split("\n\n")[-1]
    assert table == out2.split("\n\n")[-1]
    assert "influence" in table


def test_borrow_rejects_a_role_column_as_covariate(nsw_csv):
    _user_error(*_causalkit("borrow", "--data", nsw_csv, "--covariates", "age,re78"), "borrow")


def test_borrow_rejects_a_text_cell_naming_the_column(nsw_csv, tmp_path):
    data = pd.read_csv(nsw_csv, index_col=0)
    data["age"] = data["age"].astype(object)
    data.loc[5, "age"] = "abc"
    path = tmp_path / "text.csv"
    data.to_csv(path, index=False)
    code, out, err = _causalkit("borrow", "--data", path)
    _user_error(code, out, err, "borrow")
    assert "'age'" in err and "'abc'" in err


def test_borrow_yes_no_treatment_is_a_clear_error(nsw_csv, tmp_path):
    data = pd.read_csv(nsw_csv, index_col=0)
    data["treat"] = np.where(data["treat"] == 1, "yes", "no")
    path = tmp_path / "yesno.csv"
    data.to_csv(path, index=False)
    code, out, err = _causalkit("borrow", "--data", path, "--estimators", "trial")
    _user_error(code, out, err, "borrow")
    assert "treatment" in err


def test_borrow_missing_file_and_unknown_estimator(tmp_path):
    _user_error(*_causalkit("borrow", "--data", tmp_path / "absent.csv"), "borrow")
    _user_error(*_causalkit("borrow", "--estimators", "nope"), "borrow")


def test_longterm_and_policy_subcommands_on_csv(tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    x = rng.normal(size=(n, 2))
    a = rng.binomial(1, 0.5, n)
    s1 = x[:, 0] + a + rng.normal(size=n)
    y = s1 + 2 * a + rng.normal(size=n)
    s1[rng.random(n) < 0.1] = np.nan
    y[np.isnan(s1) | (rng.random(n) < 0.1)] = np.nan
    frame = pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "a": a, "s1": s1, "y": y})
    frame.to_csv(tmp_path / "lt.csv")
    code, out, err = _causalkit("longterm", "--data", tmp_path / "lt.csv", "--outcome", "y",
                                "--treatment", "a", "--short", "s1")
    assert code == 0, err
    assert "covariates (2): x1, x2" in out and "interval" in out
    _user_error(*_causalkit("longterm", "--data", tmp_path / "lt.csv", "--outcome", "y",
                            "--treatment", "a", "--short", "s9"), "longterm")
    source = frame.drop(columns=["s1"]).assign(y=x[:, 1] + a * x[:, 0] + rng.normal(size=n))
    source.to_csv(tmp_path / "source.csv", index=False)
    pd.DataFrame(rng.normal(0.5, 1, size=(300, 2)), columns=["x1", "x2"]).to_csv(
        tmp_path / "target.csv", index=False)
    code, out, err = _causalkit("policy", "--data", tmp_path / "source.csv", "--target",
                                tmp_path / "target.csv", "--outcome", "y", "--treatment", "a")
    assert code == 0, err
    assert "always 0" in out and "always 1" in out
    pd.DataFrame(rng.normal(size=(30, 1)), columns=["x1"]).to_csv(tmp_path / "bad.csv")
    _user_error(*_causalkit("policy", "--data", tmp_path / "source.csv", "--target",
                            tmp_path / "bad.csv", "--outcome", "y", "--treatment", "a"), "policy")
