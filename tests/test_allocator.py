"""The allocator settings: a freed large tensor's memory is reused, not faulted in again."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from landcover.allocator import allocator_is_tuned_elsewhere

# In a fresh process: malloc, write and free 96 MB (what a large tensor is on the CPU), then count
# the page faults of doing it again: glibc's defaults give it back to the system (munmap) and
# fault it in anew; tuned, the heap keeps it for the next one.
PROBE = """
import ctypes, json, resource
from landcover.allocator import tune_allocator
tuned = tune_allocator()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
SIZE = 96 * 1024 * 1024
def faults_of_one_block():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = libc.malloc(SIZE)
    libc.memset(block, 1, SIZE)
    libc.free(block)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults_of_one_block()
print(json.dumps({"tuned": tuned, "faults": min(faults_of_one_block() for _ in range(3))}))
"""

PAGES = 96 * 1024 * 1024 // 4096


def _probe(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not allocator_is_tuned_elsewhere({k: v})}
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=120,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_freed_large_tensor_is_reused_without_page_faults() -> None:
    default = _probe(LANDCOVER_MALLOC="default")
    tuned = _probe()
    assert default["tuned"] is False and tuned["tuned"] is True
    assert default["faults"] > PAGES // 2  # every page faulted in again
    assert tuned["faults"] < PAGES // 20  # the heap's memory, reused


def test_the_users_own_allocator_choice_is_left_alone() -> None:
    assert allocator_is_tuned_elsewhere({"LANDCOVER_MALLOC": "default"})
    assert allocator_is_tuned_elsewhere({"MALLOC_ARENA_MAX": "2"})
    assert allocator_is_tuned_elsewhere({"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"})
    assert allocator_is_tuned_elsewhere({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"})
    assert not allocator_is_tuned_elsewhere({"PATH": "/usr/bin", "LANDCOVER_MALLOC": ""})
    probe = _probe(MALLOC_ARENA_MAX="2")
    assert probe["tuned"] is False
