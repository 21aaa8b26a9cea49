"""glibc malloc tuning for the long-running server processes (gateway, standalone, bookie).

glibc raises its mmap threshold each time a large mmapped block is freed (up to 32 MiB), after
which large buffers (Kafka frames, batches up to 1 MiB, bookie responses) come from the main
heap; freed among long-lived small objects they leave holes glibc keeps: a soak of mixed
1 KiB-1 MiB messages showed 510 MB of heap for 280 MB in use. A fixed threshold keeps large
buffers in their own mappings, returned to the system when freed (gateway, standalone,
recovery).

A bookie's large buffers are the add frames its write cache keeps until a flush and then frees
in arrival order, so heap chunks are reused as they come back, and its memory is bounded by its
caches. There a mapping per frame (mmap, a page fault and zeroing per 4 KiB, munmap) was a
quarter of its CPU per GB produced; so the bookie takes large buffers from the heap and keeps
what it frees (the trim threshold) for the next frames instead of returning it to the system
and faulting it back in. Elsewhere: nothing."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform

from store.framing import MAPPED_FROM

log = logging.getLogger(__name__)

MMAP_THRESHOLD = MAPPED_FROM  # 128 KiB, glibc's own initial value, now fixed
HEAP_MMAP_THRESHOLD = 32 << 20  # reuse_heap: glibc's largest (64-bit), above any frame
HEAP_TRIM_THRESHOLD = 64 << 20  # reuse_heap: free heap kept for reuse
_M_TRIM_THRESHOLD = -1  # from malloc.h
_M_MMAP_THRESHOLD = -3


def tune_malloc(*, reuse_heap: bool = False) -> bool:
    """Fix glibc's mmap threshold, at 128 KiB or (reuse_heap, for bookies) above any frame with
    freed heap kept for reuse. True if applied; False on another C library."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    options = [(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)]
    if reuse_heap:
        options = [(_M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, HEAP_TRIM_THRESHOLD)]
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return all(libc.mallopt(option, value) for option, value in options)
    except (OSError, AttributeError) as e:
        log.debug("mallopt unavailable: %s", e)
        return False
