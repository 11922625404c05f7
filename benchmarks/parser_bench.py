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

``--rejects`` instead writes small files, each with one thing real files hold (quoted
fields, text ids, a duplicated pair, a missing field, ...), and prints what each reader
makes of it (rows, or the first line of its error). The measured tables are in
``benchmarks/parser_bench.md``.

    python benchmarks/parser_bench.py --rows 20000263 --file /tmp/ml20m.csv
    python benchmarks/parser_bench.py --rejects
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
            + CODE[kind] + "; import json; u = resource.getrusage(resource.RUSAGE_SELF); "
            "print(json.dumps({'seconds': time.perf_counter() - t0, 'cpu_seconds': "
            "u.ru_utime + u.ru_stime, 'rows': int(n), 'peak_rss_bytes': u.ru_maxrss * 1024}))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, JAX_PLATFORMS="cpu"))
    if p.returncode:
        return {"error": p.stderr.strip().splitlines()[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


_H = "userId,movieId,rating,timestamp\n"
_OK = "2,3,4,101\n"
#: one thing real files hold per case (a second, plain row after it)
REJECT_CASES = {
    "plain": _H + "1,2,3.5,100\n" + _OK,
    "quoted fields": _H + '"1","22","3.5","100"\n' + _OK,
    "text ids": _H + "u1,tt0111161,3.5,100\nu2,tt0068646,4,101\n",
    "quoted text with a comma": _H + '"a,b",x,3.5,100\n' + _OK,
    "ids 007 and 7": _H + "007,2,3.5,100\n7,2,4,101\n",
    "id 1.0": _H + "1.0,2,3.5,100\n" + _OK,
    "duplicate pair": _H + "1,2,3.5,100\n1,2,4,101\n",
    "missing field": _H + "1,2,3.5\n" + _OK,
    "extra field": _H + "1,2,3.5,100,9\n" + _OK,
    "empty id": _H + ",2,3.5,100\n" + _OK,
    "negative id": _H + "-1,2,3.5,100\n" + _OK,
    "id >= 2**63": _H + "9223372036854775808,2,3.5,100\n" + _OK,
    "empty rating": _H + "1,2,,100\n" + _OK,
    "text rating": _H + "1,2,abc,100\n" + _OK,
    "nan rating": _H + "1,2,nan,100\n" + _OK,
    "rating 6 (scale 0.5..5)": _H + "1,2,6,100\n" + _OK,
    "fractional timestamp": _H + "1,2,3.5,100.5\n" + _OK,
    "unterminated quote": _H + '"1,2,3.5,100\n' + _OK,
    "blank line": _H + "1,2,3.5,100\n\n" + _OK,
    "CRLF, BOM": "\ufeff" + (_H + "1,2,3.5,100\n" + _OK).replace("\n", "\r\n"),
    "header only": _H,
    "no header": "1,2,3.5,100\n" + _OK,
}


def rejects(folder: str) -> dict:
    """{case: {reader: outcome}} for :data:`REJECT_CASES` (see the module docstring)."""
    import pyarrow.csv as pc

    from dpmt.data import as_ratings, load_file

    def outcome(fn):
        try:
            r = fn()
        except Exception as e:                               # noqa: BLE001 - reported
            return f"{type(e).__name__}: {str(e).splitlines()[0][:110]}"
        return (f"ok: {r.nnz} rows, users {','.join(map(str, r.user_ids.tolist()))}, "
                f"items {','.join(map(str, r.item_ids.tolist()))}")

    os.makedirs(folder, exist_ok=True)
    out = {}
    for k, (case, text) in enumerate(REJECT_CASES.items()):
        path = os.path.join(folder, f"case{k}.csv")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        out[case] = {"dpmt": outcome(lambda p=path: load_file(p)),
                     "arrow": outcome(lambda p=path: as_ratings(pc.read_csv(p)))}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000_263)
    ap.add_argument("--file", default="/tmp/ml20m-like.csv")
    ap.add_argument("--json", default=None)
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per reader, interleaved; the fastest is reported (the machine "
                         "may be shared)")
    ap.add_argument("--readers", default=",".join(CODE),
                    help=f"comma-separated subset of {', '.join(CODE)}")
    ap.add_argument("--rejects", action="store_true",
                    help="what each reader makes of small files with quotes, text ids, "
                         "duplicates, bad rows ... (instead of the timing)")
    args = ap.parse_args(argv)
    if args.rejects:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            out = rejects(tmp)
        for case, v in out.items():
            print(f"{case}\n  dpmt : {v['dpmt']}\n  arrow: {v['arrow']}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=2)
        return 0
    if not os.path.exists(args.file):
        t0 = time.perf_counter()
        write_file(args.file, args.rows)
        print(f"wrote {args.file} ({os.path.getsize(args.file) / 2**20:.0f} MiB) in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    readers = [k.strip() for k in args.readers.split(",") if k.strip()]
    bad = [k for k in readers if k not in CODE]
    if bad:
        ap.error(f"--readers: unknown {', '.join(bad)} (have {', '.join(CODE)})")
    runs: dict[str, list] = {k: [] for k in readers}
    for _ in range(max(1, args.repeat)):
        for k in readers:
            runs[k].append(measure(k, args.file))
    out = {}
    for k, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        out[k] = (dict(min(ok, key=lambda r: r["seconds"]), runs=len(rs),
                       all_seconds=[round(r["seconds"], 2) for r in ok]) if ok else rs[0])
    for k, v in out.items():
        print(f"{k:>11}: " + (v["error"] if "error" in v else
                              f"{v['seconds']:.2f} s ({v['cpu_seconds']:.1f} s CPU), peak RSS "
                              f"{v['peak_rss_bytes'] / 2**30:.2f} GiB, {v['rows']:,} rows"),
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
