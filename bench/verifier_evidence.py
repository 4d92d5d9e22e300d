"""What the cross-encoder's evidence settings buy: passages per fact × window tokens, held out.

``python -m bench.verifier_evidence PxW [PxW ...] [--folds 3,5,10] [--data DIR]`` featurises every
training fact of ``DIR`` (default ``../shared/data``; the paper's, the human and every shipped
own-facts file's) with the installed verifier's NLI graph, the ``P`` best retrieved passages each cut
to a ``W``-token window (the build's settings are 2x64), exactly as ``fscore-lite models train
verifier`` and ``meta-eval --cv`` featurise them (:func:`fscore_lite.training.prepare.prepare_examples`),
then prints, for each fold count, the held-out ER and per-bio MAE of the default decomposer's own
facts per subject with the LM held out, as ``meta-eval factscore-er --verifier trained --cv K
--facts generated`` computes them, and for every setting after the first, its per-bio scores minus
the first setting's on the same bios with a 95% interval over resampled topics. Nothing is
installed. Cross-encoder calls go through the call cache, so a second run of a setting is quick.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path


def _setting(text: str) -> tuple[int, int]:
    try:
        p, w = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected PASSAGESxTOKENS such as 2x64, not {text!r}") from None
    if p < 1 or w < 16:
        raise argparse.ArgumentTypeError(f"{text}: at least 1 passage of 16 tokens")
    return p, w


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("settings", type=_setting, nargs="+", metavar="PxW")
    ap.add_argument("--folds", default="3,5,10")
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--threads", type=int, default=2, help="workers, each with 1-thread sessions")
    a = ap.parse_args()

    from fscore_lite.build_step import shipped_own_facts
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import Settings
    from fscore_lite.training.fit import FitSettings
    from fscore_lite.training.heldout import bio_scores, held_out_responses, paired_difference, subject_rows
    from fscore_lite.training.prepare import prepare_examples

    settings = Settings(threads=a.threads)
    bundle = Bundle(settings.models_dir)
    verifier = bundle.first_for_role("verifier")
    nli = bundle.get(verifier.extra["nli_model"])
    fit = FitSettings(tuple(verifier.extra["combiner"]["features"]),
                      float(verifier.extra.get("training", {}).get("config", {}).get("l2", 1.0)))
    k = int(verifier.extra.get("k", 5))
    kind = "own:default"
    print(f"verifier {verifier.name}: NLI graph {nli.name} ({nli.sha256[:12]}), {len(fit.features)} features, k {k}")
    first: dict[int, dict] = {}  # folds → the first setting's per-bio scores
    for passages, window in a.settings:
        t = time.monotonic()
        ex, *_ = prepare_examples(a.data, settings, bundle, nli, shipped_own_facts(None), k, window, passages)
        print(f"{passages}x{window}: {sum(len(ex.facts_of(x)) for x in ex.kinds)} facts featurised in "
              f"{time.monotonic() - t:.0f} s")
        for folds in (int(f) for f in a.folds.split(",")):
            responses = held_out_responses(ex, [kind], fit, "lm", folds)[kind]
            rows = subject_rows(ex, responses)
            er = " / ".join(f"{r['er']:.1f}" for r in rows)
            mae = " / ".join(f"{r['per_bio_mae']:.1f}" for r in rows)
            print(f"  {folds:>2} folds, the LM held out: ER {er} (sum {sum(r['er'] for r in rows):.1f}) | "
                  f"per-bio MAE {mae}")
            scores = bio_scores(ex, responses)
            if folds in first:
                diff = " / ".join(f"{d['difference']:+.1f} [{d['ci95'][0]:+.1f}, {d['ci95'][1]:+.1f}]"
                                  for d in paired_difference(ex, scores, first[folds]))
                print(f"            scores minus {a.settings[0][0]}x{a.settings[0][1]}'s, same bios: {diff}")
            else:
                first[folds] = scores


if __name__ == "__main__":
    main()
