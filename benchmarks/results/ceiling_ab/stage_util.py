"""One tile through predict's per-tile code with the stand-in model: each serial stage's wall
seconds and the process's CPU seconds meanwhile, so its use of the cores.

The stages follow one another on one tile: the decode into memory, the band statistics, the
pipelined window rows (reader, compute and writer threads together), then the publishing of
the class COG and of the probability COG. The process's CPU time is sampled every 50 ms.

Usage (from the repository): PYTHONPATH=. python benchmarks/results/ceiling_ab/stage_util.py
    THREADS TILE CHECKPOINT [--no-probs]   (OMP_WAIT_POLICY=PASSIVE, as landcover sets it)
"""

import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import ceiling_bench as cb

import landcover.inference.predict as predict_module
import landcover.inference.writers as writers
from landcover.allocator import tune_allocator
from landcover.inference.options import PredictOptions
from landcover.inference.predict import TileMapper
from landcover.inference.tileread import TileSource

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds() -> float:
    """This process's user + system CPU seconds (every thread), from /proc."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def main() -> None:
    threads, tile, checkpoint = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    probs = "--no-probs" not in sys.argv
    cb._pin(threads)
    tune_allocator()
    marks: list[tuple[str, float, float]] = []

    def marked(name, fn):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                marks.append((name, start, time.perf_counter()))

        return wrapper

    TileSource.__init__ = marked("decode", TileSource.__init__)
    TileSource.stats = marked("stats", TileSource.stats)
    predict_module.run_pipelined = marked("window rows", predict_module.run_pipelined)
    writers.publish_cog = marked("COG", writers.publish_cog)
    samples: list[tuple[float, float]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append((time.perf_counter(), cpu_seconds()))
            time.sleep(0.05)

    im = cb._stand_in_model(checkpoint)
    out = tempfile.mkdtemp(prefix="lc-stage-")
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    with TileMapper(im, PredictOptions(out=out, preview=False, probs=probs)) as mapper:
        start, cpu = time.perf_counter(), cpu_seconds()
        mapper.submit(tile).result()
        wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    done.set()
    sampler.join()
    shutil.rmtree(out)

    def cpu_at(t: float) -> float:
        return min(samples, key=lambda s: abs(s[0] - t))[1]

    print(f"| stage | wall s | CPU s | cores used of {threads} |")
    print("| --- | --- | --- | --- |")
    print(f"| whole tile | {wall:.2f} | {cpu:.2f} | {cpu / wall / threads:.2f} |")
    for name, a, b in sorted(marks, key=lambda m: m[1]):
        used = cpu_at(b) - cpu_at(a)
        print(f"| {name} | {b - a:.2f} | {used:.2f} | {used / (b - a) / threads:.2f} |")


if __name__ == "__main__":
    main()
