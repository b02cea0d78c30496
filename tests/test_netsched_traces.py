"""Synthetic traces and the Philly / Helios / PAI loaders (on fixture files written here)."""

import json

import numpy as np
import pandas as pd
import pytest

from causalkit.systems.netsched import (
    LeafSpine,
    load_helios,
    load_pai,
    load_philly,
    synthetic_trace,
)


def test_synthetic_offered_load_matches_target():
    c = LeafSpine(32, 8, 8)
    jobs = synthetic_trace(20000, c, load=0.7, random_state=1)
    span = jobs["arrival"].iloc[-1]
    offered = (jobs["n_gpus"] * jobs["duration"]).sum() / (span * c.n_gpus)
    # heavy-tailed work: allow 4 Monte Carlo SEs (batch-means over 20 batches)
    batches = [jobs.iloc[ix] for ix in np.array_split(np.arange(len(jobs)), 20)]
    per = [(b["n_gpus"] * b["duration"]).sum() / ((b["arrival"].iloc[-1] - b["arrival"].iloc[0])
                                                  * c.n_gpus) for b in batches]
    se = np.std(per, ddof=1) / np.sqrt(len(per))
    assert abs(offered - 0.7) < 4 * se + 0.01
    assert set(jobs["n_gpus"]) <= {1, 2, 4, 8, 16, 32, 64, 128, 256}
    assert jobs["arrival"].is_monotonic_increasing and jobs["arrival"].iloc[0] == 0


def test_synthetic_is_reproducible_and_drops_too_large_sizes():
    a = synthetic_trace(50, 16, 0.5, random_state=3)
    b = synthetic_trace(50, 16, 0.5, random_state=3)
    pd.testing.assert_frame_equal(a, b)
    assert a["n_gpus"].max() <= 16
    with pytest.raises(ValueError, match="load"):
        synthetic_trace(5, 16, load=0)
    with pytest.raises(ValueError, match="size_mix"):
        synthetic_trace(5, 4, size_mix={8: 1.0})


def _philly(tmp_path, jobs):
    p = tmp_path / "cluster_job_log"
    p.write_text(json.dumps(jobs))
    return p


def test_load_philly(tmp_path):
    jobs = [
        {"jobid": "app_1", "status": "Pass", "submitted_time": "2017-10-03 05:00:00",
         "attempts": [{"start_time": "2017-10-03 05:00:10", "end_time": "2017-10-03 06:00:10",
                       "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]},
                                  {"ip": "m2", "gpus": ["gpu0"]}]}]},
        {"jobid": "app_2", "status": "Killed", "submitted_time": "2017-10-03 04:59:00",
         "attempts": []},
        {"jobid": "app_3", "status": "Pass", "submitted_time": "2017-10-03 05:30:00",
         "attempts": [{"start_time": "2017-10-03 05:31:00", "end_time": "2017-10-03 05:41:00",
                       "detail": [{"ip": "m3", "gpus": ["gpu0"]}]}]},
    ]
    df = load_philly(_philly(tmp_path, jobs), round_pow2=True, random_state=0)
    assert list(df["job_id"]) == ["app_1", "app_3"]
    np.testing.assert_allclose(df["arrival"], [0.0, 1800.0])
    assert list(df["n_gpus"]) == [4, 1]
    np.testing.assert_allclose(df["duration"], [3600.0, 600.0])
    bad = jobs + [{"jobid": "x", "attempts": []}]
    with pytest.raises(ValueError, match="row 4"):
        load_philly(_philly(tmp_path, bad))


def test_load_helios(tmp_path):
    p = tmp_path / "cluster_log.csv"
    p.write_text(
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration\n"
        "j1,u1,vc1,8,32,1,COMPLETED,2020-06-03 10:00:00,2020-06-03 10:00:05,"
        "2020-06-03 11:00:05,3600\n"
        "j2,u1,vc1,0,4,1,COMPLETED,2020-06-03 10:01:00,2020-06-03 10:01:00,"
        "2020-06-03 10:02:00,60\n"
        "j3,u2,vc2,3,8,1,FAILED,2020-06-03 10:10:00,2020-06-03 10:10:00,"
        "2020-06-03 10:20:00,600\n")
    df = load_helios(p, round_pow2=True, random_state=0)
    assert list(df["job_id"]) == ["j1", "j3"] and list(df["n_gpus"]) == [8, 4]
    np.testing.assert_allclose(df["arrival"], [0.0, 600.0])
    p.write_text(p.read_text() + "j4,u2,vc2,two,8,1,COMPLETED,2020-06-03 10:30:00,,,60\n")
    with pytest.raises(ValueError, match="row 4: gpu_num"):
        load_helios(p)


def test_load_pai_with_and_without_header(tmp_path):
    rows = ["jobA,worker,2,Terminated,100,1100,600,29.3,100,V100",
            "jobA,ps,1,Terminated,100,1100,600,29.3,50,V100",
            "jobB,worker,1,Failed,200,300,600,29.3,100,V100",
            "jobC,worker,1,Terminated,400,500,600,29.3,,"]
    header = ("job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,"
              "plan_gpu,gpu_type\n")
    for text in (header + "\n".join(rows) + "\n", "\n".join(rows) + "\n"):
        p = tmp_path / "pai_task_table.csv"
        p.write_text(text)
        df = load_pai(p, random_state=0)
        assert list(df["job_id"]) == ["jobA"]
        assert list(df["n_gpus"]) == [3] and list(df["duration"]) == [1000.0]
    p.write_text(header + rows[0] + "\njobD,worker,1,Terminated,soon,500,600,29.3,100,V100\n")
    with pytest.raises(ValueError, match="row 2: start_time"):
        load_pai(p)
