"""Topic-grouped cross-validation of the trained verifier's combiner (build step and meta-eval).

Examples are the annotated bios whose topic has a page in ``DATA/wiki-*/pages.jsonl``:
*human* facts labelled S or NS (what the combiner learns from, and what F1(NS) is measured
on) and the *model* facts the paper's estimator was evaluated on (what the estimated
FActScore, the ER and the threshold are computed from). Every fact is retrieved exactly as
``score`` retrieves it (same store, k, order) and featurised by the runtime's own
:class:`fscore_lite.factscore.trained.TrainedVerifier`.

Folds group topics (all bios and facts of a topic fall in one fold), assigned round-robin
over topics sorted by sha256 — fixed for a given topic set. In each fold, the combiner and
its threshold are fitted on the other folds' topics only and applied to the held-out ones, so
every reported estimate comes from a combiner that never saw that topic.
"""
from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..factscore.combiner import Combiner, fit_logistic, share_matching_threshold
from .factscore_human import human_fact_labels
from .labeled import SUBJECTS, AnnotatedBio, load_subject

# a bundle file kind: the out-of-fold cross-encoder features a fact-stage build recorded for its
# training facts (models/verifier/fact_stage.py)
OOF_KIND = "oof_scores"


@dataclass
class Fact:
    topic: str
    text: str
    bio: int  # index into Examples.bios
    label: bool | None  # human S (True) / NS (False); None for model facts


@dataclass
class Examples:
    bios: list[AnnotatedBio]
    human: list[Fact]
    model: list[Fact]
    human_share: list[float]  # per bio: the human FActScore (S / all, irrelevant sentences as NS)
    features: dict[str, list[dict[str, float]]] = field(default_factory=dict)  # "human"/"model" → rows

    @property
    def topics(self) -> list[str]:
        return sorted({b.topic for b in self.bios})


def load_examples(data: str | Path, pages: dict[str, str], subjects=SUBJECTS) -> Examples:
    bios = [b for s in subjects for b in load_subject(data, s) if b.responded and b.topic in pages and b.model_facts()]
    human, model, share = [], [], []
    for i, b in enumerate(bios):
        for s in b.sentences or ():
            if s.is_relevant:
                human += [Fact(b.topic, f.text, i, f.label == "S") for f in s.human_facts if f.label in ("S", "NS")]
        model += [Fact(b.topic, f, i, None) for f in b.model_facts()]
        labels = human_fact_labels(b)
        share.append(sum(labels) / len(labels))
    return Examples(bios, human, model, share)


def topic_folds(topics: list[str], k: int) -> dict[str, int]:
    """Topic → fold, round-robin over topics sorted by their sha256."""
    ordered = sorted(topics, key=lambda t: hashlib.sha256(t.encode("utf-8")).hexdigest())
    return {t: i % k for i, t in enumerate(ordered)}


def fact_positions(ex: Examples) -> dict[tuple[str, int], float]:
    """(kind, index) → the fact's place among its bio's facts of that kind
    (:func:`~fscore_lite.factscore.trained.relative_positions`, as in a scored response)."""
    from ..factscore.trained import relative_positions

    position: dict[tuple[str, int], float] = {}
    for kind in ("human", "model"):
        by_bio: dict[int, list[int]] = {}
        for i, f in enumerate(getattr(ex, kind)):
            by_bio.setdefault(f.bio, []).append(i)
        for idx in by_bio.values():
            position.update({(kind, i): p for i, p in zip(idx, relative_positions(len(idx)))})
    return position


def featurise(ex: Examples, retriever, verifier, progress=None, more=()) -> None:
    """Fill ``ex.features`` with the verifier's inputs for every human and model fact.

    ``more``: further (retriever, verifier) pairs with sessions of their own; the facts are then
    dealt round-robin to one Python thread per pair (onnxruntime runs without the GIL). Each
    fact is computed alone, exactly as ``score`` computes it, so the split changes no value."""
    import threading

    pool = [(retriever, verifier), *more]
    jobs = [(kind, i, f) for kind in ("human", "model") for i, f in enumerate(getattr(ex, kind))]
    position = fact_positions(ex)
    out: dict[str, list] = {kind: [None] * len(getattr(ex, kind)) for kind in ("human", "model")}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work(w: int) -> None:
        r, v = pool[w]
        try:
            for kind, i, f in jobs[w::len(pool)]:
                if errors:
                    return
                out[kind][i] = v.features(f.topic, f.text, r.retrieve(f.topic, f.text), position[(kind, i)])[0]
                if progress:
                    with lock:
                        progress()
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
            errors.append(e)

    if len(pool) == 1:
        work(0)
    else:
        threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(len(pool))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    ex.features.update(out)


def use_recorded_scores(ex: Examples, bundle, entry) -> int:
    """For a verifier whose cross-encoder was continued on its training facts (``--fact-stage``):
    give each fact of a training topic the out-of-fold ``ce_*`` features the build recorded — the
    scores of a model that did not train on that topic — in place of the installed model's, so
    held-out figures stay honest. Returns how many facts got them; 0 for other verifiers. A
    training topic's fact with no record is refused (its score would be in-sample)."""
    from ..errors import FscoreError
    from ..factscore.trained import CE_FEATURES

    files = [f for f in entry.files if f.kind == OOF_KIND]
    if not files:
        return 0
    with gzip.open(bundle.verify_file(files[0]), "rt", encoding="utf-8") as f:
        recorded = {(d["topic"], d["fact"]): d for d in map(json.loads, f)}
    trained = set(entry.extra.get("training", {}).get("topics", ()))
    n = 0
    for kind in ("human", "model"):
        for fact, row in zip(getattr(ex, kind), ex.features[kind]):
            rec = recorded.get((fact.topic, fact.text))
            if rec is not None:
                row.update({k: float(rec[k]) for k in CE_FEATURES})
                n += 1
            elif fact.topic in trained:
                raise FscoreError(f"the cross-encoder of '{entry.name}' was trained on the facts of '{fact.topic}' and "
                                  f"the build recorded no out-of-fold score for '{fact.text}': its held-out figures "
                                  "would be optimistic")
    return n


def worker_pool(bundle, store, entry, cache, workers: int, k: int, window_tokens: int, passages: int,
                embed_bundle=None):
    """``workers`` (retriever, verifier) pairs over one store, each with 1-thread sessions of its own
    (the store's embedder from ``embed_bundle``, default ``bundle``)."""
    from ..backends.cross_encoder import CrossEncoder
    from ..backends.embed import SentenceEmbedder
    from ..backends.onnx_base import bundle_files
    from ..factscore.retrieve import Retriever
    from ..factscore.trained import TrainedVerifier

    files = bundle_files(bundle, entry, "int8")
    pool = []
    for _ in range(max(1, workers)):
        embedder = SentenceEmbedder.from_bundle(embed_bundle or bundle, store.embed_model, 1)
        ce = CrossEncoder(files["weights"], files["tokenizer"], files.get("config"), name=entry.name,
                          sha256=files["sha256"], threads=1, cache=cache, max_length=window_tokens)
        pool.append((Retriever(store, embedder, k, False, cache), TrainedVerifier(ce, None, store, window_tokens, passages)))
    return pool


def fit_combiner(ex: Examples, features: tuple[str, ...], topics: set[str], l2: float = 1.0) -> Combiner:
    """Combiner and share-matching threshold fitted on the facts and bios of ``topics``."""
    rows = [(r, f.label) for r, f in zip(ex.features["human"], ex.human) if f.topic in topics]
    x = np.asarray([[r[n] for n in features] for r, _ in rows], dtype=np.float64)
    y = np.asarray([lab for _, lab in rows], dtype=np.float64)
    comb = fit_logistic(x, y, features, l2=l2)
    bios = [i for i, b in enumerate(ex.bios) if b.topic in topics]
    probs = bio_probabilities(ex, comb, set(bios))
    target = float(np.mean([ex.human_share[i] for i in bios]))
    return comb.with_threshold(share_matching_threshold([probs[i] for i in bios], target))


def fit_adjusted(ex: Examples, features: tuple[str, ...], topics: set[str], l2: float = 1.0,
                 inner: int = 4) -> Combiner:
    """:func:`fit_combiner` plus the PACC means (:meth:`Combiner.adjusted_share`): the mean
    probability of supported and of unsupported human facts of ``topics``, each predicted by a
    combiner fitted on the other ``inner`` topic-grouped folds of ``topics``."""
    comb = fit_combiner(ex, features, topics, l2)
    inner = min(inner, len(topics))
    if inner < 2:
        return comb  # too few topics to predict any out of fold: no adjustment
    res = cross_validate(ex, features, inner, l2, topics=topics)
    return comb.with_adjustment(*pacc_means(ex, res.human_prob, topics))


def pacc_means(ex: Examples, human_prob: list[float], topics: set[str] | None = None) -> tuple[float, float]:
    """The mean out-of-fold probability of supported and of unsupported human facts (of ``topics``)."""
    probs = [(p, f.label) for p, f in zip(human_prob, ex.human) if topics is None or f.topic in topics]
    return (float(np.mean([p for p, lab in probs if lab])), float(np.mean([p for p, lab in probs if not lab])))


def bio_probabilities(ex: Examples, comb: Combiner, bios: set[int]) -> dict[int, np.ndarray]:
    by_bio: dict[int, list[dict]] = {i: [] for i in bios}
    for r, f in zip(ex.features["model"], ex.model):
        if f.bio in by_bio:
            by_bio[f.bio].append(r)
    return {i: comb.probability(comb.matrix(rows)) for i, rows in by_bio.items()}


@dataclass
class CvResult:
    """Out-of-fold predictions: per human fact (supported?) and per bio (estimated score)."""

    human_pred: list[bool]
    bio_estimate: list[float]
    folds: dict[str, int]
    combiners: list[Combiner]
    human_prob: list[float] = field(default_factory=list)  # out-of-fold probability per human fact (nan: unused)
    bio_decisions: list[float] = field(default_factory=list)  # per bio: the share of facts decided supported


def bio_estimate(comb: Combiner, probs: np.ndarray) -> float:
    """A bio's estimated share of supported facts: PACC when the combiner has its means, else
    the share of facts above the threshold."""
    adjusted = comb.adjusted_share(probs)
    return float(np.mean(probs > comb.threshold)) if adjusted is None else adjusted


def cross_validate(ex: Examples, features: tuple[str, ...], k: int = 5, l2: float = 1.0,
                   topics: set[str] | None = None, adjust: bool = False) -> CvResult:
    """Topic-grouped k-fold predictions over ``topics`` (default: all); with ``adjust`` each
    fold's combiner also gets PACC means from an inner CV of its own training topics."""
    folds = topic_folds(sorted(topics) if topics is not None else ex.topics, k)
    human_pred = [False] * len(ex.human)
    human_prob = [float("nan")] * len(ex.human)
    estimate = [float("nan")] * len(ex.bios)
    decided = [float("nan")] * len(ex.bios)
    combiners = []
    x = np.asarray([[r[n] for n in features] for r in ex.features["human"]], dtype=np.float64)
    for fold in range(k):
        train = {t for t, f in folds.items() if f != fold}
        if len(train) == len(folds):
            continue  # more folds than topics: this one holds none out
        comb = fit_adjusted(ex, features, train, l2) if adjust else fit_combiner(ex, features, train, l2)
        combiners.append(comb)
        held_facts = [i for i, f in enumerate(ex.human) if folds.get(f.topic) == fold]
        if held_facts:
            probs = comb.probability(x[held_facts])
            for i, p in zip(held_facts, probs):
                human_prob[i] = float(p)
                human_pred[i] = bool(p > comb.threshold)
        held = {i for i, b in enumerate(ex.bios) if folds.get(b.topic) == fold}
        for i, p in bio_probabilities(ex, comb, held).items():
            estimate[i] = bio_estimate(comb, p)
            decided[i] = float(np.mean(p > comb.threshold))
    return CvResult(human_pred, estimate, folds, combiners, human_prob, decided)


def in_sample(ex: Examples, comb: Combiner) -> CvResult:
    """Predictions of one combiner on every example (topics it was trained on: optimistic)."""
    preds = [bool(p > comb.threshold) for p in comb.probability(comb.matrix(ex.features["human"]))]
    probs = bio_probabilities(ex, comb, set(range(len(ex.bios))))
    return CvResult(preds, [bio_estimate(comb, probs[i]) for i in range(len(ex.bios))], {}, [comb], [],
                    [float(np.mean(probs[i] > comb.threshold)) for i in range(len(ex.bios))])


def per_subject(ex: Examples, res: CvResult) -> list[dict]:
    """Per subject: bios, human and estimated FActScore (×100), ER, F1 of predicting NS."""
    from .factscore_er import f1_not_supported, f1_ns_ci, signed_error_ci

    out = []
    for subject in dict.fromkeys(b.subject for b in ex.bios):
        bios = [i for i, b in enumerate(ex.bios) if b.subject == subject]
        facts = [(p, bool(f.label), f.topic) for p, f in zip(res.human_pred, ex.human) if ex.bios[f.bio].subject == subject]
        preds, labels, topics = (list(c) for c in zip(*facts)) if facts else ([], [], [])
        human = 100 * float(np.mean([ex.human_share[i] for i in bios]))
        est = 100 * float(np.mean([res.bio_estimate[i] for i in bios]))
        f1 = f1_not_supported(preds, labels)
        counted = 100 * float(np.mean([res.bio_decisions[i] for i in bios])) if res.bio_decisions else est
        out.append({"subject": subject, "n_bios": len(bios), "human": human, "estimated": est,
                    "error_rate": abs(est - human), "f1_ns": f1, "estimated_by_decisions": counted,
                    "error_rate_by_decisions": abs(counted - human),
                    "signed_error_ci95": signed_error_ci([res.bio_estimate[i] for i in bios],
                                                         [ex.human_share[i] for i in bios],
                                                         [ex.bios[i].topic for i in bios]),
                    "f1_ns_ci95": f1_ns_ci(preds, labels, topics),
                    "n_facts": sum(len(ex.bios[i].model_facts()) for i in bios), "n_human_facts": len(facts)})
    return out


def _floor(ex: Examples, pages: dict[str, str]) -> CvResult:
    """The model-free word-overlap floor as predictions (no fitting)."""
    from .factscore_er import overlap_supported

    preds = [overlap_supported(f.text, pages[f.topic]) for f in ex.human]
    by_bio: dict[int, list[bool]] = {}
    for f in ex.model:
        by_bio.setdefault(f.bio, []).append(overlap_supported(f.text, pages[f.topic]))
    return CvResult(preds, [float(np.mean(by_bio[i])) for i in range(len(ex.bios))], {}, [])


def run_er_cv(data, settings, folds: int = 5, subjects=SUBJECTS, progress: bool = True) -> dict:
    """``meta-eval factscore-er --verifier trained --cv K`` on the bios of ``data``.

    The installed verifier's cross-encoder (trained on SNLI only, never on a FActScore topic)
    and its settings featurise every fact; the combiner is refitted in each topic-grouped
    fold on the other folds' topics, so every estimate comes from a combiner that never saw
    its topic. The lexical regression (page features only) is cross-validated the same way;
    the word-overlap floor needs no fitting."""
    import time

    from ..backends.embed import SentenceEmbedder
    from ..cache import CallCache
    from ..errors import FscoreError
    from ..factscore.page_features import FEATURES
    from ..factscore.retrieve import Retriever
    from ..factscore.trained import TrainedVerifier
    from ..manifest import Bundle
    from ..progress import Progress
    from ..store import open_store
    from .cv_report import paired_estimates
    from .factscore_er import ensure_store, ranking_preserved, wiki_pages

    if folds < 2:
        raise FscoreError(f"--cv needs at least 2 folds, not {folds}")
    pages, files = wiki_pages(data)
    ex = load_examples(data, pages, subjects)  # bad labels fail here, before any store is built
    if len(ex.topics) < folds:
        raise FscoreError(f"{len(ex.topics)} topics with pages and labels under {data}: too few for {folds} folds")
    store_path = ensure_store(files, settings, None)
    bundle = Bundle(settings.models_dir)
    store = open_store(store_path)
    cache = CallCache(settings.cache_path if settings.use_cache else None)
    verifier = TrainedVerifier.from_bundle(bundle, store, threads=settings.threads, cache=cache)
    entry = bundle.get(verifier.name)
    embedder = SentenceEmbedder.from_bundle(bundle, store.embed_model, settings.threads)
    retriever = Retriever(store, embedder, int(entry.extra.get("k", 5)), False, cache)
    t0 = time.monotonic()
    bar = Progress(None, "features", enabled=progress)
    bar.add_total(len(ex.human) + len(ex.model), "facts featurised")
    pool = worker_pool(bundle, store, entry, cache, settings.threads, retriever.k, verifier.builder.window_tokens,
                       verifier.builder.passages)  # one thread per core, 1-thread sessions each
    featurise(ex, *pool[0], lambda: bar.advance(1, unit="facts featurised"), more=pool[1:])
    bar.close()
    recorded = use_recorded_scores(ex, bundle, entry)
    names = tuple(entry.extra["combiner"]["features"])
    l2 = float(entry.extra.get("training", {}).get("config", {}).get("l2", 1.0))
    adjust = Combiner.from_json(entry.extra["combiner"]).adjusts  # the installed verifier's share estimator
    res = {"trained": cross_validate(ex, names, folds, l2, adjust=adjust),
           "lexical": cross_validate(ex, FEATURES, folds, l2, adjust=adjust), "floor": _floor(ex, pages)}
    rows = {k: per_subject(ex, v) for k, v in res.items()}

    return {"folds": folds, "verifier": verifier.name, "share": "adjusted (PACC)" if adjust else "decisions", "verifier_sha256": verifier.sha256, "store": str(store_path),
            "topics": len(ex.topics), "bios": len(ex.bios), "human_facts": len(ex.human), "model_facts": len(ex.model),
            "subjects": rows["trained"], "lexical": rows["lexical"], "floor": rows["floor"],
            "ranking_preserved": {k: ranking_preserved({r["subject"]: r["estimated"] for r in v}) for k, v in rows.items()},
            "trained_minus_lexical": paired_estimates(ex, res["trained"], res["lexical"]),
            "recorded_oof_facts": recorded,
            "features_s": round(time.monotonic() - t0, 1)}
