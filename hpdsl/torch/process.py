"""How a worker process of a distributed job ends once its work is done and its process group destroyed.

The worker leaves with `os._exit` rather than through the interpreter's finalization: gloo's and
the c10d store's C++ threads can still be joinable when finalization destroys the objects that own
them, and `std::terminate` then aborts a rank whose work had finished ("terminate called without an
active exception", SIGABRT: docs/trainer.md, "How a job ends"). Nothing is left to run at that point:
the results are written, the streams flushed here, and a multiprocessing queue's feeder thread
joined by the caller first.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def leave(code: int = 0) -> NoReturn:
    """Flush stdout and stderr, then end this process with `code`, skipping interpreter finalization."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or a broken pipe: nothing more can be written to it
            pass
    os._exit(code)
