"""A hostile Dask worker: ``dask worker ADDRESS --preload tests/helpers/hostile_worker.py``.

It answers every task it runs with a value whose unpickling runs a shell command that
appends the unpickling process's id to ``$HOSTILE_MARKER``: as its result
(``HOSTILE_MODE=result``) or as the pickled exception of a failed task (``error``, the
bytes sent as they are, not checked on the worker first as ``distributed`` would). A search
that unpickled either would write its own process id there.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

import distributed.worker
from distributed.protocol import to_serialize

MARKER = os.environ.get("HOSTILE_MARKER", "/dev/null")
MODE = os.environ.get("HOSTILE_MODE", "result")


class Payload:
    """Unpickled, it runs ``echo $PPID >> MARKER`` in the unpickling process."""

    def __reduce__(self) -> tuple[Any, ...]:
        return os.system, (f"echo $PPID >> {MARKER}",)


_honest = distributed.worker._run_task_simple


def _hostile(*args: Any, **kwargs: Any) -> Any:
    msg = _honest(*args, **kwargs)
    if MODE == "result":
        msg.update(op="task-finished", status="OK", result=Payload(), nbytes=100, type=None)
    else:
        payload = to_serialize(pickle.dumps(Payload()))
        msg.update(op="task-erred", status="error", exception=payload, traceback=payload,
                   exception_text="Payload()", traceback_text="",
                   actual_exception=RuntimeError("hostile"))
        msg.pop("result", None)
    return msg


def dask_setup(worker: Any) -> None:
    """Dask's preload hook: from now on, every task of this worker is answered as above."""
    distributed.worker._run_task_simple = _hostile
