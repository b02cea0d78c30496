"""The paper-comparison tables read our numbers from the committed results files."""

import json

import pandas as pd
import pytest

from causalkit.systems.papers import COLUMNS, DRIVERS, paper_comparison, results_dir


@pytest.mark.parametrize("driver", DRIVERS)
def test_table_shape_and_labels(driver):
    table = paper_comparison(driver)
    assert list(table.columns) == COLUMNS
    assert len(table) >= 3
    assert table["ours"].notna().all()
    assert table["evidence"].str.match(r"(real|emulated|simulated)").all()
    for col in ("claim", "paper", "tag", "ours_text", "strongest_baseline"):
        assert table[col].map(lambda v: isinstance(v, str) and v != "").all(), col


def test_numbers_come_from_the_files():
    large = pd.read_csv(results_dir("vclos") / "vclos-large" / "vclos-large_summary.csv")
    vclos = large[large["scheduler"] == "vclos"]
    stable = vclos[vclos["jct_vs_bestfit"].notna()]
    table = paper_comparison("vclos").set_index("claim")
    assert table.loc["average JCT change, vClos vs best fit + ECMP, 1 flow per connection",
                     "ours"] == pytest.approx(stable.loc[stable["load"].idxmax(), "jct_vs_bestfit"])
    liver = pd.read_csv(results_dir("liver") / "summary.csv").iloc[0]
    assert paper_comparison("liver")["ours"].iloc[0] == pytest.approx(
        liver["ratio_restart_over_live"])
    ann = pd.read_csv(results_dir("smartann") / "comparison" / "comparison.csv")
    measured = ann["qps_ratio_thread"].dropna()
    ours = paper_comparison("smartann")
    ratios = ours.loc[ours["claim"].str.startswith("QPS"), "ours"]
    assert sorted(ratios) == pytest.approx(sorted(measured))


def test_reads_another_results_folder(tmp_path):
    src = results_dir("liver")
    (tmp_path / "liver").mkdir()
    for name in ("MANIFEST.json", "summary.csv", "simulated.csv", "events.csv",
                 "transfer/ratio.csv", "transfer/parts.csv", "transfer/cost_fit.csv",
                 "transfer/prediction.csv"):
        (tmp_path / "liver" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "liver" / name).write_bytes((src / name).read_bytes())
    summary = pd.read_csv(tmp_path / "liver" / "summary.csv")
    summary["ratio_restart_over_live"] = 2.0
    summary.to_csv(tmp_path / "liver" / "summary.csv", index=False)
    assert paper_comparison("liver", results=tmp_path)["ours"].iloc[0] == 2.0
    json.loads((tmp_path / "liver" / "MANIFEST.json").read_text())


def test_bad_driver_and_missing_results(tmp_path):
    with pytest.raises(ValueError, match="driver must be one of"):
        paper_comparison("nope")
    with pytest.raises(FileNotFoundError, match="no committed results"):
        paper_comparison("argus", results=tmp_path)
