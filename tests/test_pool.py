"""The worker pool: results in the jobs' order whatever the number of processes, a job's error raised to the
caller, the number of workers a run gets (one per core on a CPU, one on CUDA, never more than the jobs), and no
process of the pool left behind when its parent is killed."""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from jupyter_client import KernelManager

from helpers.experiment.run.params import ParamsError, RunParams
from helpers.experiment.run.pool import available_cores, run_jobs, worker_count

ROOT = Path(__file__).resolve().parents[1]


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


# Two jobs that mark that they run, then sleep: the pool stays alive until its parent is killed. In a module of their
# own, so a spawned worker imports them (a job defined in a kernel's cells would not be importable there).
SLEEPING_JOB = """
import os, time
from pathlib import Path

def sleeping_job(P, job):
    Path(__file__).parent.joinpath(f"running-{os.getpid()}").touch()
    time.sleep(120)
"""

# What the parent runs: a script's main, or a cell a kernel executes.
RUN_POOL = """
import sys
sys.path.insert(0, {folder!r})
from sleeping import sleeping_job
from helpers.experiment.run.params import RunParams
from helpers.experiment.run.pool import run_jobs
run_jobs(RunParams(workers=2), sleeping_job, [0, 1])
"""


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from field 3 (state) on, or None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def _children(parent: int) -> set[tuple[int, str]]:
    """(pid, start time) of the parent's children: a pid reused later is not mistaken for one of them."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) and int(stat[1]) == parent:
            found.add((int(entry.name), stat[19]))
    return found


def _alive(process: tuple[int, str]) -> bool:
    """Whether that process (pid, start time) still runs."""
    stat = _stat(process[0])
    return stat is not None and stat[19] == process[1] and stat[0] != "Z"      # a zombie has ended


def kill_mid_stage(folder: Path, parent: subprocess.Popen) -> None:
    """Wait until both jobs of the parent's pool run, SIGKILL the parent, and check that none of its workers and no
    resource tracker outlive it; a failure leaves nothing running either."""
    children = set()
    try:
        deadline = time.monotonic() + 120                    # torch's import in each worker: seconds on a busy machine
        while len(list(folder.glob("running-*"))) < 2:
            assert parent.poll() is None, "the parent ended before its jobs ran"
            assert time.monotonic() < deadline, "the workers' jobs did not start"
            time.sleep(0.05)
        children = _children(parent.pid)
        workers = {int(f.name.removeprefix("running-")) for f in folder.glob("running-*")}
        assert workers <= {pid for pid, _ in children} and len(children) == 3   # two workers, the resource tracker
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while (left := {c for c in children if _alive(c)}) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left, f"processes left after their parent was killed: {sorted(pid for pid, _ in left)}"
    finally:
        for pid, _ in (c for c in children if _alive(c)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


LINUX_ONLY = pytest.mark.skipif(sys.platform != "linux", reason="workers end with their parent on Linux only")


@LINUX_ONLY
def test_killing_the_parent_ends_its_workers_and_resource_tracker(tmp_path):
    (tmp_path / "sleeping.py").write_text(SLEEPING_JOB)
    main = textwrap.indent(RUN_POOL.format(folder=str(tmp_path)), "    ")
    (tmp_path / "parent.py").write_text(f"if __name__ == '__main__':{main}")      # spawn imports the main module
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(tmp_path / "stderr", "w") as stderr:
        parent = subprocess.Popen([sys.executable, str(tmp_path / "parent.py")], cwd=ROOT, env=env,
                                  stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        kill_mid_stage(tmp_path, parent)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{(tmp_path / 'stderr').read_text()}") from None
    finally:
        parent.kill()
        parent.wait()


@LINUX_ONLY
def test_killing_a_kernel_mid_cell_ends_its_workers_and_resource_tracker(tmp_path):
    """As a JupyterLab kernel killed while a cell runs a stage on the pool: the kernel a front end starts (a python3
    kernel in the repository), the cell's pool, then SIGKILL to the kernel."""
    (tmp_path / "sleeping.py").write_text(SLEEPING_JOB)
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)})
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        client.execute(RUN_POOL.format(folder=str(tmp_path)))       # the cell: it runs until the kernel is killed
        kill_mid_stage(tmp_path, manager.provisioner.process)      # the kernel's process (a Popen)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
