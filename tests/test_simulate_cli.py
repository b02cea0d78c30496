"""``causalkit simulate``: results folders, manifests, --quick, --overwrite, --list, errors."""

import json
import subprocess
import sys

import pytest

from causalkit.cli import main
from causalkit.simulation import load_results
from causalkit.studies import STUDIES


def _causalkit(*args, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "causalkit", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


def test_simulate_writes_a_folder_with_a_manifest_and_prints_a_compact_table(tmp_path, capsys):
    out = tmp_path / "dim"
    assert main(["simulate", "difference-in-means", "--reps", "30", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"results in {out}/" in printed and "difference_in_means" in printed
    assert max(len(line) for line in printed.splitlines()[1:]) <= 100  # the table
    assert load_results(out / "difference-in-means.jsonl")["rep"].nunique() == 30
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert manifest["study"] == "difference-in-means" and manifest["reps"] == 30
    assert {"package_version", "git_commit", "command", "wall_seconds", "host_cpu_count",
            "seed", "quick"} <= set(manifest)
    entry = manifest["files"]["difference-in-means.jsonl"]
    assert entry["records"] == 30 and len(entry["fingerprint"]) == 16


def test_quick_and_full_runs_write_distinct_default_folders(tmp_path):
    code, _, err = _causalkit("simulate", "difference-in-means", "--quick", cwd=tmp_path)
    assert code == 0, err
    code, _, err = _causalkit("simulate", "difference-in-means", "--reps", "20", cwd=tmp_path)
    assert code == 0, err
    quick = tmp_path / "results" / "difference-in-means" / "quick"
    full = tmp_path / "results" / "difference-in-means"
    assert load_results(quick / "difference-in-means.jsonl")["rep"].nunique() == 200
    assert load_results(full / "difference-in-means.jsonl")["rep"].nunique() == 20
    full_manifest = json.loads((full / "MANIFEST.json").read_text())
    assert list(full_manifest["files"]) == ["difference-in-means.jsonl"]  # quick/ has its own
    assert full_manifest["command"] == "causalkit simulate difference-in-means --reps 20"


def test_a_changed_design_is_a_one_line_error_and_overwrite_is_the_way_out(tmp_path):
    out = tmp_path / "dim"
    assert main(["simulate", "difference-in-means", "--reps", "5", "--out", str(out)]) == 0
    code, stdout, err = _causalkit("simulate", "difference-in-means", "--reps", "5", "--seed",
                                   "9", "--out", out)
    assert code == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("causalkit simulate: ")
    assert "differs in seed" in err and "--overwrite" in err
    code, _, err = _causalkit("simulate", "difference-in-means", "--reps", "5", "--seed", "9",
                              "--out", out, "--overwrite")
    assert code == 0, err


def test_list_shows_every_registered_study():
    code, stdout, err = _causalkit("simulate", "--list")
    assert code == 0, err
    listed = [line.split()[0] for line in stdout.strip().splitlines()]
    assert listed == list(STUDIES)


@pytest.mark.parametrize("args, message", [
    ([], "give a study name"),
    (["difference-in-means", "--reps", "0"], "--reps must be a positive integer"),
])
def test_user_errors_exit_2_with_one_line(args, message):
    code, _, err = _causalkit("simulate", *args)
    assert code == 2 and err.strip().splitlines() == [err.strip()]
    assert err.startswith("causalkit simulate: ") and message in err


def test_committed_results_finds_a_study_folder_or_says_none(tmp_path):
    from causalkit.studies import committed_results

    folder = committed_results("longterm-linear")
    assert folder is not None and (folder / "MANIFEST.json").exists()
    assert committed_results("no-such-study") is None
    (tmp_path / "mine").mkdir()
    assert committed_results("mine", results=tmp_path) == tmp_path / "mine"
    assert committed_results("longterm-linear", results=tmp_path) is None
