"""``python -m bench.bio_residuals``: does a bio's held-out error follow something the bio shows?

Each LM's bios are scored as one run by verifier fits that saw neither that LM nor the bio's topic fold
(what ``meta-eval factscore-er --cv K --hold-out lm`` scores, each response at its own share). For each
LM this prints the per-bio MAE and, for each covariate of a bio, its correlation with the bio's human
FActScore and with the residual (human − score). A covariate that correlates with the residual is
something the estimate misses that a bio-level model could use; one that correlates only with the human
score is already carried by the facts. Covariates:

* ``log_page``: log of the length of the topic's page in ``wiki-factscore-dev`` (how much Wikipedia
  knows about the topic, a proxy of its popularity);
* ``log_response``: log of the response's length in characters;
* ``n_facts``: the number of facts the decomposer made;
* ``mean_probability``: the mean of the facts' calibrated probabilities (before any share is applied).

::

    python -m bench.bio_residuals --data ../shared/data [--facts default|tuned|paper] [--json OUT]
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from bench.response_prior import held_out_parser, held_out_run

COVARIATES = ("log_page", "log_response", "n_facts", "mean_probability")


def correlations(rows: list[dict], covariates=COVARIATES) -> dict:
    """Per-bio MAE (×100) of ``rows`` (each with ``human``, ``score`` and the covariates) and each
    covariate's Pearson correlation with the human score and with the residual human − score (None where
    a column is constant)."""
    human = np.asarray([r["human"] for r in rows], dtype=float)
    resid = human - np.asarray([r["score"] for r in rows], dtype=float)

    def corr(a, b):
        return float(np.corrcoef(a, b)[0, 1]) if len(a) > 1 and np.ptp(a) > 0 and np.ptp(b) > 0 else None

    out = {"n_bios": len(rows), "per_bio_mae": 100 * float(np.mean(np.abs(resid))), "covariates": {}}
    for c in covariates:
        x = np.asarray([r[c] for r in rows], dtype=float)
        out["covariates"][c] = {"with_human": corr(x, human), "with_residual": corr(x, resid)}
    return out


def bio_rows(ex, responses: dict, page_chars: dict[str, int]) -> list[dict]:
    """One row per scored bio: subject, human score, its held-out score (each subject's bios one run) and
    the covariates."""
    from fscore_lite.training.heldout import bio_scores

    rows = []
    for i, score in sorted(bio_scores(ex, responses).items()):
        bio, probs = ex.bios[i], responses[i].probs
        rows.append({"subject": bio.subject, "topic": bio.topic, "human": ex.human_share[i], "score": score,
                     "log_page": math.log(max(page_chars.get(bio.topic, 1), 1)),
                     "log_response": math.log(max(len(bio.output), 1)), "n_facts": len(probs),
                     "mean_probability": float(np.mean(probs))})
    return rows


def page_lengths(data: Path) -> dict[str, int]:
    """Topic → characters of its page in ``DATA/wiki-factscore-dev/pages.jsonl``."""
    out = {}
    path = data / "wiki-factscore-dev" / "pages.jsonl"
    for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if text.strip():
            try:
                page = json.loads(text)
                out[page["topic"]] = len(page["text"])
            except (ValueError, KeyError) as e:
                raise SystemExit(f"{path}:{n}: not a page record ({e})")
    return out


def main(argv=None) -> None:
    a = held_out_parser("python -m bench.bio_residuals", __doc__).parse_args(argv)
    prep, kind, responses = held_out_run(a)
    rows = bio_rows(prep.ex, responses, page_lengths(a.data))
    table = {s: correlations([r for r in rows if r["subject"] == s]) for s in dict.fromkeys(r["subject"] for r in rows)}
    print(f"facts {kind}; LM and topic held out; correlation of each covariate with the human score / the residual:")
    print(f"  {'subject':<13} {'bios':>4} {'MAE':>5}  " + "  ".join(f"{c:>22}" for c in COVARIATES))
    fmt = lambda v: "  —  " if v is None else f"{v:+.2f}"  # noqa: E731
    for s, t in table.items():
        cells = "  ".join(f"{fmt(t['covariates'][c]['with_human']):>10} / {fmt(t['covariates'][c]['with_residual']):<9}"
                          for c in COVARIATES)
        print(f"  {s:<13} {t['n_bios']:>4} {t['per_bio_mae']:>5.1f}  {cells}")
    if a.json:
        a.json.write_text(json.dumps({"facts": kind, "table": table, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
