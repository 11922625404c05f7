"""The outputs of ``dpmt tune`` (:mod:`dpmt.apps.tune`): ``tune.json``, the text report, the
run directory of the selected model, and the ``--out`` / ``--resume`` checks.

In private mode only what Papernot & Steinke's guarantee covers is written: the grid (public),
the selected repetition's candidate, model and noisy score, the calibration; never K, the
candidates drawn or the other repetitions' scores. Every output states the selection mode
and, in literature mode, that the choice was not charged. The run directory is built in a
staging folder and moved into ``--out`` only when everything succeeded, ``model.json`` last.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from dpmt.errors import ConfigError, DataError
from dpmt.privacy.ledger import NOT_CHARGED, PRIVACY_UNIT

TUNE_FILE = "tune.json"


def document(spec, cal, configs, reps, chosen: int, score: float, model) -> dict:
    """tune.json. Private mode: the grid and the selected repetition only."""
    private, sel = spec.mode == "private", spec.selection
    cands = [{"index": c.index, "values": c.values, "config": cfg.to_dict()}
             for c, cfg in zip(spec.candidates, configs)]
    if not private:
        for e, r in zip(cands, reps):
            e["validation_recall@20"] = r["score"]
    doc = {"format": "dpmt-tune", "version": 1, "selection": spec.mode,
           "charged": sel.charged, "statement": sel.note(), "privacy_unit": PRIVACY_UNIT,
           "target_epsilon": spec.base.epsilon, "delta": spec.base.delta,
           "epsilon": model.ledger.epsilon(), "accountant": model.ledger.accountant,
           "per_run_epsilon": cal.run_epsilon if private else model.ledger.epsilon(),
           "split_seed": spec.base.seed,
           "grid": {k: list(dict.fromkeys(c.values[k] for c in spec.candidates))
                    for k in spec.candidates[0].values},
           "base_config": spec.base.to_dict(), "candidates": cands,
           "fingerprint": spec.fingerprint()}
    picked = {"index": chosen, "values": spec.candidates[chosen].values}
    if private:
        doc.update(score=cal.score.to_dict(), calibration=cal.to_dict(), published=(
            "the selected repetition only (its candidate, model and noisy score); K, the "
            "candidates drawn and the other scores are internal to the mechanism: not "
            "released"))
        picked["validation_score"] = {
            "noisy_sum_recall@20": score, "noise_std": cal.score.noise_std,
            "what": "sum over validation users of their Recall@20 + N(0, σ²) (sensitivity "
                    "1); the validation users are the same for every candidate, so the "
                    "argmax of the sums is the argmax of the means"}
    else:
        picked["validation_recall@20"] = score
    doc["selected"] = picked
    return doc


def test_metrics(model, split, doc) -> dict:
    """metrics.json of the selected model: exact test metrics (labelled), baselines."""
    from dpmt.train.evaluate import evaluate
    from dpmt.train.rundir import baseline_metrics

    m = evaluate(model, split.train, split.test)
    m["privacy"].update(target_epsilon=doc["target_epsilon"], selection=doc["statement"])
    m["eval_set"] = "test"
    m["baselines"] = baseline_metrics(model, split.train, split.test)
    m["tuning"] = {k: doc[k] for k in ("selection", "charged", "statement")}
    m["tuning"]["tune_file"] = TUNE_FILE
    doc["selected"]["test"] = {
        "note": "exact test metrics of the selected model (an evaluation, as dpmt train "
                "prints; not a release covered by ε)",
        **{k: m["overall"][k] for k in ("recall@20", "ndcg@20", "users")}}
    return m


def report_lines(doc) -> list[str]:
    private, s = doc["selection"] == "private", doc["selected"]
    lines = [f"selection: {doc['selection']} — {doc['statement']}"]
    if private:
        lines.append(f"per-run ε = {doc['per_run_epsilon']:.4g} (each repetition: training + "
                     f"noisy score, σ = {doc['score']['noise_std']:.4g}); the whole tuning: "
                     f"ε = {doc['epsilon']:.4f} at δ = {doc['delta']:g} (RDP, target "
                     f"{doc['target_epsilon']:g})")
    else:
        lines.append(f"{len(doc['candidates'])} candidates, each at ε = "
                     f"{doc['per_run_epsilon']:.4f} at δ = {doc['delta']:g}; validation "
                     "Recall@20 (exact):")
        lines += [f"  [{c['index']}] {label(c['values'])}: {c['validation_recall@20']:.4f}"
                  + (" <- selected" if c["index"] == s["index"] else "")
                  for c in doc["candidates"]]
    lines.append(f"selected: [{s['index']}] {label(s['values'])}" + (
        f", noisy validation score {s['validation_score']['noisy_sum_recall@20']:.3f} (sum "
        "over validation users)" if private else ""))
    t = s["test"]
    lines.append(f"test Recall@20 of the selected model (exact evaluation, not covered by "
                 f"ε): {t['recall@20']:.4f}, NDCG@20 {t['ndcg@20']:.4f} ({t['users']} users)")
    if not private:
        lines.append(f"ε = {doc['epsilon']:.4f}: {NOT_CHARGED}")
    return lines


def label(values: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


def check_out(out: Path, fingerprint: str, *, resume: bool, overwrite: bool):
    """The saved result when ``resume`` finds this very tune finished in ``out`` (else None);
    refuse an ``out`` that cannot take it (like ``dpmt train``)."""
    from dpmt.model import MODEL_FILE, Model
    from dpmt.train.rundir import check_output_dir

    if resume and overwrite:
        raise ConfigError("--resume and --overwrite contradict each other: choose one")
    tf = out / TUNE_FILE
    if resume and tf.is_file() and (out / MODEL_FILE).is_file():
        try:
            saved = json.loads(tf.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ConfigError(f"{tf} is corrupted; start again with --overwrite") from None
        if not isinstance(saved, dict) or saved.get("fingerprint") != fingerprint:
            raise ConfigError(f"{out} holds a different tune (other grid, settings or seed); "
                              "resume with the same arguments or use another --out")
        model = Model.load(out)
        if model.fingerprint() != saved.get("model_fingerprint"):
            raise DataError(f"{out}: the model does not match {TUNE_FILE} (files changed or "
                            "mixed); tune again with --overwrite")
        return model, saved
    check_output_dir(out, resume=False, overwrite=overwrite)
    return None


def write(out: Path, model, doc: dict) -> None:
    """Build the run directory in a staging folder, then move it in, ``model.json`` last."""
    from dpmt._io import atomic_write_json, atomic_write_text
    from dpmt.model import MODEL_FILE
    from dpmt.train.rundir import CONFIG_FILE, write_run

    stage = Path(tempfile.mkdtemp(dir=out, prefix=".tune-"))
    try:
        write_run(model, stage)
        meta = json.loads((stage / MODEL_FILE).read_text(encoding="utf-8"))
        meta["tuning"] = model.metrics["tuning"]
        atomic_write_json(stage / MODEL_FILE, meta)
        with open(stage / "train.log", "a", encoding="utf-8") as f:
            f.write("\n".join(doc["report"]) + "\n")
        atomic_write_text(stage / CONFIG_FILE, model.config.to_json())
        atomic_write_json(stage / TUNE_FILE, doc)
        for stale in (MODEL_FILE, "checkpoint.npz"):
            (out / stale).unlink(missing_ok=True)     # no longer a model from here on
        for name in sorted(os.listdir(stage), key=lambda s: s == MODEL_FILE):
            os.replace(stage / name, out / name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
