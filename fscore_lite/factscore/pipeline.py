"""FActScore end to end: input → atomic facts → evidence → decisions → scores → report.

:class:`FactScorer` holds the loaded components and scores one item; :func:`score_file` reads
and validates a JSONL file, scores every item (resumably), writes the per-item JSONL and the
summary JSON atomically, and returns the summary.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import time
from dataclasses import asdict
from pathlib import Path

from ..backends.onnx_session import session_spin
from ..cache import CallCache
from ..io import ResumableJsonlWriter, atomic_write_json, check_writable_outputs
from ..io import summary_path_for as io_summary_path_for
from ..progress import Progress
from ..settings import Settings
from .abstain import is_abstained
from .atomic_facts import describe_settings as atomic_fact_settings
from .items import MAX_OUTPUT_CHARS, Item, load_items  # noqa: F401  (re-exported: the API)
from .options import VERIFIERS, ScoreOptions, Timings  # noqa: F401  (re-exported: the API)
from .score import aggregate, response_score
from .npm import PASSAGE_TEXT as NPM_PASSAGES
from .sentences import SPLITTER
from .verify import FALSE_WORDS, TRUE_WORDS

FACTS_GENERATED, FACTS_VERIFIED = "facts generated", "facts verified"  # progress units
class FactScorer:
    """Loaded components: LLM, embedder, store, retriever, fact generator, verifier, NP.

    The LLM is loaded only when something needs it: atomic-fact generation (items without
    ``facts``) or the LLM judge. With the trained verifier and given facts no LLM is loaded.
    """

    def __init__(self, settings: Settings, options: ScoreOptions, cache: CallCache | None = None,
                 llm=None, store=None, embedder=None):
        from ..backends.embed import SentenceEmbedder
        from ..manifest import Bundle
        from ..store import open_store
        from .retrieve import Retriever

        options.validate()
        self.settings, self.options = settings, options
        self.cache = cache if cache is not None else CallCache(settings.cache_path if settings.use_cache else None)
        self.bundle = Bundle(settings.models_dir)
        self._llm = llm
        self.store = store or open_store(settings.store)
        if embedder is None:
            name = self.store.embed_model if self.store.embed_model in self.bundle.entries else settings.embed
            embedder = SentenceEmbedder.from_bundle(self.bundle, name, settings.threads)
        if embedder.sha256 != self.store.embed_sha256:
            from ..errors import StoreError

            raise StoreError(
                f"store {settings.store} was embedded with model sha256 {self.store.embed_sha256[:12]}…, "
                f"but the installed {embedder.name} is {embedder.sha256[:12]}…; rebuild the store"
            )
        self.embedder = embedder
        self.retriever = Retriever(self.store, embedder, options.k, options.search_all, self.cache)
        self._generator = None
        self._verifier = None
        self.verifier_kind = options.verifier
        if self.verifier_kind == "auto":
            self.verifier_kind = "trained" if self.bundle.first_for_role("verifier") else "llm"
        self.trained = None
        self._stacked = None  # the llm+trained verifier, made (with the LLM) on first use
        if self.verifier_kind in ("trained", "llm+trained"):
            from .trained import TrainedVerifier

            self.trained = TrainedVerifier.from_bundle(self.bundle, self.store, threads=settings.threads,
                                                       cache=self.cache)
        self.npm = None
        if options.npm:
            from .npm import load_npm

            self.npm = load_npm(settings, self.bundle, self.store, options.npm_model, self.cache)
        self.timings = Timings()

    @property
    def llm(self):
        """The LLM runner, loaded (and hash-verified) on first use."""
        if self._llm is None:
            from ..backends.llm import load_llm

            self._llm = load_llm(self.settings, self.bundle, self.cache, chat_template=self.options.chat_template)
        return self._llm

    @llm.setter
    def llm(self, runner) -> None:
        self._llm = runner

    @property
    def llm_loaded(self) -> bool:
        return self._llm is not None

    @property
    def generator(self):
        """The atomic-fact generator (made, with the LLM, on first use)."""
        if self._generator is None:
            from .atomic_facts import AtomicFactGenerator

            self._generator = AtomicFactGenerator(self.llm, demo_shortcut=self.options.demo_shortcut,
                                                  decomposer=self.options.decomposer)
        return self._generator

    @generator.setter
    def generator(self, generator) -> None:
        self._generator = generator

    @property
    def verifier(self):
        """The LLM judge (``--verifier llm``), made on first use."""
        if self._verifier is None:
            from .verify import Verifier

            self._verifier = Verifier(self.llm, self.options.mode, self.options.context_budget)
        return self._verifier

    @property
    def fact_verifier(self):
        """The trained verifier, or for ``llm+trained`` the stacked one (loading the LLM)."""
        if self.verifier_kind != "llm+trained":
            return self.trained
        if self._stacked is None:
            from .stacked import LlmTrainedVerifier

            self._stacked = LlmTrainedVerifier.from_bundle(self.bundle, self.trained, self.llm)
        return self._stacked

    def identity(self) -> dict:
        """What a result depends on, known before any model runs (the resume key)."""
        llm = self.settings.llm
        llm_id = self.bundle.get(llm).sha256 if llm in self.bundle.entries else str(llm)
        return {"settings": self.describe()["settings"], "llm": llm_id, "store": self.store.sha256,
                "embed": self.embedder.sha256, "verifier": self.trained.sha256 if self.trained else None}

    def describe(self) -> dict:
        """Models, store and settings, for the summary (the LLM only when it was used)."""
        models = {"embed": {"name": self.embedder.name, "sha256": self.embedder.sha256}}
        comps = [("embed", self.embedder)]
        if self.llm_loaded:
            models["llm"] = {"name": self._llm.name, "sha256": self._llm.sha256}
            comps.append(("llm", self._llm))
        for role, comp in comps:
            if comp.name in self.bundle.entries:
                models[role] = self.bundle.get(comp.name).to_json() | {"sha256": comp.sha256}
        if self.trained is not None:
            entry = self.bundle.get(self.trained.name).to_json()
            # the training reports are long
            entry["extra"] = {k: v for k, v in entry["extra"].items() if k not in ("training", "llm_combiners")}
            models["verifier"] = entry | {"sha256": self.trained.sha256}
            if self.verifier_kind == "llm+trained":
                models["llm_combiner"] = {k: v for k, v in self.fact_verifier.record.items() if k != "training"}
        if self.npm is not None:
            models["mlm"] = {"name": self.npm.name, "sha256": self.npm.sha256}
        o = self.options
        return {
            "models": models,
            "store": {"path": str(self.store.path), "sha256": self.store.sha256, "meta": self.store.meta},
            "settings": {
                "mode": o.mode, "gamma": o.gamma, "abstain": o.abstain, "k": o.k, "search_all": o.search_all,
                "npm": o.npm, "npm_threshold": o.npm_threshold if o.npm else None,
                "prompt_style": "chat-template" if o.chat_template else "completion (reference)",
                "verifier": self.verifier_kind,
                "share": self._share_rule(),
                "decision": (self._trained_rule() if self.trained is not None else
                             f"logprob of first token: {list(TRUE_WORDS)} vs {list(FALSE_WORDS)} (logsumexp)"),
                "context_budget_tokens": o.context_budget if o.mode == "shared-context" else None,
                "shared_context_order": ("passages retrieved for more facts first, then best rank; laid out in "
                                         "page order" if o.mode == "shared-context" else None),
                "parity_call_order": "facts sorted by their prompt's passage sequence to share KV prefixes",
                "sentence_splitter": SPLITTER,
                "atomic_facts": atomic_fact_settings(o.demo_shortcut, o.decomposer),
                "npm_passages": NPM_PASSAGES if o.npm else None,
                "threads": self.settings.threads, "n_ctx": self.settings.n_ctx,
                "onnx_spin_us": session_spin(self.settings.threads),
                "decode_parallel": self.settings.parallel,
            },
        }

    def _share_rule(self) -> str:
        """How a response's share of supported facts is computed (a named deviation when adjusted)."""
        c = self.fact_verifier.combiner if self.trained is not None else None
        if c is None or not c.adjusts or self.npm is not None or self.options.share != "adjusted":
            return "decisions: the share of facts decided supported (reference)"
        return (f"adjusted (deviation, --share decisions for the reference's count): PACC, (mean probability − "
                f"{c.p_not_supported:.4f}) / ({c.p_supported:.4f} − {c.p_not_supported:.4f}) clipped to [0, 1], "
                "the means being the out-of-fold probabilities of supported / unsupported human facts")

    def _trained_rule(self) -> str:
        if self.verifier_kind == "llm+trained":
            return self.fact_verifier.rule()
        t = self.trained
        position = " + the fact's position in its response" if "position" in t.combiner.features else ""
        return (f"trained verifier {t.name}: cross-encoder entailment log-odds of the best {t.builder.passages} "
                f"retrieved passages ({t.builder.window_tokens}-token windows) + page-level features{position}, "
                f"logistic combiner; supported iff probability > {t.combiner.threshold:.4f}")

    def score_item(self, item: Item, progress: Progress | None = None) -> dict:
        """One item's output record; ``progress`` counts its facts as they are generated and verified."""
        o = self.options
        rec = dict(item.data)
        if item.problem:
            rec.update(status=item.problem[0], error=item.problem[1], score=None, init_score=None, decisions=None)
            return rec
        if item.facts is None and is_abstained(item.output, o.abstain):
            rec.update(status="abstained", score=None, init_score=None, decisions=None)
            return rec
        if not self.retriever.has_topic(item.topic) and not o.search_all:
            rec.update(status="topic_not_found", score=None, init_score=None, decisions=None,
                       error=self.retriever.missing_topic_message(item.topic))
            return rec
        t0 = time.monotonic()
        if item.facts is not None:
            facts, sentences = [f.strip() for f in item.facts if f.strip()], None
        else:
            sentences = [asdict(s) for s in self.generator.run(item.output)]
            facts = [f for s in sentences for f in s["facts"]]
            self.timings.facts_generated += len(facts)
            if progress is not None:
                progress.advance(len(facts), unit=FACTS_GENERATED)
        t1 = time.monotonic()
        self.timings.atomic_facts += t1 - t0
        if not facts:
            rec.update(status="no_facts", score=None, init_score=None, decisions=None, sentences=sentences)
            return rec
        if progress is not None and not progress.is_upfront(FACTS_VERIFIED):
            progress.add_total(len(facts), FACTS_VERIFIED)
        evidence = [self.retriever.retrieve(item.topic, f) for f in facts]
        t2 = time.monotonic()
        if self.trained is not None:
            verdicts = self.fact_verifier.verify(item.topic, facts, evidence)
        else:
            verdicts = self.verifier.verify(item.topic, facts, evidence)
        t3 = time.monotonic()
        decisions = []
        for fact, ev, v in zip(facts, evidence, verdicts):
            if self.trained is not None:
                d = {"atom": fact, "is_supported": bool(v.is_supported), "probability": round(v.probability, 5),
                     "rule": self.verifier_kind, "passage_scores": [round(x, 4) for x in v.passage_scores],
                     "features": v.features}
            else:
                d = {"atom": fact, "is_supported": bool(v.is_supported),
                     "margin": None if v.margin is None else round(v.margin, 4), "rule": v.rule}
            d["evidence"] = [{"id": e.passage.id, "title": e.passage.title, "score": round(e.score, 5)} for e in ev]
            if self.npm is not None and d["is_supported"]:
                p = self.npm.probability(item.topic, fact)
                d["npprob"] = round(p, 5)
                d["is_supported"] = p > o.npm_threshold
            decisions.append(d)
        self.timings.npm += time.monotonic() - t3
        self.timings.retrieval += t2 - t1
        self.timings.verification += t3 - t2
        self.timings.facts_verified += len(facts)
        if progress is not None:
            progress.advance(len(facts), unit=FACTS_VERIFIED)
        share = None
        if self.trained is not None and self.npm is None and o.share == "adjusted":
            share = self.fact_verifier.combiner.adjusted_share([v.probability for v in verdicts])
            if share is not None:
                rec["estimated_share"] = round(share, 6)
        score, init = response_score([d["is_supported"] for d in decisions], o.gamma, share)
        rec.update(status="ok", score=round(score, 6), init_score=round(init, 6), num_facts=len(facts),
                   decisions=decisions)
        if sentences is not None:
            rec["sentences"] = sentences
        return rec


def _run_key(path: Path, scorer: FactScorer) -> str:
    h = hashlib.sha256(path.read_bytes())
    h.update(json.dumps(scorer.identity(), sort_keys=True).encode())
    return h.hexdigest()



summary_path_for = io_summary_path_for  # OUT.summary.json, the convention score and q2 share


def score_file(input_path: str | Path, output_path: str | Path, settings: Settings | None = None,
               options: ScoreOptions | None = None, resume: bool = False, scorer: FactScorer | None = None,
               summary_path: str | Path | None = None) -> dict:
    """Score a JSONL file; write ``output_path`` (one line per item) and the summary JSON.

    The input is read and checked, and every output path checked (not an input file, not a
    directory, writable), before any model is loaded."""
    settings = settings or Settings()
    options = options or ScoreOptions()
    input_path, output_path = Path(input_path), Path(output_path)
    summary_path = Path(summary_path) if summary_path else summary_path_for(output_path)
    items = load_items(input_path, options.max_output_chars)
    check_writable_outputs([output_path, summary_path, output_path.with_name(output_path.name + ".partial")],
                           inputs=[input_path])
    t_start = time.monotonic()
    scorer = scorer or FactScorer(settings, options)
    t_loaded = time.monotonic()
    writer = ResumableJsonlWriter(output_path, resume=resume, run_key=_run_key(input_path, scorer))
    progress = Progress(len(items), "factscore", enabled=options.progress)
    # a stand-in scorer (tests, tools) may take the item alone
    with_progress = "progress" in inspect.signature(scorer.score_item).parameters
    pending = [it for it in items if not writer.done(it.line)]
    if with_progress and all(it.facts is not None for it in pending):  # every fact known: no extrapolation
        retriever = getattr(scorer, "retriever", None)
        progress.add_total(sum(len([f for f in it.facts if f.strip()]) for it in pending
                               if options.search_all or retriever is None or retriever.has_topic(it.topic)),
                           FACTS_VERIFIED)
    try:
        for item in items:
            if writer.done(item.line):
                progress.skip()
                continue
            rec = scorer.score_item(item, progress) if with_progress else scorer.score_item(item)
            writer.add(item.line, rec)
            progress.advance(note=item.topic[:30])
        progress.close()
        results = writer.ordered()
        summary = aggregate(results, options.gamma)
        summary["status_counts"] = _counts(results)
        summary.update(scorer.describe())
        demo_store = getattr(scorer, "settings", settings).store_default
        if demo_store:
            summary["store_default"] = True  # no store was named: the demo store stood in
        t = scorer.timings
        total = time.monotonic() - t_start
        summary["timings"] = {
            "load_s": round(t_loaded - t_start, 3), "total_s": round(total, 3),
            "atomic_facts_s": round(t.atomic_facts, 3), "retrieval_s": round(t.retrieval, 3),
            "verification_s": round(t.verification, 3), "npm_s": round(t.npm, 3),
            "facts_generated": t.facts_generated, "facts_verified": t.facts_verified,
            "items_resumed": progress.skipped,
        }
        from ..backends.llm import LLMStats

        s = scorer._llm.stats if scorer.llm_loaded else LLMStats()
        summary["llm_calls"] = {"calls": s.calls, "cached": s.cached_calls, "tokens_evaluated": s.tokens_evaluated,
                                "tokens_reused": s.tokens_reused, "tokens_generated": s.tokens_generated}
        summary["input"] = str(input_path)
        summary["output"] = str(output_path)
        atomic_write_json(summary_path, summary)  # first: if it fails, the partial file still resumes
        writer.finish()
        missing = summary["status_counts"].get("topic_not_found", 0)
        if demo_store and missing:
            _warn_demo_store(getattr(scorer, "settings", settings).store, missing, len(results))
    finally:
        progress.close()
        writer.close()
    return summary


def _warn_demo_store(store: Path, missing: int, total: int) -> None:
    """Said once per run: topics the implicit demo store lacks are not the user's mistake to guess."""
    import sys

    sys.stderr.write(
        f"warning: no --store was given, so the demo store ({store}, a few example pages) was used, and "
        f"{missing} of {total} topics were not found in it (status topic_not_found, no score).\n"
        "  Build a store from your own pages:  fscore-lite kb build PAGES.jsonl -o STORE\n"
        "  then pass it:                       fscore-lite score INPUT --store STORE  (or set FSCORE_LITE_STORE)\n")
    sys.stderr.flush()


def _counts(results: list[dict]) -> dict:
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return dict(sorted(counts.items()))
