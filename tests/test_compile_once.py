"""Training compiles its steps in the first iterations, and then not again: XLA's backend
compilations counted per iteration (jax.monitoring), not Python traces — a change of an
input's placement (committed or not) recompiles without retracing, which the trace counters
of the benchmark do not see."""

import jax
import jax.monitoring
import pytest

import dpmt
from dpmt.config import ExecutionConfig, NonPrivate, TrainConfig
from dpmt.train.loop import iterate
from dpmt.train.training_run import setup

_COMPILES: list[str] = []
_LISTENING = False


def _listen():
    global _LISTENING
    if not _LISTENING:
        jax.monitoring.register_event_duration_secs_listener(
            lambda name, secs, **kw: _COMPILES.append(name)
            if name == "/jax/core/compile/backend_compile_duration" else None)
        _LISTENING = True
    before = len(_COMPILES)            # the listener sees a compilation (else: vacuous test)
    jax.jit(lambda x: x * 3.25 - 1.0)(jax.numpy.ones(7))
    assert len(_COMPILES) > before, "jax.monitoring no longer reports backend compilations"


@pytest.mark.parametrize("settings", [
    dict(),
    dict(solver="ssp"),
    dict(solver="ssp", user_solve="exact"),
    dict(privacy=NonPrivate()),
], ids=["default", "ssp", "ssp-exact-users", "non-private"])
def test_no_compilation_after_the_second_iteration(settings):
    _listen()
    # uniform popularity and activity (few buckets: each kernel compiles 2-3x faster); the
    # count of compilations per iteration does not depend on how many buckets there are
    r = dpmt.data.make_synthetic(n_users=600, n_items=80, n_interactions=9000, seed=3,
                                 alpha=0.0, user_activity_sigma=0.0)
    cfg = TrainConfig(dim=4, iterations=5, **settings).replace(
        **({} if "privacy" in settings else {"privacy": dict(epsilon=5.0, noise_seed=1)}))
    run = setup(r, cfg, execution=ExecutionConfig(progress=False))
    per_iteration = []
    for t in range(cfg.iterations):
        before = len(_COMPILES)
        iterate(run, t)
        jax.block_until_ready(run.state.V)
        per_iteration.append(len(_COMPILES) - before)
    # the first iteration compiles the steps (unless an earlier case of the same shapes
    # did), the second the warm-started CG user step; then nothing
    assert per_iteration[2:] == [0] * (cfg.iterations - 2), per_iteration
