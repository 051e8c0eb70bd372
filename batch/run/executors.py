"""Where tasks run (`--executor`): threads of this process (`local`, the default), or Dask workers,
started on this machine (`dask`: a `distributed.LocalCluster`) or of an existing scheduler
(`tcp://HOST:PORT`). An executor takes a `Task` and gives a `concurrent.futures.Future` of its
`TaskResult`; the pipeline decides what to submit and when, the engine where and how often: Dask
runs a task again on another worker when its worker dies (`distributed.scheduler.allowed-failures`),
which the task's part names make safe (batch/run/task.py). docs/decisions/011-executors.md.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from batch.errors import BatchError
from batch.run import task as tasks
from batch.run.memory import Stop, default_workers

LOCAL = "local"
DASK = "dask"
INSTALL_DASK = "pip install 'asr-batch[dask]'"
# How long the driver waits for an external scheduler to answer, in seconds
CONNECT_SECONDS = 30
# The messages Dask's streams keep of what they sent, and its other logs "for developers"
# (`distributed.admin.low-level-log-length`, 1,000 by default): each message sent to submit a task
# holds the task's pickle, about 23 KiB a task in the driver of a LocalCluster (docs/decisions/011-executors.md)
LOG_LENGTH = 32


class ExecutorError(BatchError):
    """An executor cannot run this run's tasks (no Dask, a scheduler out of reach, a worker that
    cannot see an input or the run folder)."""


class Local:
    """`workers` tasks at once on threads of this process (DuckDB and Polars release the GIL), each
    told by the run's stop when to stop (its DuckDB statements are interrupted)."""

    name = LOCAL

    def __init__(self, workers: int, stop: Stop) -> None:
        self.workers, self.per_machine = workers, workers
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="asr-batch")
        self._stop = stop

    def check(self, run_folder: Path, roots: list[Path]) -> None:
        """Nothing to check: the tasks run where discovery ran."""

    def submit(self, task: tasks.Task) -> Future:
        return self._pool.submit(tasks.run, task, self._stop)

    def close(self, *, cancel: bool = False) -> None:
        self._pool.shutdown(wait=True, cancel_futures=cancel)


class Dask:
    """Tasks on Dask workers: a `LocalCluster` of `workers` single-threaded worker processes started
    for the run (`address` None), or the workers of the scheduler at `address`. A task runs alone on
    its worker thread; `per_machine` (the most worker threads of one host) tells a task how many
    share its machine's CPUs."""

    name = DASK

    def __init__(self, address: str | None, workers: int) -> None:
        try:
            import dask
            from distributed import Client, LocalCluster
        except ImportError as exc:
            raise ExecutorError(
                f"--executor {address or DASK} needs Dask's distributed package, an optional extra: {INSTALL_DASK}"
            ) from exc
        self._cluster = None
        # (read as the scheduler, its streams and the client's are made: a worker that joins later keeps the default)
        with dask.config.set({"distributed.admin.low-level-log-length": LOG_LENGTH}):
            try:
                if address is None:
                    self._cluster = LocalCluster(
                        n_workers=workers, threads_per_worker=1, processes=True, silence_logs=logging.ERROR,
                        # no dashboard; the scheduler's HTTP server (health checks) on a free port
                        dashboard_address=":0", scheduler_kwargs={"dashboard": False},
                    )
                    self._client = Client(self._cluster, set_as_default=False)
                else:
                    self._client = Client(address, timeout=CONNECT_SECONDS, set_as_default=False)
            except (OSError, TimeoutError) as exc:
                self._close_cluster()
                raise ExecutorError(f"--executor {address or DASK}: cannot reach the Dask scheduler ({exc})") from exc
        threads = {a: w["nthreads"] for a, w in self._client.scheduler_info(n_workers=-1)["workers"].items()}
        if not threads:
            self.close()
            raise ExecutorError(f"--executor {address}: the Dask scheduler has no workers; start some (dask worker {address})")
        hosts = Counter()
        for worker, n in threads.items():
            hosts[_host(worker)] += n
        self.workers, self.per_machine = sum(threads.values()), max(hosts.values())
        self._pool = self._client.get_executor(pure=False)

    def check(self, run_folder: Path, roots: list[Path]) -> None:
        """Refuse the run when a worker cannot see an input root or cannot write the run folder
        (asked once per worker, before any task is submitted)."""
        answers = self._client.run(_unseen, str(run_folder), [str(r) for r in roots])
        problems = {worker: unseen for worker, unseen in answers.items() if unseen}
        if problems:
            worker, unseen = min(problems.items())
            more = f" (and {len(problems) - 1} more workers)" if len(problems) > 1 else ""
            raise ExecutorError(
                f"Dask worker {worker}{more} cannot {'; cannot '.join(unseen)}. Inputs and the output folder must be "
                "on a file system every worker sees, under the same paths (a shared mount: README, \"On a cluster\")."
            )

    def submit(self, task: tasks.Task) -> Future:
        # the task goes as its pickle: the scheduler passes one bytes object on instead of building
        # an object per input file of it (a LocalCluster's scheduler runs in this process)
        return self._pool.submit(tasks.run_pickled, pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL))

    def close(self, *, cancel: bool = False) -> None:
        """Stop the tasks (cancel: those not finished are cancelled; a LocalCluster's worker processes
        end with it) and disconnect."""
        try:
            self._pool.shutdown(wait=not cancel)
        finally:
            self._client.close()
            self._close_cluster()

    def _close_cluster(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def _host(address: str) -> str:
    return address.split("://")[-1].rsplit(":", 1)[0]


def _unseen(run_folder: str, roots: list[str]) -> list[str]:
    """What this worker cannot see or write: run on every worker by `Dask.check`."""
    problems = [f"see the input {root}" for root in roots if not os.path.exists(root)]
    if not os.path.isdir(run_folder) or not os.access(run_folder, os.W_OK | os.X_OK):
        problems.append(f"write the run folder {run_folder}")
    return problems


class Shared:
    """The run's one executor (`make`), started when its first tasks come: the grown groups' deltas
    and then the batches run on the same workers; `close` ends it (the pipeline's, once the tasks are
    done or the run stops)."""

    def __init__(self, executor: str, workers: int | None, stop: Stop, run_folder: Path, roots: list[Path]) -> None:
        self.executor, self.stop, self.run_folder, self.roots = executor, stop, run_folder, roots
        self.workers = workers or default_workers()
        self._pool: Local | Dask | None = None

    def pool(self, tasks: int) -> Local | Dask:
        """The executor, started (and its workers checked) when first asked for: with as many workers
        as `tasks` (the tasks the run knows of then), at most `workers` (`default_workers` when None)."""
        if self._pool is None:
            self._pool = make(self.executor, max(1, min(self.workers, tasks)), self.stop)
            try:
                self._pool.check(self.run_folder, self.roots)
            except BaseException:
                self.close(cancel=True)
                raise
        return self._pool

    def run_alone(self, task):
        """Run `task` while no other task runs, and give its result."""
        return self.pool(1).submit(task).result()

    def close(self, *, cancel: bool = False) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.close(cancel=cancel)


def make(executor: str, workers: int, stop: Stop) -> Local | Dask:
    """The executor `--executor` names: local, dask, or a scheduler's address (tcp://HOST:PORT)."""
    if executor == LOCAL:
        return Local(workers, stop)
    if executor == DASK:
        return Dask(None, workers)
    if "://" in executor:
        return Dask(executor, workers)
    raise ExecutorError(f"--executor {executor}: give local, dask, or a Dask scheduler's address (tcp://HOST:PORT)")
