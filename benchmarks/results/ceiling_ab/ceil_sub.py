"""ceiling_bench.py's DEFLATE rows (landcover's process settings) for one tree of landcover.

Usage (from a folder outside both trees, so that the editable install does not win):
    PYTHONPATH=TREE python ceil_sub.py TREE OUT.json [REPEATS]
"""

import importlib
import json
import sys
import tempfile
from pathlib import Path

repo = Path(sys.argv[1])
sys.path[:0] = [str(repo / "benchmarks"), str(repo)]
cb = importlib.import_module("ceiling_bench")
make_checkpoint = importlib.import_module("predict_bench").make_checkpoint
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
cache = Path("/tmp/ceilcache")
cache.mkdir(exist_ok=True)
rows = []
with tempfile.TemporaryDirectory(prefix="lc-ceil-") as tmp:
    checkpoint = make_checkpoint(repo / "configs" / "default.yaml", cache)
    tile = cb.make_tile(*cb.FULL, "deflate", cache)
    for probs in (False, True):
        for threads in (1, 2):
            row = cb._row(tile, checkpoint, "deflate", probs, threads, repeats, Path(tmp))
            print(json.dumps(row), flush=True)
            rows.append(row)
Path(sys.argv[2]).write_text(json.dumps(rows, indent=1))
