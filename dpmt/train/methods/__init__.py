"""Private item steps as registry entries (:data:`dpmt.registry.SOLVERS`).

An :class:`ItemMethod` owns everything a choice of ``TrainConfig.solver`` means: the
releases of one iteration's item step (each a :class:`~dpmt.privacy.PlannedRelease` with its
sensitivity), how many normals each one draws (the sampler's δ), the noise its step takes
from the calibrated releases, the step itself (an ``(init, update)`` pair on the layouts of
:mod:`dpmt.solvers.steps`), its rule for the auto settings (λ, η), the layout it wants and
its config checks. The plan (:mod:`dpmt.train.plan`), the loop (:mod:`dpmt.train.loop`) and
the defaults (:mod:`dpmt.train.defaults`) ask it; none of them compares ``cfg.solver`` with a
name. The built-ins: :data:`dpmt.train.methods.ssp.SSP` (Algorithm 1 of Krichene et al.
2023) and :data:`dpmt.train.methods.noisy_gd.NOISY_GD` (Algorithm 2).

Adding a solver is one file with an :class:`ItemMethod` subclass, plus one line in
:data:`~dpmt.registry.SOLVERS` (or ``SOLVERS.register(...)`` at run time; tests/test_registry.py
trains such a solver through ``fit``, ``compare`` and ``tune`` from the test file alone).
"""

from __future__ import annotations

from typing import Any

from dpmt.config import BASE_REG, TrainConfig
from dpmt.privacy import PlannedRelease, Release
from dpmt.registry import SOLVERS
from dpmt.solvers.steps import ItemNoise, ItemState, ItemStep, Steps, build_steps

__all__ = ["ItemMethod", "method_of", "make_steps", "initial_item_state", "ItemNoise"]


class ItemMethod:
    """Base class of a private item step. Subclasses set ``name`` and ``help`` and
    implement :meth:`releases`, :meth:`draws`, :meth:`noise` and :meth:`item_step`; the
    other methods have the defaults of a method that reads no counts, no features and no
    rule of its own."""

    name: str = ""
    help: str = ""
    #: its item step sums every process's statistics (``steps.aggregate``) before the noise,
    #: so it can train on sharded data (``ExecutionConfig(sharded_data=True)``)
    sums_over_processes: bool = False

    # -- privacy ----------------------------------------------------------------------------
    def releases(self, cfg: TrainConfig) -> list[PlannedRelease]:
        """The releases of one iteration's item step, in the order the step makes them,
        with short names (the plan prefixes ``iter{t}/``) and their sensitivities."""
        raise NotImplementedError

    def draws(self, cfg: TrainConfig, n_items: int, n_features: int | None) -> list[int]:
        """Normals each of :meth:`releases` draws from the 64-bit sampler
        (:mod:`dpmt.solvers.noise`), on ``n_items`` items (0: a release with no continuous
        noise)."""
        raise NotImplementedError

    def noise(self, releases: tuple[Release, ...] | None) -> Any:
        """The step's noise from one iteration's calibrated releases (charged already), or
        the noiseless value for ``None`` (a non-private run)."""
        raise NotImplementedError

    # -- the step ---------------------------------------------------------------------------
    def item_step(self, steps: Steps, train, item_features) -> ItemStep:
        """The ``(init, update)`` pair on ``steps``' layouts (see :class:`ItemStep`)."""
        raise NotImplementedError

    def initial_state(self, cfg: TrainConfig, n_items: int, item_features, key) -> ItemState:
        """The item step's state before the first iteration (the pytree template a
        checkpoint is read into)."""
        return ItemState()

    def layout(self, cfg: TrainConfig, devices: int) -> tuple[bool, bool]:
        """``(segment_items, shard_items)``: cut long item rows into segments, and split the
        item layout over the devices."""
        return False, True

    # -- what the run needs -----------------------------------------------------------------
    def needs_counts(self, cfg: TrainConfig) -> bool:
        """Whether the step reads the released counts or n̂ (beyond the weights)."""
        return False

    def needs_item_features(self, cfg: TrainConfig) -> bool:
        return False

    def check(self, cfg: TrainConfig) -> None:
        """Refuse (ConfigError) a config this method cannot train."""

    # -- auto settings (dpmt.train.defaults) ------------------------------------------------
    def default_reg(self, noisy_users: float | None, epsilon: float) -> tuple[float, str]:
        """λ for ``reg=None`` in a private run, and why."""
        return BASE_REG, self.name

    def default_prior(self, noisy_users: float | None, epsilon: float,
                      weights: str) -> tuple[float, str]:
        """η for ``popularity_prior=None`` in a private run, and why."""
        return 0.0, f"{self.name}: no prior"

    def default_settings(self, cfg: TrainConfig, noisy_users: float | None
                         ) -> tuple[TrainConfig, list[tuple[str, Any, str]]]:
        """``cfg`` with this method's own auto settings resolved (from n̂ and ε only), and
        the ``(setting, value, reason)`` lines; a resolved setting that changes the releases
        must keep their privacy (:meth:`equivalent_releases`)."""
        return cfg, []

    def equivalent_releases(self, planned: tuple[Release, ...], cfg: TrainConfig
                            ) -> tuple[Release, ...] | None:
        """One iteration's releases for the resolved ``cfg``, of exactly the privacy of
        ``planned`` (the calibrated releases of the config as planned), or None when this
        method has none. A method whose :meth:`default_settings` leave its releases as they
        were returns ``planned``."""
        return planned

    def planned_config(self, cfg: TrainConfig) -> TrainConfig:
        """``cfg`` with the settings its plan was calibrated for in place of those left to
        :meth:`default_settings` (used when :meth:`equivalent_releases` has none)."""
        return cfg

    def divergence_hint(self, cfg: TrainConfig) -> str:
        return f"raise --reg (now {cfg.reg:g})"


def method_of(cfg: TrainConfig) -> ItemMethod:
    """The :class:`ItemMethod` of ``cfg.solver``."""
    return SOLVERS[cfg.solver]


def make_steps(cfg: TrainConfig, train, weights, *, labels=None, item_features=None,
               devices: int = 1, aggregate=None) -> Steps:
    """The layouts of ``train`` and the steps of ``cfg``: the user step of
    :mod:`dpmt.solvers.steps` and the item step of ``cfg``'s method.

    Args:
      weights: float (nnz,) w_ij in ``train``'s order.
      labels: float (nnz,) y_ij or None (implicit feedback, y = 1).
      item_features: (m, f) public item features (noisy GD with ``encoder='mlp'``).
      devices: 1, or the size of the mesh to shard over (the devices must exist).
      aggregate: sharded data: the sum over processes (:mod:`dpmt.solvers.collectives`).
    """
    method = method_of(cfg)
    segment, shard_items = method.layout(cfg, devices)
    steps = build_steps(cfg, train, weights, labels=labels, devices=devices,
                        segment_items=segment, shard_items=shard_items,
                        aggregate=aggregate)
    steps.item_step = method.item_step(steps, train, item_features)
    return steps


def initial_item_state(cfg: TrainConfig, n_items: int, item_features, key) -> ItemState:
    """:meth:`ItemMethod.initial_state` of ``cfg``'s method."""
    return method_of(cfg).initial_state(cfg, n_items, item_features, key)
