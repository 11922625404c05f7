"""``dpmt tune``: train a grid of candidate configurations and keep the best on validation.

Two selection modes, labelled in every output (stdout, ``tune.json``, ``model.json``,
``ledger.json``, ``metrics.json``, ``train.log``):

* ``private`` (the default: the only mode whose ε covers what is released) — the random
  repetitions of Papernot & Steinke (ICLR 2022, :mod:`dpmt.privacy.selection`): K repetitions
  (Poisson, or truncated negative binomial, with mean ``--mean-runs``), each training a
  uniformly drawn candidate with fresh randomness at a per-run ε and releasing its noisy
  validation score (the sum over validation users of their Recall@20, sensitivity 1, plus
  Gaussian noise); the best noisy score's model is saved, and its ledger holds
  ``RepeatAndSelectDpEvent(compose(one repetition's releases), mean, shape)``, whose RDP ε is
  at most ``--epsilon``. Every candidate must have the same DP event (refused otherwise,
  before any data is read). Only the selected model is published: K, the draws, the
  scores (the selected one's included) and every exact evaluation are not.
* ``literature`` — every candidate trained once at ``--epsilon``, the best exact validation
  Recall@20 kept; the selection is *not* charged: ε covers one training run, not the choice
  among the candidates.

The grid is ``--grid FIELD=V1,V2,...`` over any TrainConfig field that does not change the
data, the split or the privacy target; every candidate config is built (and its plan
calibrated) before any data is read.

Randomness. Every draw of a tune — K, each repetition's candidate, its training noise
(:func:`dpmt.train.loop.fit` gets ``noise=source.child(f"rep{r}")``) and its score noise —
derives from one :class:`~dpmt.privacy.randomness.NoiseSource`: a secret from OS entropy,
kept in the trainer's private state only, unless ``--noise-seed`` is given (reproducible,
and then NOT private against anyone who knows that seed: every output says so). ``--seed``
is the public split seed and never seeds a draw. Nothing published lets K, a draw or a
score be recomputed.

Outputs (:mod:`dpmt.apps.tune_report`), as a ``dpmt train`` run directory: ``--out/model/``
(the selected model, shareable), ``--out/tune.json`` (public: the grid, the selection
mechanism, ε, δ) and ``--out/trainer/`` (private, never shared: ``tune_private.json`` with
the secret, K, the repetitions and their scores, exact metrics). A private tune writes its
secret into ``trainer/tune_private.json`` before training, so ``--resume`` of an unfinished
tune redraws exactly the same K and draws (re-drawing them after seeing an outcome would be
a second execution of the mechanism); the model and ``tune.json`` are written only after
success.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import hashlib
import itertools
import json
import time
from pathlib import Path

import numpy as np

from dpmt.apps import tune_report as tr
from dpmt.apps.args import add_config_arguments, config_fields, config_from_args, parse_number
from dpmt.apps.tune_report import label
from dpmt.config import ExecutionConfig, TrainConfig, route
from dpmt.errors import ConfigError, DataError, PrivacyBudgetError, check_range
from dpmt.privacy.ledger import PRIVACY_UNIT, SELECTION_MODES, PrivacyLedger, Selection
from dpmt.privacy.randomness import NoiseSource
from dpmt.privacy.selection import (calibrate_selection, describe_event, draw_repetitions,
                                    noisy_score, same_event)
from dpmt.registry import TASKS
from dpmt.runtime import release_compiled_code

DESCRIPTION = (
    "Train a grid of candidate configurations (--grid FIELD=V1,V2,...) on the training users "
    "and save the one with the best validation Recall@20 as a model, with tune.json. "
    "--selection private (default): Papernot & Steinke's (ICLR 2022) private selection — a "
    "random number K of repetitions (mean --mean-runs), each a uniformly drawn candidate "
    "trained at a calibrated per-run ε and scored with a noisy validation score; ε = --epsilon "
    "covers the whole tuning (RDP accountant). K, the draws and the scores are drawn from a "
    "secret (OS entropy; --noise-seed only for reproducible, NOT private, experiments) and "
    "kept in DIR/trainer/, never published (the progress bar and the wall time show K: keep "
    "them to yourself). "
    "--selection literature: every candidate at --epsilon, the best exact validation score; "
    "the choice is NOT charged (as in the literature: ε covers one training run, not the "
    "choice among N candidates).")
MAX_CANDIDATES = 1000
_NOT_GRID = {
    **{f: "changes the data or the split: every candidate trains on the same users and is "
          "selected on the same validation users" for f in
       ("task", "dataset", "columns", "rating_range", "on_duplicate", "positive_threshold",
        "split", "heldout_users", "split_fractions")},
    **{f: "is the target of the whole tuning: give it with --epsilon / --delta / "
          "--accountant, not in the grid" for f in ("epsilon", "delta", "accountant",
                                                     "private")},
    "seed": "fixes the split: one --seed per tune",
    "noise_seed": "seeds tune's own draws: one --noise-seed per tune (or none: OS entropy)",
}


# -- the grid -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Candidate:
    index: int
    values: dict            # {field: value} of the grid
    config: TrainConfig

    def label(self) -> str:
        return label(self.values)


def _grid_fields() -> dict:
    out = {}
    for f, flag, dest in config_fields(TrainConfig):
        for name in (dest, flag.lstrip("-").replace("-", "_"), dest.replace("gd_", "gd.", 1)):
            out[name] = (f, dest)
    return out


def _parse_value(field, dest: str, raw: str):
    kind = str(field.type).replace(" | None", "")
    s = raw.strip()
    if str(field.type).endswith("| None") and s.lower() in ("none", "auto"):
        return None
    try:
        if kind == "int":
            return int(s)
        if kind == "float":
            return float(s)
    except ValueError:
        raise ConfigError(f"--grid {dest}: {raw!r} is not "
                          f"{'an integer' if kind == 'int' else 'a number'}") from None
    if kind == "bool":
        if s.lower() in ("true", "yes", "1", "false", "no", "0"):
            return s.lower() in ("true", "yes", "1")
        raise ConfigError(f"--grid {dest}: {raw!r} is not true or false")
    if not s:
        raise ConfigError(f"--grid {dest}: empty value")
    return s


def parse_grid(specs) -> list[tuple[str, list]]:
    """``["dim=8,16", "reg=1,10"]`` → ``[("dim", [8, 16]), ("reg", [1.0, 10.0])]``, each value
    parsed with its TrainConfig field's type (``gd_*`` fields are GDConfig's)."""
    fields = _grid_fields()
    grid, seen = [], set()
    for spec in specs or ():
        name, eq, vals = str(spec).partition("=")
        key = name.strip().lstrip("-").replace("-", "_")
        if not eq or not key:
            raise ConfigError(f"--grid {spec!r}: expected FIELD=V1,V2,... (e.g. dim=8,16)")
        if key not in fields and key not in _NOT_GRID:
            near = difflib.get_close_matches(key, [k for k in fields if "." not in k], n=3)
            raise ConfigError(f"--grid {key}: not a TrainConfig field"
                              + (f" (did you mean {', '.join(near)}?)" if near else ""))
        field, dest = fields.get(key, (None, key))
        if dest in _NOT_GRID:
            raise ConfigError(f"--grid {key}: {dest} {_NOT_GRID[dest]}")
        if dest in seen:
            raise ConfigError(f"--grid {dest} is given twice: list all its values once")
        seen.add(dest)
        values = [_parse_value(field, dest, v) for v in vals.split(",")]
        if len(set(map(repr, values))) != len(values):
            raise ConfigError(f"--grid {dest} lists a value twice ({vals}): repeats are the "
                              "same candidate")
        grid.append((dest, values))
    if not grid:
        raise ConfigError("give at least one --grid FIELD=V1,V2,... (e.g. --grid dim=8,16)")
    return grid


def build_candidates(base: TrainConfig, grid) -> list[Candidate]:
    """Every combination of the grid's values applied to ``base``; an invalid value or
    combination is refused naming the field (nothing is read or trained)."""
    size = int(np.prod([len(v) for _, v in grid]))
    if size > MAX_CANDIDATES:
        raise ConfigError(f"the grid has {size} candidates; at most {MAX_CANDIDATES}")
    out = []
    for k, combo in enumerate(itertools.product(*[v for _, v in grid])):
        values = {dest: v for (dest, _), v in zip(grid, combo)}
        try:
            cfg = base.replace(**route(values))
        except ConfigError as e:
            label = ", ".join(f"{d}={v}" for d, v in values.items())
            raise ConfigError(f"--grid candidate {label}: {e}") from None
        out.append(Candidate(k, values, cfg))
    return out


# -- the privacy side, before any data -----------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Spec:
    """A tune: the base config, the candidates, the mode and (private) the distribution of K
    (``mean_runs`` default 2 × the number of candidates; ``shape`` None = Poisson)."""

    base: TrainConfig
    candidates: tuple[Candidate, ...]
    mode: str = "private"
    mean_runs: float | None = None
    shape: float | None = 1.0
    score_noise_ratio: float = 1.0

    def __post_init__(self):
        if self.mode not in SELECTION_MODES:
            raise ConfigError(f"--selection must be {' or '.join(SELECTION_MODES)} (got "
                              f"{self.mode!r})")
        check_range("--score-noise-ratio", self.score_noise_ratio, low=0.0, high=1e6,
                    low_open=True)
        if not self.base.private:
            raise ConfigError("dpmt tune selects among private runs; drop --no-privacy (for "
                              "non-private grids use dpmt compare)")
        if not TASKS[self.base.task].ranking:
            raise ConfigError("dpmt tune selects by validation Recall@20: it needs the "
                              "implicit task (--task implicit)")
        self.selection          # validates mean and shape

    @property
    def charged(self) -> bool:
        """Whether the selection is private (charged to the ledger), not literature mode."""
        return self.mode == "private"

    @property
    def selection(self) -> Selection:
        n = len(self.candidates)
        if not self.charged:
            return Selection("literature", n)
        mean = 2.0 * n if self.mean_runs is None else float(self.mean_runs)
        return Selection("private", n, mean, self.shape)

    def fingerprint(self, public: bool = False) -> str:
        """SHA-256 (16 hex) of the tune's settings; ``public`` leaves out the noise seed
        (for ``tune.json``; the full one, kept in the trainer's state, identifies a tune to
        resume)."""
        cfg = (lambda c: c.public_dict()) if public else (lambda c: c.to_dict())
        d = {"base": cfg(self.base), "ratio": self.score_noise_ratio,
             "selection": self.selection.to_dict(),
             "candidates": [cfg(c.config) for c in self.candidates]}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def charged_draws(configs, n_items: int) -> dict[str, int]:
    """The sampler normals a private tuning charges every repetition, per release: the
    largest :func:`~dpmt.train.plan.sampler_draws` over the candidates (which may differ in
    d), so that every repetition is the same DP event."""
    from dpmt.train.plan import sampler_draws

    out: dict[str, int] = {}
    for cfg in configs:
        for name, n in sampler_draws(cfg, n_items).items():
            out[name] = max(out.get(name, 0), n)
    return out


def check_spec(spec: Spec, n_items: int | None = None):
    """Refuse what cannot run, before any data. Returns (the training configs, the private
    calibration or None): literature mode trains every candidate at the target ε; private
    mode at the calibrated per-run ε with the RDP accountant, every candidate checked to have
    the same DP event (noise multipliers, sampling, counts of every release — not raw σ).
    ``n_items`` (once the data is read): the private calibration then charges the sampler's
    δ of :func:`charged_draws` (without it, the check before the data has none)."""
    from dpmt.train.plan import make_plan

    if not spec.charged:
        for c in spec.candidates:
            make_plan(c.config)                 # each at the target: refuse unmeetable ones
        return [c.config for c in spec.candidates], None
    rdp = [c.config.replace(privacy=dict(accountant="rdp")) for c in spec.candidates]
    draws = {} if n_items is None else charged_draws(rdp, n_items)

    def make_plan(cfg, _plan=make_plan):        # every plan charges the same draws
        return _plan(cfg, draws=draws)

    ref = make_plan(rdp[0]).releases()
    for c, cfg in zip(spec.candidates[1:], rdp[1:]):
        other = make_plan(cfg).releases()
        if not same_event(ref, other):
            raise ConfigError(
                f"candidates ({spec.candidates[0].label()}) and ({c.label()}) have different "
                f"privacy plans ({describe_event(ref)} vs {describe_event(other)}): a "
                "private selection repeats ONE DP mechanism, so every candidate must make "
                "the same releases with the same noise multipliers. Grid over fields that "
                "keep the plan (dim, reg, user_clip, mu, init_scale, ...), or use "
                "--selection literature")

    def run_plan(e):
        p = make_plan(rdp[0].replace(privacy=dict(epsilon=e)))
        return p.releases(), p.calibration.scale

    cal = calibrate_selection(run_plan, epsilon=spec.base.privacy.epsilon,
                              delta=spec.base.privacy.delta,
                              selection=spec.selection,
                              score_noise_ratio=spec.score_noise_ratio)
    configs = [cfg.replace(privacy=dict(epsilon=cal.run_epsilon)) for cfg in rdp]
    for cfg in configs:
        if not same_event(make_plan(cfg).releases(), cal.releases):
            raise RuntimeError("internal error: a candidate's plan differs from the "
                               "calibrated repetition")
    return configs, cal


# -- running -------------------------------------------------------------------------------------
@dataclasses.dataclass
class TuneResult:
    """``model``: the selected model (its ledger holds the selection); ``doc``: tune.json
    (public); ``private``: ``trainer/tune_private.json`` (K, the repetitions, the scores,
    exact metrics, the secret: never published). ``repetitions``: every repetition's draw
    and score, as in ``private`` (empty when a finished tune is shown again)."""

    model: object
    doc: dict
    repetitions: list
    private: dict | None = None


@dataclasses.dataclass(frozen=True)
class Draw:
    """One repetition: the candidate, the training noise source, the score's generator."""

    candidate: int
    noise: object                   # NoiseSource
    score_rng: object | None        # numpy Generator (private mode)


def _draws(spec: Spec, n: int, source) -> list[Draw]:
    """The repetitions, every draw from the secret ``source``. Private: K from the stream
    ``tune/K``, repetition r's candidate and score noise from ``tune/rep{r}`` and its
    training noise from ``source.child(f"rep{r}")`` alone, so they do not depend on K;
    literature: every candidate once, with ``source.child(f"candidate{c}")``."""

    if not spec.charged:
        return [Draw(c, source.child(f"candidate{c}"), None) for c in range(n)]
    sel = spec.selection
    k = draw_repetitions(source.numpy_rng("tune/K"), sel.mean, sel.shape)
    if k == 0:
        raise PrivacyBudgetError(
            f"K = 0 repetitions were drawn (Poisson, mean {sel.mean:g}: probability "
            f"{np.exp(-sel.mean):.2g}); as in Papernot & Steinke (2022) the selection outputs "
            "nothing, and nothing was read, trained or written. Running it again draws a new "
            "secret: a second execution of the mechanism (its ε composes with this one); "
            "--distribution negative-binomial never draws K = 0")
    out = []
    for r in range(k):
        g = source.numpy_rng(f"tune/rep{r}")
        out.append(Draw(int(g.integers(n)), source.child(f"rep{r}"), g))
    return out


def tune(spec: Spec, out, *, execution=None, resume: bool = False,
         overwrite: bool = False) -> TuneResult:
    """Check everything, train the repetitions, select, write ``out`` (see the module
    docstring). Raises a :class:`~dpmt.errors.DpmtError` with a clear message."""
    from dpmt.train.evaluate import evaluate
    from dpmt.train.loop import fit
    from dpmt.train.rundir import prepare_data, run_lock

    ex = execution or ExecutionConfig()
    quiet = dataclasses.replace(ex, progress=False)
    configs, cal = check_spec(spec)
    out = Path(out)
    fingerprint = spec.fingerprint()
    saved = tr.check_out(out, fingerprint, resume=resume, overwrite=overwrite)
    if isinstance(saved, tuple):
        return TuneResult(saved[0], saved[1], [], saved[2])
    private = spec.charged
    # an unfinished private tune resumes with its own secret: the same K and draws
    source = saved if saved is not None else NoiseSource.create(spec.base.privacy.noise_seed)
    draws = _draws(spec, len(configs), source)
    t0 = time.time()
    with run_lock(out):
        if private and saved is None:
            tr.write_state(out, fingerprint, source)
        split = prepare_data(spec.base, quiet)
        if split.validation.users.size == 0:
            raise DataError("the validation split has no user with a target: nothing to "
                            "select on")
        if private and not split.train.items_public:
            # each repetition would select items privately and pay its δ once per run:
            # (1 + e^ε)·E[K]·δ_ps, more than δ itself
            raise DataError(f"{spec.base.data.dataset} has no public item catalogue: a private "
                            "tuning needs one (--items FILE with every item id); nothing was "
                            "trained")
        draws_charged = None
        if private:
            # the calibration again, now with the sampler's δ of the data's shape
            configs, cal = check_spec(spec, split.train.n_items)
            draws_charged = charged_draws(configs, split.train.n_items)
        bar = None
        if ex.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(draws), desc=f"tune ({spec.mode})", unit="run")
        best, reps = None, []
        for r, d in enumerate(draws):
            release_compiled_code()      # many fits in one process (dpmt.runtime)
            model = fit(split.train, configs[d.candidate], execution=quiet, noise=d.noise,
                        charged_draws=draws_charged)
            o = evaluate(model, split.train, split.validation)["overall"]
            recall = float(o["recall@20"]) if o["users"] else 0.0
            score = noisy_score(recall * o["users"], cal.score.noise_std, d.score_rng) \
                if private else recall
            reps.append({"repetition": r, "candidate": d.candidate, "score": score,
                         "exact_recall@20": recall, "exact_sum": recall * o["users"]})
            if best is None or score > best[0]:
                best = (score, d.candidate, model)
            if bar is not None:
                bar.update(1)
                if not private:
                    bar.set_postfix(last=f"{recall:.4f}")
        if bar is not None:
            bar.close()
        score, c, model = best
        model.ledger = _selected_ledger(model, spec, cal)
        doc = tr.document(spec, cal, configs, c, model, source)
        priv = tr.private_document(spec, reps, c, score, source, fingerprint, cal)
        model.metrics = tr.test_metrics(model, split, doc, priv)
        priv["seconds"] = time.time() - t0       # (the time would reveal K: private)
        doc["model_fingerprint"] = model.fingerprint()
        doc["report"] = tr.report_lines(doc)
        priv["report"] = tr.report_lines(doc, priv)
        tr.write(out, model, doc, priv)
    return TuneResult(model, doc, reps, priv)


def one_candidate_note(spec: Spec, model) -> str | None:
    """What a private tuning of one candidate spends: its repetitions still run at the
    calibrated per-run ε, below the target, with nothing to choose between."""
    if not spec.charged or len(spec.candidates) != 1:
        return None
    return (f"note: the grid has one candidate, so there was nothing to select; the private "
            "selection still ran its repetitions at a per-run "
            f"ε = {model.config.privacy.epsilon:.3g} (of the {spec.base.privacy.epsilon:g} the "
            "whole tuning spends). To spend all of ε on "
            "one configuration, train it with `dpmt train`")


def _selected_ledger(model, spec: Spec, cal) -> PrivacyLedger:
    """The saved ledger: the selected run's releases (+ the score: one repetition), with the
    selection; its budget is the target of the whole tuning."""

    cfg = model.config
    led = PrivacyLedger(cfg.privacy.delta, epsilon_budget=spec.base.privacy.epsilon,
                        accountant=cfg.privacy.accountant, selection=spec.selection)
    releases = list(model.ledger.releases) + ([] if cal is None else [cal.score])
    if cal is not None and not same_event(releases, (*cal.releases, cal.score)):
        raise RuntimeError("internal error: the selected run's releases differ from the "
                           "calibrated repetition; refusing to save")
    for r in releases:
        led.record(r)
    return led


# -- the command line ----------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    add_config_arguments(p)
    g = p.add_argument_group("tuning")
    g.add_argument("--grid", action="append", metavar="FIELD=V1,V2,...", required=True,
                   help="candidate values of a TrainConfig field (repeatable; the grid is "
                        "every combination), e.g. --grid dim=8,16 --grid reg=1,10")
    g.add_argument("--selection", choices=["private", "literature"], default="private",
                   help="private (default: the only mode whose ε covers the choice): "
                        "Papernot & Steinke's random repetitions with noisy validation "
                        "scores, ε = --epsilon for the whole tuning (RDP). literature: each "
                        "candidate at --epsilon, best exact validation Recall@20, the choice "
                        "NOT charged (ε covers one run, not the choice among N)")
    g.add_argument("--mean-runs", type=parse_number("--mean-runs", "float"), default=None,
                   metavar="X", help="private: mean number K of repetitions (default: 2 × "
                                     "the number of candidates)")
    g.add_argument("--distribution", choices=["negative-binomial", "poisson"],
                   default="negative-binomial",
                   help="private: distribution of K: truncated negative binomial (K ≥ 1; "
                        "default) or Poisson (K = 0 with probability e^-mean: then nothing "
                        "is output)")
    g.add_argument("--shape", type=parse_number("--shape", "float"), default=None,
                   metavar="η", help="negative binomial shape η ≥ 0: 0 logarithmic, 1 "
                                     "geometric (default: 1)")
    g.add_argument("--score-noise-ratio", type=parse_number("--score-noise-ratio", "float"),
                   default=1.0, metavar="R", help="private: noise multiplier of the "
                   "validation score = R × the run's base multiplier (default: 1)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="run directory: DIR/model/ the selected model (shareable), "
                        "DIR/tune.json the grid and the selection (public), DIR/trainer/ "
                        "the trainer's private state (the secret, K, the repetitions and "
                        "their scores, exact metrics: never share it); the model and "
                        "tune.json are written only when tuning succeeds")
    p.add_argument("--resume", action="store_true",
                   help="show a finished tune in --out instead of running it again; an "
                        "unfinished private one is run again from the start with its saved "
                        "secret (DIR/trainer/): the same K and draws")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a model or tune already in --out")


def main(args) -> int:
    base, ex = config_from_args(args)
    if args.distribution == "poisson" and args.shape is not None:
        raise ConfigError("--shape is the negative binomial's; Poisson has none")
    mode = args.selection
    if mode == "literature" and (args.mean_runs is not None or args.shape is not None
                                 or args.distribution != "negative-binomial"):
        raise ConfigError("--mean-runs, --distribution and --shape are for --selection "
                          "private")
    shape = None if args.distribution == "poisson" else \
        (1.0 if args.shape is None else args.shape)
    if args.mean_runs is not None:
        check_range("--mean-runs", args.mean_runs, low=1.0, high=1e6)
    if shape is not None:
        check_range("--shape", shape, low=0.0, high=1e6)
    spec = Spec(base, tuple(build_candidates(base, parse_grid(args.grid))), mode,
                args.mean_runs, shape, args.score_noise_ratio)
    res = tune(spec, args.out, execution=ex, resume=args.resume, overwrite=args.overwrite)
    report = (res.private or {}).get("report") or res.doc["report"]
    print("\n".join(report))
    note = one_candidate_note(spec, res.model)
    if note:
        print(note)
    print(f"privacy unit: {PRIVACY_UNIT}")
    print(f"saved the selected model in {args.out}/model (shareable; {args.out}/tune.json: "
          f"the grid and the selection, public; {args.out}/trainer/: private, never share "
          f"it; dpmt recommend --model {args.out} --items ID,ID,...)")
    return 0
