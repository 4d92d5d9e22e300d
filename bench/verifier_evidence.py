"""What the cross-encoder's evidence settings buy: passages per fact × window tokens, held out.

``python -m bench.verifier_evidence PxW [PxW ...] [--folds 3,5,10] [--data DIR]`` featurises every
training fact of ``DIR`` (default ``../shared/data``) with the installed verifier's NLI graph, the
``P`` best retrieved passages each cut to a ``W``-token window (the build's settings are 2x64),
exactly as ``fscore-lite models train verifier`` and ``meta-eval --cv`` featurise them (same store,
retrieval, pair rule, one 1-thread session per worker), then prints the topic-grouped
cross-validated ER and F1(NS) per subject for each fold count, as ``meta-eval factscore-er
--verifier trained --cv K`` computes them, and for every setting after the first, its estimates
minus the first setting's on the same bios with a 95% interval over resampled topics
(:func:`fscore_lite.metaeval.cv_report.paired_estimates`). Nothing is installed. Cross-encoder calls
go through the call cache, so a second run of a setting is quick.
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

    from fscore_lite.cache import CallCache
    from fscore_lite.manifest import Bundle
    from fscore_lite.metaeval.cv_report import paired_estimates
    from fscore_lite.build_step import ensure_store
    from fscore_lite.training.combiner_cv import cross_validate, per_subject
    from fscore_lite.training.examples import featurise, load_examples, worker_pool
    from fscore_lite.training.labeled import wiki_pages
    from fscore_lite.settings import Settings
    from fscore_lite.store import open_store

    settings = Settings(threads=a.threads)
    pages, files = wiki_pages(a.data)
    store = open_store(ensure_store(files, settings, None))
    bundle = Bundle(settings.models_dir)
    verifier = bundle.first_for_role("verifier")
    nli = bundle.get(verifier.extra["nli_model"])
    names = tuple(verifier.extra["combiner"]["features"])
    l2 = float(verifier.extra.get("training", {}).get("config", {}).get("l2", 1.0))
    k = int(verifier.extra.get("k", 5))
    cache = CallCache(settings.cache_path)
    print(f"verifier {verifier.name}: NLI graph {nli.name} ({nli.sha256[:12]}), {len(names)} features, k {k}")
    first: dict[int, object] = {}  # folds → the first setting's held-out result
    for passages, window in a.settings:
        ex = load_examples(a.data, pages)
        pool = worker_pool(bundle, store, nli, cache, a.threads, k, window, passages)
        t = time.monotonic()
        featurise(ex, *pool[0], None, more=pool[1:])
        print(f"{passages}x{window}: {len(ex.human) + len(ex.model)} facts featurised in {time.monotonic() - t:.0f} s")
        for folds in (int(f) for f in a.folds.split(",")):
            res = cross_validate(ex, names, folds, l2, adjust=True)
            rows = per_subject(ex, res)
            er = " / ".join(f"{r['error_rate']:.1f}" for r in rows)
            f1 = " / ".join(f"{100 * (r['f1_ns'] or 0):.1f}" for r in rows)
            print(f"  {folds:>2} folds: ER {er} (sum {sum(r['error_rate'] for r in rows):.1f}) | F1(NS) {f1} "
                  f"(mean {sum(100 * (r['f1_ns'] or 0) for r in rows) / len(rows):.1f})")
            if folds in first:
                diff = " / ".join(f"{d['difference']:+.1f} [{d['ci95'][0]:+.1f}, {d['ci95'][1]:+.1f}]"
                                  for d in paired_estimates(ex, res, first[folds]))
                print(f"            estimate minus {a.settings[0][0]}x{a.settings[0][1]}'s, same bios: {diff}")
            else:
                first[folds] = res


if __name__ == "__main__":
    main()
