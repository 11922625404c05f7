"""The outputs of ``dpmt tune`` (:mod:`dpmt.apps.tune`): ``tune.json``, the trainer's private
``trainer/tune_private.json``, the text reports, the run directory of the selected model,
and the ``--out`` / ``--resume`` checks.

Layout (as ``dpmt train``'s, :mod:`dpmt.train.rundir`)::

    OUT/model/    the selected model: model.json, item_embeddings.npz, ledger.json (shareable)
    OUT/tune.json the grid, the selection mechanism and its parameters, ε, δ, the selected
                  candidate (public: nothing data-dependent beyond the DP model itself)
    OUT/trainer/  PRIVATE, never shared: tune_private.json (the noise secret, K, every
                  repetition's candidate and score, the selected noisy score, exact
                  validation and test metrics, the time), metrics.json, train.log,
                  config.json

Nothing published lets K, a draw or a score be recomputed: the draws come from a secret
(:class:`~dpmt.privacy.randomness.NoiseSource`) that only ``trainer/`` holds. A tune with
``--noise-seed`` says in every output that it is NOT private against whoever knows the seed.
Every output states the selection mode and, in literature mode, that the choice was not
charged. The run directory is built in a staging folder and moved into ``--out`` only when
everything succeeded, ``model/model.json`` last.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from dpmt._io import atomic_write_bytes, atomic_write_json, atomic_write_text, jsonable
from dpmt.errors import ConfigError, DataError
from dpmt.model import Model
from dpmt.model_files import MODEL_FILE, SHARED_DIR, TRAINER_DIR
from dpmt.privacy.ledger import NOT_CHARGED, PRIVACY_UNIT
from dpmt.privacy.randomness import SEEDED_WARNING, NoiseSource

TUNE_FILE = "tune.json"
PRIVATE_FILE = "tune_private.json"


def _noise_note(source) -> dict:
    if source.reproducible:
        return {"source": "user-given seed (--noise-seed)", "note": SEEDED_WARNING}
    return {"source": "secret key from OS entropy",
            "note": "K, every repetition's draws and scores derive from a secret kept in the "
                    "trainer's private state; no published file lets them be recomputed"}


def document(spec, cal, configs, chosen: int, model, source) -> dict:
    """tune.json (public): the grid, the selection mechanism, ε, δ, the selected candidate.
    Never K, a draw, a seed, a score or an exact metric."""
    private, sel = spec.charged, spec.selection
    cands = [{"index": c.index, "values": c.values, "config": cfg.public_dict()}
             for c, cfg in zip(spec.candidates, configs)]
    doc = {"format": "dpmt-tune", "version": 2, "selection": spec.mode,
           "charged": sel.charged, "statement": sel.note(), "privacy_unit": PRIVACY_UNIT,
           "target_epsilon": spec.base.privacy.epsilon, "delta": spec.base.privacy.delta,
           "epsilon": model.ledger.epsilon(), "accountant": model.ledger.accountant,
           "per_run_epsilon": cal.run_epsilon if private else model.ledger.epsilon(),
           "split_seed": spec.base.data.seed,
           "grid": {k: list(dict.fromkeys(c.values[k] for c in spec.candidates))
                    for k in spec.candidates[0].values},
           "base_config": spec.base.public_dict(), "candidates": cands,
           "noise": _noise_note(source),
           "fingerprint": spec.fingerprint(public=True)}
    if private:
        doc.update(score=cal.score.to_dict(), calibration=cal.to_dict(), published=(
            "the selected model only; K, the candidates drawn, every score (the selected "
            "one's included) and every exact metric are internal to the mechanism: kept in "
            "the trainer's private state, not released"))
    else:
        doc["published"] = ("the selected model only; the exact validation scores of the "
                            "candidates are in the trainer's private state")
    doc["selected"] = {"index": chosen, "values": spec.candidates[chosen].values}
    return doc


def private_document(spec, reps, chosen: int, score: float, source, fingerprint: str,
                     cal) -> dict:
    """trainer/tune_private.json: everything the public document withholds."""
    private = spec.charged
    doc = {"format": "dpmt-tune-private", "version": 1, "status": "finished",
           "PRIVATE": "never share this file: it holds the noise secret of the tuning",
           "selection": spec.mode, "spec_fingerprint": fingerprint,
           "noise": source.to_private_state(), "repetitions_drawn": len(reps),
           "repetitions": reps}
    picked = {"index": chosen, "values": spec.candidates[chosen].values}
    if private:
        picked["validation_score"] = {
            "noisy_sum_recall@20": score, "noise_std": cal.score.noise_std,
            "what": "sum over validation users of their Recall@20 + N(0, σ²) (sensitivity "
                    "1); the validation users are the same for every candidate, so the "
                    "argmax of the sums is the argmax of the means"}
    else:
        picked["validation_recall@20"] = score
        doc["candidates"] = [{"index": r["candidate"],
                              "validation_recall@20": r["exact_recall@20"]} for r in reps]
    doc["selected"] = picked
    return doc


def test_metrics(model, split, doc, priv) -> dict:
    """metrics.json of the selected model (trainer-private): exact test metrics (labelled),
    baselines; the test summary also goes to the private document."""
    from dpmt.train.evaluate import evaluate
    from dpmt.train.rundir import baseline_metrics

    m = evaluate(model, split.train, split.test)
    m["privacy"].update(target_epsilon=doc["target_epsilon"], selection=doc["statement"])
    m["eval_set"] = "test"
    m["baselines"] = baseline_metrics(model, split.train, split.test)
    m["tuning"] = {k: doc[k] for k in ("selection", "charged", "statement")}
    m["tuning"]["tune_file"] = TUNE_FILE
    priv["selected"]["test"] = {
        "note": "exact test metrics of the selected model (an evaluation, as dpmt train "
                "prints; not a release covered by ε)",
        **{k: m["overall"][k] for k in ("recall@20", "ndcg@20", "users")}}
    return m


#: why a private tuning can spend less than its target ε (dpmt.privacy.selection)
UNDER_TARGET = ("below the target because of δ, not by choice: every normal of the noise sampler "
                "has a tail mass of ~2^-64 that the ledger charges as extra δ, and a private "
                "selection multiplies it by (1 + e^ε) over the mean number of repetitions, so "
                "past this ε it would use up δ = {delta:g}; a larger --delta (or a smaller "
                "--mean-runs) lets the tuning spend more")


def report_lines(doc, priv=None) -> list[str]:
    """The text report: public (``tune.json``) from ``doc`` alone; with ``priv`` the
    trainer's (stdout, ``trainer/train.log``), with the scores and exact metrics."""
    private, s = doc["selection"] == "private", doc["selected"]
    lines = [f"selection: {doc['selection']} — {doc['statement']}"]
    if doc["noise"]["source"].startswith("user-given seed"):
        lines.append(f"WARNING: {doc['noise']['note']}")
    if private:
        lines.append(f"per-run ε = {doc['per_run_epsilon']:.4g} (each repetition: training + "
                     f"noisy score, σ = {doc['score']['noise_std']:.4g}); the whole tuning: "
                     f"ε = {doc['epsilon']:.4f} at δ = {doc['delta']:g} (RDP, target "
                     f"{doc['target_epsilon']:g})")
        if doc["epsilon"] < 0.99 * doc["target_epsilon"]:
            lines.append(UNDER_TARGET.format(delta=doc["delta"]))
    elif priv is None:
        lines.append(f"{len(doc['candidates'])} candidates, each at ε = "
                     f"{doc['per_run_epsilon']:.4f} at δ = {doc['delta']:g}; the best exact "
                     "validation Recall@20 was selected")
    else:
        lines.append(f"{len(doc['candidates'])} candidates, each at ε = "
                     f"{doc['per_run_epsilon']:.4f} at δ = {doc['delta']:g}; validation "
                     "Recall@20 (exact):")
        lines += [f"  [{c['index']}] {label(doc['candidates'][c['index']]['values'])}: "
                  f"{c['validation_recall@20']:.4f}"
                  + (" <- selected" if c["index"] == s["index"] else "")
                  for c in priv["candidates"]]
    line = f"selected: [{s['index']}] {label(s['values'])}"
    if priv is not None and private:
        line += (f", noisy validation score "
                 f"{priv['selected']['validation_score']['noisy_sum_recall@20']:.3f} (sum over "
                 "validation users; private: not published)")
    lines.append(line)
    if priv is not None:
        t = priv["selected"]["test"]
        lines.append(f"test Recall@20 of the selected model (exact evaluation, not covered "
                     f"by ε; private): {t['recall@20']:.4f}, NDCG@20 {t['ndcg@20']:.4f} "
                     f"({t['users']} users)")
        if private:
            lines.append(f"K = {priv['repetitions_drawn']} repetitions (private: never publish "
                         "it)")
    if not private:
        lines.append(f"ε = {doc['epsilon']:.4f}: {NOT_CHARGED}")
    return lines


def label(values: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


def _read_private(out: Path) -> dict | None:
    from dpmt.train.rundir import trainer_dir

    pf = trainer_dir(out) / PRIVATE_FILE
    if not pf.is_file():
        return None
    try:
        d = json.loads(pf.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ConfigError(f"{pf} is corrupted; start again with --overwrite") from None
    if not isinstance(d, dict):
        raise ConfigError(f"{pf} is corrupted; start again with --overwrite")
    return d


def check_out(out: Path, fingerprint: str, *, resume: bool, overwrite: bool):
    """What ``out`` holds for this tune: ``(model, doc, private)`` when ``resume`` finds it
    finished; the saved :class:`~dpmt.privacy.randomness.NoiseSource` when ``resume`` finds
    it unfinished (a private tune saves its secret before training); else None. Refuses an
    ``out`` that cannot take it (like ``dpmt train``), and a different tune."""
    from dpmt.train.rundir import check_output_dir, model_dir

    if resume and overwrite:
        raise ConfigError("--resume and --overwrite contradict each other: choose one")
    finished = (model_dir(out) / MODEL_FILE).is_file()
    priv = _read_private(out) if (resume or not overwrite) else None
    if resume and priv is not None:
        if priv.get("spec_fingerprint") != fingerprint:
            raise ConfigError(f"{out} holds a different tune (other grid, settings or seed); "
                              "resume with the same arguments or use another --out")
        tf = out / TUNE_FILE
        if finished and priv.get("status") == "finished" and tf.is_file():
            try:
                saved = json.loads(tf.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise ConfigError(f"{tf} is corrupted; start again with --overwrite") \
                    from None
            model = Model.load(out)
            if not isinstance(saved, dict) or \
                    model.fingerprint() != saved.get("model_fingerprint"):
                raise DataError(f"{out}: the model does not match {TUNE_FILE} (files changed "
                                "or mixed); tune again with --overwrite")
            return model, saved, priv
        if not finished:
            try:
                return NoiseSource.from_private_state(priv["noise"])
            except (KeyError, TypeError, ValueError):
                raise ConfigError(f"{out}: the saved tune state is corrupted; start again "
                                  "with --overwrite") from None
    if priv is not None and not finished and not overwrite:
        raise ConfigError(f"{out} holds an unfinished tune; continue it with --resume (the "
                          "same draws), or pass --overwrite to start over (a second execution "
                          "of the mechanism: its ε composes with the first)")
    check_output_dir(out, resume=False, overwrite=overwrite)
    return None


def write_state(out: Path, fingerprint: str, source) -> None:
    """Save the secret of a private tune before it trains (``trainer/``, mode 0600), so
    that ``--resume`` redraws the same K and draws."""
    from dpmt.train.rundir import PRIVATE_NOTE, trainer_dir

    d = {"format": "dpmt-tune-private", "version": 1, "status": "running",
         "PRIVATE": "never share this file: it holds the noise secret of the tuning",
         "spec_fingerprint": fingerprint, "noise": source.to_private_state()}
    priv = trainer_dir(out)
    priv.mkdir(parents=True, exist_ok=True)
    atomic_write_text(priv / "PRIVATE.txt", PRIVATE_NOTE)
    atomic_write_bytes(priv / PRIVATE_FILE, (json.dumps(d, indent=2) + "\n").encode(),
                       mode=0o600)


def write(out: Path, model, doc: dict, priv: dict) -> None:
    """Build the run directory in a staging folder, then move it in: ``trainer/`` (private),
    ``tune.json``, then ``model/`` with ``model.json`` last."""
    from dpmt.train.checkpoint import CHECKPOINT_FILE
    from dpmt.train.rundir import CONFIG_FILE, PRIVATE_NOTE, write_run

    stage = Path(tempfile.mkdtemp(dir=out, prefix=".tune-"))
    try:
        write_run(model, stage)
        t = stage / TRAINER_DIR
        with open(t / "train.log", "a", encoding="utf-8") as f:
            f.write("\n".join(priv["report"]) + "\n")
        atomic_write_text(t / CONFIG_FILE, model.config.to_json())
        atomic_write_text(t / "PRIVATE.txt", PRIVATE_NOTE)
        atomic_write_bytes(t / PRIVATE_FILE,
                           (json.dumps(jsonable(priv), indent=2) + "\n").encode(), mode=0o600)
        atomic_write_json(stage / TUNE_FILE, doc)
        (out / SHARED_DIR / MODEL_FILE).unlink(missing_ok=True)  # not a model from here on
        (out / TRAINER_DIR / CHECKPOINT_FILE).unlink(missing_ok=True)
        for sub in (TRAINER_DIR, SHARED_DIR):
            (out / sub).mkdir(parents=True, exist_ok=True)
            for name in sorted(os.listdir(stage / sub), key=lambda n: n == MODEL_FILE):
                os.replace(stage / sub / name, out / sub / name)
            if sub == TRAINER_DIR:
                os.replace(stage / TUNE_FILE, out / TUNE_FILE)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
