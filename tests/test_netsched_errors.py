"""Bad input: clear errors naming the argument, the job or the row."""

import pytest

from causalkit.systems.netsched import ClusterExperiment, LeafSpine, simulate_cluster
from causalkit.systems.netsched.sim import check_jobs

C = LeafSpine(4, 8, 8)


def test_job_larger_than_cluster():
    with pytest.raises(ValueError, match=r"row 1 \(job 7\) asks for 64 GPUs; the cluster has 32"):
        simulate_cluster(C, [{"job_id": 3, "arrival": 0, "n_gpus": 4, "duration": 1},
                     {"job_id": 7, "arrival": 1, "n_gpus": 64, "duration": 1}])


def test_non_power_of_two_where_the_pattern_needs_it():
    with pytest.raises(ValueError, match="halving_doubling.*power-of-two.*got 12"):
        simulate_cluster(C, [{"arrival": 0, "n_gpus": 12, "duration": 1,
                      "pattern": "halving_doubling"}])


def test_malformed_job_rows_name_the_row():
    good = {"arrival": 0, "n_gpus": 4, "duration": 10}
    with pytest.raises(ValueError, match="row 1: duration"):
        check_jobs([good, {**good, "duration": "long"}], C)
    with pytest.raises(ValueError, match="row 2 .*n_gpus must be a positive integer"):
        check_jobs([good, good, {**good, "n_gpus": 2.5}], C)
    with pytest.raises(ValueError, match="comm_fraction"):
        check_jobs([{**good, "comm_fraction": 1.5}], C)
    with pytest.raises(ValueError, match="pattern must be one of"):
        check_jobs([{**good, "pattern": "tree"}], C)
    with pytest.raises(ValueError, match="required column"):
        check_jobs([{"arrival": 0, "n_gpus": 1}], C)
    with pytest.raises(ValueError, match="unique"):
        check_jobs([{**good, "job_id": 1}, {**good, "job_id": 1}], C)
    with pytest.raises(TypeError, match="cluster"):
        check_jobs([good], "cluster")


def test_topology_and_scheduler_arguments():
    with pytest.raises(ValueError, match="leaves"):
        LeafSpine(0, 8, 8)
    with pytest.raises(ValueError, match="link_gbps"):
        LeafSpine(2, 2, 2, link_gbps=-1)
    with pytest.raises(ValueError, match="scheduler must be one of"):
        simulate_cluster(C, [{"arrival": 0, "n_gpus": 4, "duration": 1}], "random")
    with pytest.raises(ValueError, match="ocs=True"):
        simulate_cluster(C, [{"arrival": 0, "n_gpus": 16, "duration": 1}], "ocs-vclos")


def test_job_vclos_can_never_place():
    # 2 spines: a virtual Clos has at most 2 GPUs per leaf, so 13 GPUs (prime) cannot be shaped
    c = LeafSpine(8, 2, 4)
    with pytest.raises(ValueError, match="can never be placed by 'vclos'"):
        simulate_cluster(c, [{"arrival": 0, "n_gpus": 13, "duration": 1}], "vclos")
    simulate_cluster(c, [{"arrival": 0, "n_gpus": 13, "duration": 1}], "ecmp")


def test_experiment_arguments():
    with pytest.raises(ValueError, match="schedulers"):
        ClusterExperiment(leaves=2, schedulers=("fifo",)).run()
    with pytest.raises(ValueError, match="loads"):
        ClusterExperiment(leaves=2, loads=(-1,)).run()
