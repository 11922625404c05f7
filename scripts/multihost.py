#!/usr/bin/env python
"""Private alternating minimisation across several processes (hosts) with jax.distributed.

Each process runs this same program (SPMD, one process per host on a cluster): after
``jax.distributed.initialize`` it calls :func:`dpmt.train.loop.fit` itself (no copy of the
training loop) with ``ExecutionConfig(devices=<every device of every process>)``, which
shards the user and item layouts by rows over that mesh (:mod:`dpmt.solvers.sharding`), so
each process materialises and solves only its share of users (user step) and of items (item
step); the results are all-gathered (CPU: gloo over TCP), so every process ends with the
same V. The noise secret is process 0's, sent to the others
(:func:`dpmt.privacy.randomness.shared_across_processes`).

One worker::

    python scripts/multihost.py worker --coordinator 10.0.0.1:12345 --num-processes 4 \\
        --process-id $RANK --out v.npz [--local-devices 1] [data/model options]

All workers on this machine over loopback (what tests/test_sharding.py does), plus — with
``--noise-seed`` — the single-process reference and the comparison::

    python scripts/multihost.py launch --num-processes 2 --noise-seed 0 --out /tmp/mh

Data: by default every process generates the same synthetic ratings from the seed and the
device-resident layouts are sharded over the global mesh. With ``--shard-data`` the
launcher writes the ratings as user-hashed shard files (:mod:`dpmt.data.shards`) and each
worker reads only its own shards: it holds its users' ratings and U rows only, and every
release sums the processes' statistics before its one noise draw
(``ExecutionConfig(sharded_data=True)``, :mod:`dpmt.solvers.collectives`). ``--json FILE``
writes the result, with per process the fraction of the ratings it read, the fraction of U
it held, its peak RSS (and the part above the RSS after JAX started) and its iteration
times::

    python scripts/multihost.py launch --num-processes 4 --shard-data --noise-seed 0 \
        --json /tmp/mh4.json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys


def add_model_args(p):
    p.add_argument("--users", type=int, default=600)
    p.add_argument("--items", type=int, default=200)
    p.add_argument("--interactions", type=int, default=12_000)
    p.add_argument("--dim", type=int, default=8)
    p.add_argument("--iterations", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--solver", choices=["ssp", "gd"], default="ssp")
    p.add_argument("--shard-data", action="store_true",
                   help="each process reads only its users' shard files (see the module)")
    p.add_argument("--noise-seed", type=int, default=None,
                   help="reproducible noise (then the launcher also compares with one "
                        "process); default: process 0's secret from OS entropy")


def _devices(mesh) -> int:
    """Every device of every process when ``mesh`` is given (the workers), else one."""
    import jax

    return len(jax.devices()) if mesh is not None else 1


def train(args, mesh=None):
    """:func:`dpmt.train.loop.fit` itself — the library's training loop, private counts,
    weights, calibrated ledger and evaluation — with ``ExecutionConfig(devices=…)`` = every
    device of every process when ``mesh`` is given, else one device. Without
    ``--noise-seed`` the noise comes from process 0's OS-entropy secret, shared by all
    processes; with it, a single process reproduces the multi-process model (the launcher's
    comparison). Returns V, seconds per iteration, and (ε, Recall@20)."""
    from dpmt.config import ExecutionConfig, TrainConfig
    from dpmt.data import per_user_split
    from dpmt.train.loop import fit

    shard = getattr(args, "shard_folder", None)
    r = _data(args) if shard is None else shard
    split = per_user_split(r, seed=args.seed)
    cfg = TrainConfig(solver=args.solver, dim=args.dim,
                      iterations=args.iterations, data=dict(dataset="synthetic", seed=args.seed),
                      privacy=dict(epsilon=2.0, noise_seed=args.noise_seed))
    sharded = shard is not None or getattr(args, "shard_data", False)
    ex = (ExecutionConfig(sharded_data=True, progress=False) if sharded
          else ExecutionConfig(devices=_devices(mesh), progress=False))
    res = fit(split.train, cfg, test=split.test, execution=ex)
    secs = [h["seconds"] for h in res.history]
    return res.item_embeddings, [b - a for a, b in zip([0.0] + secs, secs)], \
        {"epsilon": res.epsilon, "recall@20": res.metrics["overall"]["recall@20"]}


def _data(args):
    from dpmt.data import make_synthetic

    return make_synthetic(n_users=args.users, n_items=args.items,
                          n_interactions=args.interactions, seed=args.seed)


def _peak_rss_mib() -> float:
    """This process's peak resident set (VmHWM), MiB. Not getrusage's ru_maxrss: a child
    started by vfork + exec (Python's subprocess) inherits its parent's high-water mark
    there, which would make every worker look as large as the launcher."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0     # kB
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0   # Linux: KiB


def cmd_worker(args) -> int:
    import jax

    from dpmt.solvers.sharding import request_devices

    request_devices(args.local_devices)   # CPU host devices of this process
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=args.coordinator,
                               num_processes=args.num_processes, process_id=args.process_id,
                               initialization_timeout=120)
    import numpy as np

    from dpmt.solvers import sharding as S

    info = {"process": jax.process_index(), "processes": jax.process_count(),
            "global_devices": len(jax.devices()), "local_devices": len(jax.local_devices()),
            "rss_after_start_mib": _peak_rss_mib()}
    if args.shard_data:     # this process's users only: no global mesh, sums by collectives
        from dpmt.data.shards import read_manifest, read_user_shard

        mesh = None
        args.shard_folder, read = read_user_shard(args.shards_dir, args.process_id,
                                                  args.num_processes)
        total_users = sum(read_manifest(args.shards_dir)["users"])
        info.update(shards=read["shards"], ratings_read=read["ratings"],
                    ratings_fraction=read["fraction"],
                    users_held=int(args.shard_folder.n_users),
                    users_fraction=args.shard_folder.n_users / total_users)
    else:
        mesh = S.make_mesh()   # every process's devices: what make_steps shards over
    V, times, extra = train(args, mesh)
    info["peak_rss_mib"] = _peak_rss_mib()
    info["rss_above_start_mib"] = info["peak_rss_mib"] - info["rss_after_start_mib"]
    info["seconds"] = times
    info.update(extra)
    if args.out:
        np.savez(args.out, V=V)
        with open(args.out + ".json", "w") as f:
            json.dump(info, f)
    print("WORKER " + json.dumps(info), flush=True)
    jax.distributed.shutdown()
    return 0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cmd_launch(args) -> int:
    """Start ``--num-processes`` workers on 127.0.0.1 (free port), then the single-process
    reference; print the largest difference of V."""
    import numpy as np

    os.makedirs(args.out, exist_ok=True)
    port = free_port()
    keys = ("users", "items", "interactions", "dim", "iterations", "seed", "solver")
    model = [f"--{k}={getattr(args, k)}" for k in keys] + (
        [f"--noise-seed={args.noise_seed}"] if args.noise_seed is not None else [])
    if args.shard_data:
        from dpmt.data.shards import write_user_shards

        shards_dir = os.path.join(args.out, "shards")
        if os.path.isdir(shards_dir):
            import shutil

            shutil.rmtree(shards_dir)    # the launcher's own scratch copy of the data
        write_user_shards(_data(args), shards_dir, args.shards or 8 * args.num_processes)
        model += ["--shard-data", f"--shards-dir={shards_dir}"]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    procs = []
    for i in range(args.num_processes):
        cmd = [sys.executable, __file__, "worker", f"--coordinator=127.0.0.1:{port}",
               f"--num-processes={args.num_processes}", f"--process-id={i}",
               f"--local-devices={args.local_devices}",
               f"--out={os.path.join(args.out, f'v{i}.npz')}"] + model
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs, ok = [], True
    for p in procs:
        try:
            o, e = p.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
            ok = False
        outs.append((p.returncode, o, e))
        ok &= p.returncode == 0
    if not ok:
        for i, (rc, o, e) in enumerate(outs):
            print(f"--- worker {i} exit {rc}\n{o[-2000:]}\n{e[-4000:]}", file=sys.stderr)
        return 1
    Vs = [np.load(os.path.join(args.out, f"v{i}.npz"))["V"] for i in range(args.num_processes)]
    res = {"num_processes": args.num_processes, "local_devices": args.local_devices,
           "max_abs_diff_between_processes": float(max(np.abs(V - Vs[0]).max() for V in Vs)),
           "scale": float(np.abs(Vs[0]).max()),
           "workers": [json.loads(open(os.path.join(args.out, f"v{i}.npz.json")).read())
                       for i in range(args.num_processes)]}
    if args.noise_seed is not None:   # the same noise: one process must give the same model
        # one process: all the data (with --shard-data: the summed path, which caps each
        # user by a keyed hash, so that any number of processes makes the same releases)
        ref_args = argparse.Namespace(**{k: getattr(args, k)
                                         for k in keys + ("noise_seed", "shard_data")})
        V1, _, res["single_process"] = train(ref_args, None)
        res["max_abs_diff_vs_single_process"] = float(max(np.abs(V - V1).max() for V in Vs))
    res["shard_data"] = bool(args.shard_data)
    res.update({k: getattr(args, k) for k in keys})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    print("RESULT " + json.dumps(res), flush=True)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="one process of a multi-process run")
    w.add_argument("--coordinator", required=True, help="host:port of process 0")
    w.add_argument("--num-processes", type=int, required=True)
    w.add_argument("--process-id", type=int, required=True)
    w.add_argument("--local-devices", type=int, default=1, help="CPU devices per process")
    w.add_argument("--out", default=None, help="write V (npz) here")
    w.add_argument("--shards-dir", default=None, help="the shard folder (with --shard-data)")
    add_model_args(w)
    la = sub.add_parser("launch", help="run N workers on this machine and compare with one "
                                       "process")
    la.add_argument("--num-processes", type=int, default=2)
    la.add_argument("--local-devices", type=int, default=1)
    la.add_argument("--out", default="runs/multihost")
    la.add_argument("--timeout", type=float, default=600)
    la.add_argument("--shards", type=int, default=None,
                    help="shard files with --shard-data (default 8 per process)")
    la.add_argument("--json", default=None, help="also write the result here")
    add_model_args(la)
    args = p.parse_args(argv)
    return cmd_worker(args) if args.cmd == "worker" else cmd_launch(args)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
