"""Freed numpy buffers kept in the heap while a search prices: no page faults per temporary array.

The grid evaluator (hpdsl/cost/price/grid.py, grid_ranks.py) makes thousands of
temporaries of up to ranks × CHUNK floats, megabytes each. glibc's malloc serves
a block past its mmap threshold with a fresh mapping, every page faulted in and
zeroed, and gives freed memory at the top of the heap back to the system, so a
temporary can pay its page faults again on every pass; the thresholds adapt
only to the blocks freed so far, so how fast a search runs depended on what
the process had allocated before it. Setting both thresholds once keeps freed
blocks in the heap for the next temporary (bench/bench_search_e2e.py: the
search about a fifth faster). Off glibc (mallopt missing or refusing) nothing
changes.
"""

from __future__ import annotations

import sys
from functools import cache

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""mallopt's parameter numbers (glibc malloc.h)."""
MMAP_THRESHOLD = 32 << 20
"""Blocks up to this many bytes come from the heap: glibc's own ceiling for its adaptive threshold."""
TRIM_THRESHOLD = 128 << 20
"""Free memory at the heap's top kept for reuse before any is given back."""


@cache
def keep_freed_memory() -> bool:
    """Set the C allocator to reuse freed blocks (once per process); return whether it took."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
