"""The worker pool: results in the jobs' order whatever the number of processes, a job's error raised to the
caller, and the number of workers a run gets (one per core on a CPU, one on CUDA, never more than the jobs)."""

import os

import pytest
import torch

from helpers.experiment.params import ParamsError, RunParams
from helpers.experiment.pool import available_cores, run_jobs, worker_count


def square_on_one_thread(P, job):
    """A job: its value squared, the process id and the thread count it ran with."""
    if job < 0:
        raise ValueError(f"negative job {job}")
    return job * job, os.getpid(), torch.get_num_threads()


def test_two_workers_return_what_one_process_returns_in_order():
    jobs = list(range(12))
    serial = run_jobs(RunParams(workers=1), square_on_one_thread, jobs)
    parallel = run_jobs(RunParams(workers=2), square_on_one_thread, jobs)
    assert [r[0] for r in parallel] == [r[0] for r in serial] == [j * j for j in jobs]
    assert {r[1] for r in serial} == {os.getpid()}
    assert os.getpid() not in {r[1] for r in parallel} and {r[2] for r in parallel} == {1}


def test_a_failing_job_raises_its_own_error():
    with pytest.raises(ValueError, match="negative job -3"):
        run_jobs(RunParams(workers=2), square_on_one_thread, [1, 2, -3, 4])


def test_worker_count():
    assert worker_count(RunParams(workers=0), 100) == available_cores()
    assert worker_count(RunParams(workers=4), 3) == 3
    assert worker_count(RunParams(workers=4), 0) == 1
    assert worker_count(RunParams(workers=0, device="cuda"), 100) == 1
    with pytest.raises(ParamsError, match="workers=2 starts CPU processes"):
        RunParams(workers=2, device="cuda")
    with pytest.raises(ParamsError, match="workers=-1 must be >= 0"):
        RunParams(workers=-1)
