"""The extension points of dpmt: one registry each, names → the object that implements them.

A registry maps a config value (``TrainConfig.solver``, ``.weights``, ``.task``,
``.item_solve``) to an *entry*: an object that owns everything that choice means — its
releases and their sensitivities, its step, its noise, its defaults rule, its help text.
The rest of dpmt asks the entry instead of comparing the config field with literals
(optax composes transformations; jax-privacy's enums hold the strategy itself).

The built-in entries are named here by ``"module:attribute"`` and imported on first use, so
importing :mod:`dpmt.config` (which validates names against these registries and builds
the CLI's choices from them) stays light and imports no solver. User code adds an entry at
run time::

    from dpmt.registry import SOLVERS
    SOLVERS.register(MySolver(name="mine", ...))     # then TrainConfig(solver="mine")

An entry is any object with a ``name`` attribute and the methods its registry documents
(:class:`dpmt.train.methods.ItemMethod` for solvers, :class:`dpmt.train.weights.Weighting`
for weightings, :class:`dpmt.tasks.Task` for tasks,
:class:`dpmt.solvers.systems.ItemSolve` for item solves).
"""

from __future__ import annotations

import importlib
from typing import Any, Iterator

from dpmt.errors import ConfigError


class Registry:
    """Names of one extension point and their entries, in registration order.

    ``name in registry``, ``iter(registry)`` (names) and ``len`` make it usable as
    argparse ``choices``; ``registry[name]`` returns the entry (imported on first use),
    a :class:`~dpmt.errors.ConfigError` naming the choices for an unknown name.
    """

    def __init__(self, what: str, builtins: dict[str, str]):
        self.what = what
        self._targets: dict[str, str | None] = dict(builtins)
        self._entries: dict[str, Any] = {}

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name in self._targets

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._targets))

    def __len__(self) -> int:
        return len(self._targets)

    def names(self) -> tuple[str, ...]:
        return tuple(self._targets)

    def __getitem__(self, name: str) -> Any:
        if name not in self:
            raise ConfigError(f"{self.what} must be one of {', '.join(self._targets)} "
                              f"(got {name!r})")
        if name not in self._entries:
            module, _, attr = self._targets[name].partition(":")
            self._entries[name] = getattr(importlib.import_module(module), attr)
        return self._entries[name]

    def register(self, entry, *, replace: bool = False):
        """Add ``entry`` under ``entry.name`` (refused if taken, unless ``replace``).
        Returns the entry, so that it can decorate a class instance's definition."""
        name = getattr(entry, "name", None)
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a {self.what} entry needs a non-empty string 'name'")
        if name in self and not replace:
            raise ConfigError(f"{self.what} {name!r} is registered already")
        self._targets[name] = None
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove a name added by :meth:`register` (built-ins stay)."""
        if self._targets.get(name, "") is not None:
            raise ConfigError(f"{self.what} {name!r} is not a registered extension")
        del self._targets[name]
        del self._entries[name]

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._targets)})"


#: the private item step (Krichene et al. 2023): Algorithm 1 (SSP) and Algorithm 2 (noisy GD)
SOLVERS = Registry("solver", {"ssp": "dpmt.train.methods.ssp:SSP",
                              "gd": "dpmt.train.methods.noisy_gd:NOISY_GD"})

#: the task-user weights w_ij (:mod:`dpmt.weightings`)
WEIGHTINGS = Registry("weights", {
    "auto": "dpmt.weightings:AUTO", "uniform": "dpmt.weightings:UNIFORM",
    "tail": "dpmt.weightings:TAIL", "adaptive": "dpmt.weightings:ADAPTIVE",
    "adaptive-normalized": "dpmt.weightings:ADAPTIVE_NORMALIZED"})

#: what the labels are and how a model is judged (:mod:`dpmt.tasks`)
TASKS = Registry("task", {"implicit": "dpmt.tasks:IMPLICIT", "rating": "dpmt.tasks:RATING"})

#: how SSP's released item systems are made well-posed and solved (:mod:`dpmt.solvers.systems`)
ITEM_SOLVES = Registry("item_solve", {
    "project": "dpmt.solvers.systems:PROJECT", "floor": "dpmt.solvers.systems:FLOOR",
    "shift": "dpmt.solvers.systems:SHIFT", "cg": "dpmt.solvers.systems:CG"})
