"""Private multi-task solvers on a bucketed sparse layout.

* :mod:`~dpmt.solvers.layout` — bucketed, padded, chunked row layout of the ratings matrix.
* :mod:`~dpmt.solvers.ssp` — sufficient-statistics perturbation (Krichene et al. 2023, Alg. 1).
* :mod:`~dpmt.solvers.systems` — the released item systems made well-posed and solved
  (projection, spectral shift + Cholesky, or warm-started CG): post-processing.
* :mod:`~dpmt.solvers.cg` — batched, warm-started, Jacobi-preconditioned conjugate gradients.
* :mod:`~dpmt.solvers.noise` — the releases' Gaussian noise: JAX's threefry normals, fused
  for CPU, keyed by (key, item) so any layout or device count draws the same noise.
* :mod:`~dpmt.solvers.noisy_gd` — noisy GD / Poisson DP-SGD with per-user clipping (Alg. 2).
* :mod:`~dpmt.solvers.encoders` — flax item encoders (embedding table, MLP over features).
* :mod:`~dpmt.solvers.user_step` — the unreleased user step of alternating minimisation
  (exact, or warm-started CG).

Each releasing function has its sensitivity function next to it
(:func:`ssp_sensitivities`, :func:`gramian_sensitivity`, :func:`noisy_gd_sensitivity`) and
takes noise standard deviations / multipliers as inputs; the privacy ledger lives elsewhere.

The noisy-GD driver is ``dpmt.solvers.noisy_gd.noisy_gd`` (not re-exported here, so that
``dpmt.solvers.noisy_gd`` stays the module).
"""

from dpmt.solvers.encoders import (EmbeddingEncoder, MLPEncoder, embedding_params,
                                   init_encoder, item_embeddings)
from dpmt.solvers.layout import (Layout, build_layout, task_layout, trace_count,
                                 user_layout)
from dpmt.solvers.losses import logistic_loss, squared_loss
from dpmt.solvers.noisy_gd import (clipped_gradient_sum, make_noisy_gd_step, noisy_gd_dp_event,
                                   noisy_gd_sensitivity, noisy_gradient, poisson_sample)
from dpmt.solvers.ssp import (gramian, gramian_sensitivity, noisy_gramian, privatize_statistics,
                              project_psd, ssp_item_step, ssp_sensitivities, ssp_solve,
                              symmetric_noise, weighted_statistics)
from dpmt.solvers.user_step import clip_rows, solve_users

__all__ = [
    "EmbeddingEncoder", "MLPEncoder", "embedding_params", "init_encoder", "item_embeddings",
    "Layout", "build_layout", "task_layout", "user_layout", "trace_count",
    "clipped_gradient_sum", "logistic_loss", "make_noisy_gd_step", "noisy_gd_dp_event", "noisy_gd_sensitivity", "noisy_gradient", "poisson_sample",
    "squared_loss",
    "gramian", "gramian_sensitivity", "noisy_gramian", "privatize_statistics", "project_psd",
    "ssp_item_step", "ssp_sensitivities", "ssp_solve", "symmetric_noise", "weighted_statistics",
    "clip_rows", "solve_users",
]
