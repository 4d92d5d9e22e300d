"""The training examples of the trained verifier's combiner (build step and meta-eval).

Examples are the annotated bios whose topic has a page in ``DATA/wiki-*/pages.jsonl``:
*human* facts labelled S or NS (what the combiner learns from, and what F1(NS) is measured
on) and the *model* facts the paper's estimator was evaluated on (what the estimated
FActScore, the ER and the threshold are computed from). Every fact is retrieved exactly as
``score`` retrieves it (same store, k, order) and featurised by the runtime's own
:class:`fscore_lite.factscore.trained.TrainedVerifier`.
"""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from .labeled import SUBJECTS, AnnotatedBio, human_fact_labels, load_subject

# a bundle file kind: the out-of-fold cross-encoder features a fact-stage build recorded for its
# training facts (models/verifier/fact_stage.py)
OOF_KIND = "oof_scores"


@dataclass
class Fact:
    topic: str
    text: str
    bio: int  # index into Examples.bios
    label: float | None  # human facts: S 1 / NS 0; model-made facts: their silver label (None: not labelled)


OWN = "own:"  # the kind of a decomposer's own facts: "own:NAME"


@dataclass
class Examples:
    bios: list[AnnotatedBio]
    human: list[Fact]
    model: list[Fact]  # the paper's InstructGPT facts (what `score` gets as given facts)
    human_share: list[float]  # per bio: the human FActScore (S / all, irrelevant sentences as NS)
    features: dict[str, list[dict[str, float]]] = field(default_factory=dict)  # kind → rows
    own: dict[str, list[Fact]] = field(default_factory=dict)  # decomposer name → its facts of the bios
    # LM → kind → rows: every fact as a cross-encoder fine-tuned without that LM's labels featurises it
    # (a fact-stage verifier's recorded scores); empty when the cross-encoder never saw FActScore labels
    held_lm_features: dict[str, dict[str, list[dict[str, float]]]] = field(default_factory=dict)
    ce_saw_every_lm: bool = False  # the cross-encoder was fine-tuned on every LM's facts: no LM can be held out

    @property
    def topics(self) -> list[str]:
        return sorted({b.topic for b in self.bios})

    @property
    def kinds(self) -> list[str]:
        """"human", "model" and one ``own:NAME`` per decomposer whose facts are here."""
        return ["human", "model", *(OWN + name for name in self.own)]

    def facts_of(self, kind: str) -> list[Fact]:
        return self.own[kind[len(OWN):]] if kind.startswith(OWN) else getattr(self, kind)

    def subset(self, keep: dict[str, list[int]]) -> "Examples":
        """The same bios with only the facts ``keep`` lists (kind → indices), unfeaturised."""
        pick = lambda kind: [self.facts_of(kind)[i] for i in keep.get(kind, [])]  # noqa: E731
        return Examples(self.bios, pick("human"), pick("model"), self.human_share,
                        own={k[len(OWN):]: pick(k) for k in self.kinds if k.startswith(OWN)})

    def without_lm(self, lm: str) -> "Examples":
        """The examples as every fitted part that never saw ``lm``'s labels featurises them."""
        from ..errors import FscoreError

        if self.ce_saw_every_lm:
            raise FscoreError("the cross-encoder of this verifier was fine-tuned on the facts of every LM (an older "
                              "--fact-stage build, cross-fitted over topics only): its scores cannot hold an LM out; "
                              "use --hold-out topic, or rebuild it with `fscore-lite models train verifier --fact-stage`")
        return dataclasses.replace(self, features=self.held_lm_features[lm]) if lm in self.held_lm_features else self

    def set_held_lm_scores(self, lms: list[str], score) -> None:
        """Fill ``held_lm_features`` (every fact as LM ``lm``'s held-out cross-encoders score it, for each
        of ``lms``) and give each fact in ``features`` its own LM's; ``score(lm, kind, i)``: the ``ce_*``
        features of fact ``i`` of ``kind`` for ``lm``, or None to keep the row's."""
        self.held_lm_features = {lm: {kind: [{**row, **(score(lm, kind, i) or {})} for i, row in enumerate(rows)]
                                      for kind, rows in self.features.items()} for lm in lms}
        for kind, rows in self.features.items():
            for i, (f, row) in enumerate(zip(self.facts_of(kind), rows)):
                row.update(score(self.bios[f.bio].subject, kind, i) or {})

    def add_own(self, name: str, facts_by_bio: dict[int, list[str]]) -> None:
        """A decomposer's facts of the bios (bio index → facts, in order), unlabelled until :func:`label_silver`."""
        self.own[name] = [Fact(self.bios[i].topic, f, i, None) for i in sorted(facts_by_bio) for f in facts_by_bio[i]]


def label_silver(ex: Examples, embedder, more=()) -> dict[str, list[dict]]:
    """Give every model-made fact (the paper's and each decomposer's) its silver label
    (:mod:`.silver`; ``more``: further embedders, one thread each); returns, per kind, the labels'
    agreement with the bios' human FActScores."""
    from .silver import agreement, silver_labels

    report = {}
    for kind in ex.kinds[1:]:
        facts = ex.facts_of(kind)
        labels, _ = silver_labels(ex.bios, [(f.bio, f.text) for f in facts], embedder, more)
        for f, lab in zip(facts, labels):
            f.label = lab
        report[kind] = agreement(labels, [f.bio for f in facts], ex.human_share, [b.subject for b in ex.bios])
    return report


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
    for kind in ex.kinds:
        by_bio: dict[int, list[int]] = {}
        for i, f in enumerate(ex.facts_of(kind)):
            by_bio.setdefault(f.bio, []).append(i)
        for idx in by_bio.values():
            position.update({(kind, i): p for i, p in zip(idx, relative_positions(len(idx)))})
    return position


def featurise(ex: Examples, retriever, verifier, progress=None, more=()) -> None:
    """Fill ``ex.features`` with the verifier's inputs for every fact of every kind not featurised yet.

    ``more``: further (retriever, verifier) pairs with sessions of their own; the facts are then
    dealt to one thread per pair (:mod:`.dealt`). Each fact is computed alone, exactly as ``score``
    computes it, so the split changes no value."""
    from .dealt import run_dealt

    kinds = [k for k in ex.kinds if k not in ex.features]
    jobs = [(kind, i, f) for kind in kinds for i, f in enumerate(ex.facts_of(kind))]
    position = fact_positions(ex)
    out: dict[str, list] = {kind: [None] * len(ex.facts_of(kind)) for kind in kinds}

    def one(worker, job) -> None:
        (r, v), (kind, i, f) = worker, job
        out[kind][i] = v.features(f.topic, f.text, r.retrieve(f.topic, f.text), position[(kind, i)])[0]

    run_dealt(jobs, [(retriever, verifier), *more], one, progress)
    ex.features.update(out)


def use_recorded_scores(ex: Examples, bundle, entry) -> int:
    """For a verifier whose cross-encoder was continued on its training facts (``--fact-stage``):
    give each fact of a training topic the out-of-fold ``ce_*`` features the build recorded in
    place of the installed model's, so held-out figures stay honest. The build recorded, for
    every LM, each fact as scored by a model that saw neither the fact's topic nor that LM's
    labels: ``ex.features`` get the scores of the model that held the fact's own LM out, and
    ``ex.held_lm_features`` every LM's view. A record without LMs (older builds: one model per
    topic fold, every LM seen) sets ``ex.ce_saw_every_lm``. Returns how many facts got recorded
    scores; 0 for other verifiers. A training topic's fact with no record is refused (its score
    would be in-sample)."""
    from ..errors import FscoreError
    from ..factscore.trained import CE_FEATURES

    files = [f for f in entry.files if f.kind == OOF_KIND]
    if not files:
        return 0
    with gzip.open(bundle.verify_file(files[0]), "rt", encoding="utf-8") as f:
        recorded = {(d.get("held_lm"), d["topic"], d["fact"]): {k: float(d[k]) for k in CE_FEATURES}
                    for d in map(json.loads, f)}
    lms = sorted({lm for lm, _, _ in recorded if lm is not None})
    trained = set(entry.extra.get("training", {}).get("topics", ()))
    probe = lms[0] if lms else None  # the build records every LM's scores of the same facts
    n = 0
    for kind in ex.kinds:
        for fact in ex.facts_of(kind):
            if (probe, fact.topic, fact.text) in recorded:
                n += 1
            elif fact.topic in trained:
                raise FscoreError(f"the cross-encoder of '{entry.name}' was trained on the facts of '{fact.topic}' "
                                  f"and the build recorded no out-of-fold score for '{fact.text}': its held-out "
                                  "figures would be optimistic")

    def score(lm, kind, i):  # a topic-only record keys every score by LM None
        fact = ex.facts_of(kind)[i]
        return recorded.get((lm if lms else None, fact.topic, fact.text))

    ex.set_held_lm_scores(lms, score)
    ex.ce_saw_every_lm = not lms
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


def held_out_bios(ex: Examples, limit: int | None, subjects=SUBJECTS) -> list[int]:
    """Indices of the bios evaluated: all, or the fixed sample of ``limit`` per subject."""
    from .labeled import fixed_sample

    chosen = []
    for s in subjects:
        bios = [b for b in ex.bios if b.subject == s]
        keep = {id(b) for b in fixed_sample(bios, limit)}
        chosen += [i for i, b in enumerate(ex.bios) if id(b) in keep]
    return chosen
