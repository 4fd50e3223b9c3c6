"""A stage's independent jobs on several CPU processes, with the results one process would return, in order.

    results = run_jobs(P, replay_job, jobs, "replay")      # == [replay_job(P, job) for job in jobs]

The miniature's inner loop runs on one thread (tiny matrices: a second thread only adds barriers, and under load
it is several times slower), so a 2-core machine spends half of itself idle unless the work is split across
processes. Every job here is deterministic on its own (its seed, its frames, one thread), so the results do not
depend on how many processes run them: a test compares 1 and 2 workers on the same stage, tensor for tensor.

Workers are started with `spawn` (safe beside a Jupyter kernel, and the only start method CUDA allows), each on
one thread, and load what they need from the stages' caches: a job function must only call stages that the
calling process has built already (two processes building one stage would both do the work). On CUDA the jobs
run in the calling process (one GPU, one process: scale out with shards instead, `helpers.experiment.stages.shards`).

Workers end with their parent, however it ends: a runner or a JupyterLab kernel killed mid-stage (SIGKILL, out of
memory) would otherwise leave them running, orphaned, about 1 GB each. On Linux each worker asks the kernel, first
thing, for SIGKILL when its parent dies (prctl PR_SET_PDEATHSIG; "parent" is the thread that started it: the one
in `run_jobs`, or the pool's manager thread, both alive until the pool shuts down), and exits at once if the
parent died before it asked. The kernel of a notebook is the workers' parent, so a killed kernel takes them with it.
multiprocessing's resource tracker, also a child of the parent, needs nothing: it exits when the last of the
parent and the workers, which hold its pipe, is gone. Off Linux nothing is done (a killed parent may leave
workers). tests/test_pool.py kills a parent mid-stage and checks that none of its processes remain.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor

from tqdm.auto import tqdm

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
PR_SET_PDEATHSIG = 1                           # linux/prctl.h


def available_cores() -> int:
    """CPU cores this process may run on (its affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def worker_count(P, jobs: int) -> int:
    """P.workers (0: one per available core on a CPU run, one on CUDA), never more than there are jobs."""
    on_cuda = P.device == "cuda" or (P.device == "auto" and _cuda_available())
    wanted = P.workers or (1 if on_cuda else available_cores())
    return max(1, min(wanted, jobs))


def _cuda_available() -> bool:
    import torch
    return torch.cuda.is_available()


def _end_with_parent(parent: int) -> None:
    """On Linux, this process is killed when its parent dies; exits now if the parent (pid `parent`) is gone."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:                 # died before the request: nothing would signal this process
        os._exit(1)


def _one_thread(parent: int) -> None:
    """Worker initializer, where a worker process starts: it ends with its parent (`_end_with_parent`), torch and
    the BLAS pools on one thread (set before the job's imports start them; `helpers.experiment.run.process`); the
    stages' "cached" lines of a worker's own loading are not printed (its errors come back with its job)."""
    _end_with_parent(parent)
    for name in THREAD_VARIABLES:
        os.environ[name] = "1"
    sys.stdout = open(os.devnull, "w")
    from helpers.experiment.run.quiet import silence_banners
    silence_banners()                          # the libraries' known import banners (SoX, flash-attn)
    from helpers.experiment.run.process import process_settings
    process_settings(threads=1)


def run_jobs(P, fn, jobs: list, desc: str | None = None) -> list:
    """[fn(P, job) for job in jobs] on `worker_count(P, len(jobs))` processes; results in the jobs' order. `fn` must
    be a module-level function (it is pickled by name). A job's exception is raised here, the other jobs cancelled."""
    workers = worker_count(P, len(jobs))
    bar = tqdm(total=len(jobs), desc=desc, disable=desc is None)
    if workers == 1:
        results = []
        for job in jobs:
            results.append(fn(P, job))
            bar.update(1)
        bar.close()
        return results
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_one_thread,
                               initargs=(os.getpid(),))
    try:
        futures = [pool.submit(fn, P, job) for job in jobs]
        for future in futures:
            future.add_done_callback(lambda _: bar.update(1))
        results = [future.result() for future in futures]
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        bar.close()
    pool.shutdown(wait=True)
    return results
