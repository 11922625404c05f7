#!/usr/bin/env python
"""dpmt's own CSV reader against pyarrow.csv on an ML-20M-size ratings.csv (issue 26).

Writes (once) a ``userId,movieId,rating,timestamp`` file of N rows with ML-20M's shape
(138,493 users, 26,744 items, half-star ratings), then reads it in fresh subprocesses, each
reporting wall seconds and peak RSS:

* ``dpmt``: :func:`dpmt.data.load_file` (the byte parser of :mod:`dpmt.data.parsing`, with
  its checks: rating range, duplicates, line numbers in errors) → Ratings;
* ``arrow``: ``pyarrow.csv.read_csv`` (multi-threaded) → :func:`dpmt.data.as_ratings`
  (Ratings.from_raw's checks: one entry per pair, id ranges; no rating-range check);
* ``arrow-read``: ``pyarrow.csv.read_csv`` alone (what the parse itself costs).

    python benchmarks/parser_bench.py --rows 20000263 --file /tmp/ml20m.csv
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

CODE = {
    "dpmt": "from dpmt.data import load_file; r = load_file(PATH); n = r.nnz",
    "arrow": ("import pyarrow.csv as pc; from dpmt.data import as_ratings; "
              "r = as_ratings(pc.read_csv(PATH)); n = r.nnz"),
    "arrow-read": "import pyarrow.csv as pc; t = pc.read_csv(PATH); n = t.num_rows",
}


def write_file(path: str, rows: int, seed: int = 0) -> None:
    """Distinct (user, item) pairs with a heavy-tailed item popularity, in random order."""
    rng = np.random.default_rng(seed)
    users, items = 138_493, 26_744
    key = np.zeros(0, np.int64)
    while len(key) < rows:
        n = int((rows - len(key)) * 1.3) + 1000
        u = rng.integers(1, users + 1, n)
        i = (rng.pareto(1.2, n) * 50).astype(np.int64) % items + 1
        key = np.unique(np.concatenate([key, u * (items + 1) + i]))
    key = rng.permutation(key)[:rows]
    u, i = key // (items + 1), key % (items + 1)
    r = rng.integers(1, 11, rows) / 2.0
    t = rng.integers(789_652_009, 1_427_784_002, rows)
    with open(path, "w") as f:
        f.write("userId,movieId,rating,timestamp\n")
        for lo in range(0, rows, 1_000_000):
            hi = min(rows, lo + 1_000_000)
            f.write("".join(f"{a},{b},{c:g},{d}\n" for a, b, c, d in zip(
                u[lo:hi].tolist(), i[lo:hi].tolist(), r[lo:hi].tolist(), t[lo:hi].tolist())))


def measure(kind: str, path: str) -> dict:
    code = ("import resource, time; t0 = time.perf_counter(); PATH = " + repr(path) + "; "
            + CODE[kind] + "; import json; print(json.dumps({'seconds': time.perf_counter() - "
            "t0, 'rows': int(n), 'peak_rss_bytes': resource.getrusage(resource.RUSAGE_SELF)"
            ".ru_maxrss * 1024}))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, JAX_PLATFORMS="cpu"))
    if p.returncode:
        return {"error": p.stderr.strip().splitlines()[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000_263)
    ap.add_argument("--file", default="/tmp/ml20m-like.csv")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if not os.path.exists(args.file):
        t0 = time.perf_counter()
        write_file(args.file, args.rows)
        print(f"wrote {args.file} ({os.path.getsize(args.file) / 2**20:.0f} MiB) in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    out = {k: measure(k, args.file) for k in CODE}
    for k, v in out.items():
        print(f"{k:>11}: " + (v["error"] if "error" in v else
                              f"{v['seconds']:.2f} s, peak RSS {v['peak_rss_bytes'] / 2**30:.2f} "
                              f"GiB, {v['rows']:,} rows"), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
