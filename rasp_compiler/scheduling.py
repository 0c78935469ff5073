"""Run many independent tasks (experiment runs, differential checks) on one machine or a cluster.

One scheduling loop, ``run_tasks``, and three small backends that only start a task and wait for
one to finish:

* ``InProcess``: one task at a time in this process (no pickling: tests can patch what it calls);
* ``LocalProcesses``: a pool of N spawned processes on this machine;
* ``RayCluster``: each task a Ray task (``pip install 'rasp-compiler[ray]'``), on the cluster at
  an address (``ray start --head`` prints it) or on a Ray instance started here.

The caller's ``on_result`` runs in this process, so results are written by one process whatever
the backend (a Ray worker on another machine never needs the caller's directories), and
``stop()`` is asked before each task starts (a time budget): tasks already started finish, the
rest are left for the next invocation.  A task's exception is raised here as itself.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Protocol

from rasp_compiler.errors import UserError

Task = tuple[Callable[..., Any], tuple]


class Backend(Protocol):
    slots: int                                   # tasks that may run at once

    def submit(self, fn: Callable[..., Any], args: tuple) -> Any: ...   # returns a handle

    def wait(self, handles: list) -> tuple[Any, Any]: ...   # (a finished handle, its result)

    def close(self) -> None: ...


def run_tasks(backend: Backend, fn: Callable[..., Any], items: Iterable[tuple[Any, tuple]],
              on_result: Callable[[Any, Any], None], stop: Callable[[], bool] | None = None) -> list:
    """Run ``fn(*args)`` for each ``(key, args)`` of ``items``, at most ``backend.slots`` at a time;
    ``on_result(key, result)`` as each finishes (in finishing order).  Returns the keys never
    started because ``stop()`` said so.  The backend is closed at the end, also on an error."""
    queue = list(items)[::-1]
    running: dict[Any, Any] = {}                  # handle -> key
    left: list = []
    try:
        while queue or running:
            while queue and len(running) < backend.slots:
                if stop is not None and stop():   # the tasks already started still finish
                    left, queue = [key for key, _ in reversed(queue)], []
                    break
                key, args = queue.pop()
                running[backend.submit(fn, args)] = key
            if not running:
                break
            handle, result = backend.wait(list(running))
            on_result(running.pop(handle), result)
        return left
    finally:
        backend.close()


class InProcess:
    """Each task runs in this process when it is waited for."""

    slots = 1

    def __init__(self) -> None:
        self.pending: dict[int, Task] = {}

    def submit(self, fn, args):
        handle = len(self.pending)
        self.pending[handle] = (fn, args)
        return handle

    def wait(self, handles):
        fn, args = self.pending.pop(handles[0])
        return handles[0], fn(*args)

    def close(self) -> None:
        pass


class LocalProcesses:
    """``jobs`` spawned worker processes on this machine (each task in a fresh interpreter's
    memory, so one run's threads and allocations never touch another's)."""

    def __init__(self, jobs: int) -> None:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        self.slots = jobs
        self.pool = ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"))

    def submit(self, fn, args):
        return self.pool.submit(fn, *args)

    def wait(self, handles):
        from concurrent.futures import FIRST_COMPLETED, wait

        done, _ = wait(handles, return_when=FIRST_COMPLETED)
        handle = next(h for h in handles if h in done)   # the first in submission order
        return handle, handle.result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


RAY_INSTALL = "pip install 'rasp-compiler[ray]' (or pip install ray) on this machine and every worker"


class RayCluster:
    """Each task a Ray task of ``cpus_per_task`` CPUs: on the cluster at ``address``, or on a Ray
    instance started here (``jobs`` CPUs, default this machine's) and stopped at ``close``."""

    def __init__(self, address: str | None = None, jobs: int | None = None, cpus_per_task: int = 1) -> None:
        try:
            import ray
        except ImportError:
            raise UserError("--ray needs Ray, which is not installed", RAY_INSTALL) from None
        self.ray = ray
        self.started_here = not ray.is_initialized()
        if self.started_here:
            options = {"address": address} if address else {
                "num_cpus": jobs or os.cpu_count() or 1, "include_dashboard": False}
            try:
                ray.init(logging_level="WARNING", log_to_driver=False, **options)
            except (ConnectionError, RuntimeError, ValueError) as err:
                where = f"the Ray cluster at {address}" if address else "a local Ray instance"
                raise UserError(f"--ray: cannot connect to {where} ({str(err).splitlines()[0]})",
                                "start one with `ray start --head` and pass the address it prints "
                                "(HOST:6379), or give --ray no address to start one here") from None
        cpus = int(ray.cluster_resources().get("CPU", 1))     # a cluster: every node's
        self.cpus_per_task = max(1, cpus_per_task)
        self.slots = max(1, (min(jobs, cpus) if jobs else cpus) // self.cpus_per_task)
        self.remote: dict[Callable, Any] = {}

    def submit(self, fn, args):
        if fn not in self.remote:
            self.remote[fn] = self.ray.remote(num_cpus=self.cpus_per_task)(fn)
        return self.remote[fn].remote(*args)

    def wait(self, handles):
        ready, _ = self.ray.wait(handles, num_returns=1)
        try:
            return ready[0], self.ray.get(ready[0])
        except self.ray.exceptions.RayTaskError as err:   # the task's own exception, as raised there
            cause = getattr(err, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None
            raise

    def close(self) -> None:
        if self.started_here:
            self.ray.shutdown()


def backend(jobs: int | None = None, ray: bool = False, address: str | None = None) -> Backend:
    """The backend for ``--jobs N`` and ``--ray [ADDRESS]``: Ray when asked, processes for N > 1,
    else this process."""
    if ray:
        return RayCluster(address, jobs)
    if jobs and jobs > 1:
        return LocalProcesses(jobs)
    return InProcess()
