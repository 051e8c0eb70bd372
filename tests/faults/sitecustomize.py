"""Faults injected into asr-batch by the tests, never by asr-batch itself: a process started with
this folder on PYTHONPATH and ASR_BATCH_FAULT set (`conftest.fault_env`) kills itself (SIGKILL) at
the step named, or stalls there, to prove what an interruption leaves (tests/e2e/test_safety.py).
Dask's worker processes inherit the environment, so a fault in a task reaches them too.

Steps: `batch` (a task starts converting its batch), `carve` (a task starts carving a previous batch),
`batches` (every task is done), `final` (the
final stage has written one table by DuckDB's COPY, and goes on to the next), `swap` (the new
output is complete, not yet swapped in), `swapped` (swapped in, the run not finished), `swap-aside`
(the previous output renamed aside, where the folders are not exchanged at once).
`once:<step>`: only the first process to reach the step (it creates the file ASR_BATCH_FAULT_ONCE
names); `stall:<step>`: wait there for a minute, or until the run is stopped (after creating the
file ASR_BATCH_FAULT_STALLED names: a test waits for it, not for a time).
"""

import os
import signal
import threading
from pathlib import Path

FAULT_ENV = "ASR_BATCH_FAULT"
STALLED_ENV = FAULT_ENV + "_STALLED"
ONCE_ENV = FAULT_ENV + "_ONCE"


def fault(step: str, event=None) -> None:
    asked = os.environ.get(FAULT_ENV)
    if asked == step:
        os.kill(os.getpid(), signal.SIGKILL)
    elif asked == f"once:{step}":
        try:
            os.close(os.open(os.environ[ONCE_ENV], os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return
        os.kill(os.getpid(), signal.SIGKILL)
    elif asked == f"stall:{step}":
        if os.environ.get(STALLED_ENV):
            Path(os.environ[STALLED_ENV]).touch()
        # a stalled batch still stops when the run is told to; elsewhere the stall lasts until the
        # test ends the process
        (event or threading.Event()).wait(60)


def before(module, name: str, step: str, stop_arg: int | None = None) -> None:
    """Fault at `step` before `module.name` runs (the stop's event from its positional argument `stop_arg`)."""
    real = getattr(module, name)

    def patched(*args, **kwargs):
        stop = kwargs.get("stop", args[stop_arg] if stop_arg is not None and len(args) > stop_arg else None)
        fault(step, getattr(stop, "event", None))
        return real(*args, **kwargs)

    setattr(module, name, patched)


def after(module, name: str, step: str) -> None:
    """Fault at `step` after `module.name` returns."""
    real = getattr(module, name)

    def patched(*args, **kwargs):
        result = real(*args, **kwargs)
        fault(step)
        return result

    setattr(module, name, patched)


def install() -> None:
    from batch.incremental import carving
    from batch.output import folder
    from batch.run import schedule, task

    before(task, "convert_batch", "batch", stop_arg=6)
    before(carving, "carve", "carve")
    after(schedule, "run", "batches")
    after(folder.Output, "copy", "final")
    before(folder, "_swap", "swap")
    before(folder, "_rename_new", "swap")
    after(folder, "_swap", "swapped")
    after(folder, "_move_aside", "swap-aside")


if os.environ.get(FAULT_ENV):
    install()
