"""A model of memory and communication per private iteration (docs/scaling.md).

What one iteration of private alternating minimisation holds and sends, as functions of
users ``n``, items ``m``, interactions ``nnz``, dimension ``d``, devices ``D`` and processes
``P`` (one per host), for the code as it is (:mod:`dpmt.solvers.sharding`):

Memory per device (bytes)::

    layouts   2 · 9 · π · nnz / D      task + user layout: int32 cols, int32 pos, bool valid
                                       per padded slot (π = padded slots / nnz ≈ 1.4), sharded
    weights   4 · nnz                  float32 w_ij per rating, replicated on every device
    index     4 · (n + m)              the layouts' inverse index, replicated
    factors   2 · 4 · d · (n + m)      U and V (+ the new copy of each), replicated
    fixed     F                        runtime, compiled programs and the bounded working
                                       sets (statistics blocks ≤ GEMM_BLOCK_BYTES, solve
                                       blocks ≤ SOLVE_BLOCK_BYTES): independent of the data

Host memory per process: ``12 · nnz / P`` for the ratings (int32 user, int32 item, float32
value; a process reads its share) and, while the weights are computed, ``8 · nnz / P``
(float64). On CPU the devices *are* host memory, so a process's resident set is the sum over
its devices plus the host part; that sum is what :func:`process_bytes` predicts and what
``dpmt bench`` measures (peak RSS).

Communication per iteration, bytes received per device (ring collectives)::

    user step   all-gather U:     4 · d · n · (D−1)/D
    item step   all-gather V:     4 · d · m · (D−1)/D
    noisy GD    per step:         4 · d · m · (D−1)/D  (clipped rows)
                                + 2 · 4 · n · (D−1)/D  (all-reduce of per-user norms)

The released Gramian, the noise and the solves need no communication (noise of item i is
drawn from ``fold_in(key, i)`` on whichever device holds item i).

Sharded data (``ExecutionConfig(sharded_data=True)``, one device per process; each process
holds only its users, :func:`sharded_process_bytes`), per process::

    ratings + weights   (12 + 8 + 4) · nnz / P      its users' ratings, float64 and float32 w
    layouts             2 · 9 · π · nnz / P
    users               (2 · 4 · d + 4) · n / P     its U rows (+ the new copy), index
    items               2 · 4 · d · m + 4 · m       V replicated (+ the new copy), index
    gd slots            2 · 8 · π · nnz / P         noisy GD: w_ij, y_ij per padded slot
    exchange            P · S                       the all-gathered partial sums of one
                                                    release: S = 4·m·(d² + d) for SSP's
                                                    statistics, 4·m·d per noisy-GD step

and every release receives (P − 1) · S bytes per process (the all-gather).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

GIB = 2.0 ** 30
# bytes per padded slot of a layout: int32 column + int32 position + bool valid
SLOT_BYTES = 9
# runtime + compiled programs + bounded working sets; measured as the iterations' peak RSS
# minus the data-dependent terms on ML-100K (`dpmt bench --dataset ml-100k`): see
# docs/scaling.md, where it is checked against the larger sizes.
DEFAULT_FIXED_BYTES = 0.75 * GIB


@dataclasses.dataclass(frozen=True)
class Problem:
    """Sizes of one training problem. ``padding``: padded slots per interaction (π; 1.27 on
    Zipf-like data with the power-of-two grid's buckets, which data at scale get: a small
    data set's layout keeps fewer buckets and pads more, ``dpmt.solvers.layout``)."""

    n_users: int
    n_items: int
    interactions: int
    dim: int
    devices: int = 1
    processes: int = 1
    padding: float = 1.27
    gd_steps: int = 0

    def __post_init__(self):
        for f in ("n_users", "n_items", "interactions", "dim", "devices", "processes"):
            if int(getattr(self, f)) < 1:
                raise ValueError(f"{f} must be >= 1 (got {getattr(self, f)})")
        if self.devices % self.processes:
            raise ValueError("devices must be a multiple of processes (equal devices per host)")
        if self.padding < 1:
            raise ValueError(f"padding must be >= 1 (got {self.padding})")


def device_bytes(p: Problem, fixed_bytes: float = DEFAULT_FIXED_BYTES) -> dict:
    """Memory of one device during an iteration, by component (see the module docstring)."""
    n, m, nnz, d, D = p.n_users, p.n_items, p.interactions, p.dim, p.devices
    out = {"layouts": 2 * SLOT_BYTES * p.padding * nnz / D,
           "weights": 4.0 * nnz,
           "index": 4.0 * (n + m),
           "factors": 2 * 4.0 * d * (n + m),
           "fixed": float(fixed_bytes)}
    out["total"] = sum(out.values())
    return out


def process_bytes(p: Problem, fixed_bytes: float = DEFAULT_FIXED_BYTES) -> dict:
    """Resident memory of one process (host part + its ``D/P`` devices, which on CPU live in
    host memory; the fixed part counted once per process)."""
    per = device_bytes(p, fixed_bytes)
    k = p.devices // p.processes
    nnz = p.interactions / p.processes
    out = {"host_ratings": 12.0 * nnz, "host_weights_float64": 8.0 * nnz,
           "devices": k * (per["total"] - per["fixed"]), "fixed": float(fixed_bytes)}
    out["total"] = sum(out.values())
    return out


def sharded_process_bytes(p: Problem, solver: str = "gd",
                          fixed_bytes: float = DEFAULT_FIXED_BYTES) -> dict:
    """Resident memory of one process with sharded data (see the module docstring)."""
    n, m, nnz, d, P = p.n_users, p.n_items, p.interactions, p.dim, p.processes
    s = 4.0 * m * (d * d + d) if solver == "ssp" else 4.0 * m * d
    out = {"ratings_weights": 24.0 * nnz / P,
           "layouts": 2 * SLOT_BYTES * p.padding * nnz / P,
           "users": (2 * 4.0 * d + 4.0) * n / P,
           "items": 2 * 4.0 * d * m + 4.0 * m,
           "exchange": P * s,
           # noisy GD's per-call slot data (dpmt.solvers.gd_blocks.prepare_steps): w_ij and
           # y_ij gathered per padded slot of the task and user layouts
           "gd_slots": (2 * 8.0 * p.padding * nnz / P) if solver == "gd" else 0.0,
           "fixed": float(fixed_bytes)}
    out["total"] = sum(out.values())
    return out


def check_sharded_runs(results: list[dict], solver: str = "gd") -> str:
    """Measured per-process figures of ``scripts/multihost.py launch --shard-data --json``
    runs (one per P) against :func:`sharded_process_bytes`: the data-dependent terms (all
    but F) against each process's peak RSS above its RSS once JAX had started."""
    lines = ["| P | process | ratings read | U rows held | peak RSS MiB | above start MiB "
             "| model, data terms MiB | model / measured | iteration s |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for res in sorted(results, key=lambda r: r["num_processes"]):
        for w in res["workers"]:
            total_users = w["users_held"] / w["users_fraction"]
            nnz = w["ratings_read"] / w["ratings_fraction"]
            prob = Problem(int(round(total_users)), int(res["items"]), int(round(nnz)),
                           int(res["dim"]), res["num_processes"], res["num_processes"])
            model = sharded_process_bytes(prob, solver)
            data = (model["total"] - model["fixed"]) / 2**20
            lines.append(
                f"| {res['num_processes']} | {w['process']} | {w['ratings_fraction']:.3f} | "
                f"{w['users_fraction']:.3f} | {w['peak_rss_mib']:.0f} | "
                f"{w['rss_above_start_mib']:.0f} | {data:.0f} | "
                f"{data / max(1e-9, w['rss_above_start_mib']):.2f} | "
                f"{min(w['seconds']):.2f} |")
    return "\n".join(lines)


def communication_bytes(p: Problem) -> dict:
    """Bytes received per device per iteration (ring all-gather / all-reduce)."""
    n, m, d, D = p.n_users, p.n_items, p.dim, p.devices
    f = (D - 1) / D
    out = {"user_step_all_gather_U": 4.0 * d * n * f,
           "item_step_all_gather_V": 4.0 * d * m * f,
           "noisy_gd": p.gd_steps * (4.0 * d * m * f + 2 * 4.0 * n * f)}
    out["total"] = sum(out.values())
    return out


def format_table(problems: list[Problem], fixed_bytes: float = DEFAULT_FIXED_BYTES) -> str:
    """A Markdown table of the model for each problem."""
    lines = ["| users | items | interactions | d | devices | processes | layouts/device GiB "
             f"| weights/device GiB | factors/device GiB | device total GiB (F = "
             f"{fixed_bytes / GIB:.2f}) | process total GiB | comm/device/iteration MiB |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in problems:
        dv, pr, cm = device_bytes(p, fixed_bytes), process_bytes(p, fixed_bytes), \
            communication_bytes(p)
        lines.append(
            f"| {p.n_users:,} | {p.n_items:,} | {p.interactions:,} | {p.dim} | {p.devices} | "
            f"{p.processes} | {dv['layouts'] / GIB:.2f} | {dv['weights'] / GIB:.2f} | "
            f"{dv['factors'] / GIB:.2f} | {dv['total'] / GIB:.2f} | {pr['total'] / GIB:.2f} | "
            f"{cm['total'] / 2**20:.0f} |")
    return "\n".join(lines)


def check_against_benchmarks(results: list[dict]) -> str:
    """The model against measured ``dpmt bench`` results (one process, ``devices`` CPU
    devices). Two checks, as a Markdown table:

    * **device-resident data**: the model's per-device terms summed over the devices, against
      the bytes of every live JAX array at the largest point of an iteration
      (``live_device_bytes``; a replicated array counted once per device);
    * **process peak**: host terms + device terms + F against the iterations' peak RSS, where
      F (runtime, compiled programs, working sets, allocator slack) is taken per d from the
      smallest ML-20M-like one-device run (its peak minus its data terms) and every other
      run is a *prediction*.
    """
    runs = [r for r in results if r.get("iterations_peak_rss_bytes")
            and str(r.get("dataset", "")).startswith("synthetic")]
    runs.sort(key=lambda r: (r["dim"], r.get("devices", 1), r["interactions"]))

    def problem(r):
        pad = 0.5 * (r["padding"]["items"] + r["padding"]["users"])
        return Problem(r["n_users"], r["n_items"], r["interactions"], r["dim"],
                       r.get("devices", 1), 1, pad)

    fixed: dict[int, tuple[float, int]] = {}
    for r in runs:
        if r["dim"] not in fixed and r.get("devices", 1) == 1:
            data = process_bytes(problem(r), 0.0)["total"]
            fixed[r["dim"]] = (r["iterations_peak_rss_bytes"] - data, r["interactions"])
    lines = ["| interactions | d | devices | model device data MiB | live device arrays MiB "
             "| ratio | model host + device GiB | F GiB | model peak GiB | measured peak GiB "
             "| ratio |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        p = problem(r)
        dev = process_bytes(p, 0.0)["devices"]
        live = r.get("live_device_bytes")
        data = process_bytes(p, 0.0)["total"]
        F, ref = fixed.get(r["dim"], (None, None))
        is_ref = ref == r["interactions"] and p.devices == 1
        meas = r["iterations_peak_rss_bytes"]
        live_cells = (f"{live / 2**20:.0f} | {dev / live:.2f}" if live else "– | –")
        if F is None:
            peak_cells = "– | – | –"
        else:
            peak_cells = (f"{F / GIB:.2f}{' (fit here)' if is_ref else ''} | "
                          f"{(data + F) / GIB:.2f} | {meas / GIB:.2f} | "
                          + ("–" if is_ref else f"{(data + F) / meas:.2f}"))
        lines.append(f"| {r['interactions']:,} | {r['dim']} | {p.devices} | {dev / 2**20:.0f} | "
                     f"{live_cells} | {data / GIB:.2f} | {peak_cells} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m benchmarks.scaling``: the model's table for given sizes (docs/scaling.md)."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scaling", description=__doc__.split(
        "\n\n")[0])
    ap.add_argument("--users", type=float)
    ap.add_argument("--items", type=float)
    ap.add_argument("--interactions", type=float)
    ap.add_argument("--check", metavar="DIR", default=None,
                    help="instead: compare the model with the bench_*.json results in DIR")
    ap.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--devices", type=int, nargs="+", default=[1])
    ap.add_argument("--devices-per-process", type=int, default=None,
                    help="devices per process (host); default: all devices in one process")
    ap.add_argument("--padding", type=float, default=1.27)
    ap.add_argument("--gd-steps", type=int, default=0)
    ap.add_argument("--check-sharded", metavar="JSON", nargs="+", default=None,
                    help="instead: compare sharded-data runs (scripts/multihost.py launch "
                         "--shard-data --json FILE) with the model")
    ap.add_argument("--solver", choices=["gd", "ssp"], default="gd",
                    help="the solver of the --check-sharded runs")
    args = ap.parse_args(argv)
    if args.check_sharded:
        import json
        from pathlib import Path

        print(check_sharded_runs([json.loads(Path(f).read_text()) for f in args.check_sharded],
                                 args.solver))
        return 0
    if args.check:
        import json
        from pathlib import Path

        files = sorted(Path(args.check).glob("bench_*.json"))
        if not files:
            print(f"python -m benchmarks.scaling: error: no bench_*.json in {args.check} (run "
                  "`dpmt bench --suite` first)", file=sys.stderr)
            return 2
        print(check_against_benchmarks([json.loads(f.read_text()) for f in files]))
        return 0
    if None in (args.users, args.items, args.interactions):
        print("python -m benchmarks.scaling: error: give --users, --items and --interactions (or "
              "--check DIR)", file=sys.stderr)
        return 2
    try:
        probs = [Problem(int(args.users), int(args.items), int(args.interactions), d, D,
                         max(1, D // args.devices_per_process) if args.devices_per_process
                         else 1,
                         args.padding, args.gd_steps)
                 for d in args.dims for D in args.devices]
    except ValueError as e:
        print(f"python -m benchmarks.scaling: error: {e}", file=sys.stderr)
        return 2
    print(format_table(probs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
