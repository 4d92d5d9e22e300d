"""FActScore end to end: input → atomic facts → evidence → decisions → scores → report.

:class:`FactScorer` holds the loaded components and scores one item; :func:`score_file` reads
and validates a JSONL file, scores every item (resumably), writes the per-item JSONL and the
summary JSON atomically, and returns the summary.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from ..backends.onnx_session import session_spin
from ..cache import CallCache
from ..driver import RunFacts, run_file
from ..io import read_input
from ..io import summary_path_for  # noqa: F401  (re-exported: the API)
from ..progress import Progress
from ..records import ItemRecord, status_counts
from ..settings import Settings, check_threads
from .abstain import is_abstained
from .decomposers import describe_settings as decomposer_settings
from .items import MAX_OUTPUT_CHARS, Item, load_items  # noqa: F401  (re-exported: the API)
from .options import VERIFIERS, ScoreOptions, Timings  # noqa: F401  (re-exported: the API)
from .score import aggregate, apply_run_share, fact_settings, response_score
from .npm import PASSAGE_TEXT as NPM_PASSAGES
from .sentences import SPLITTER
from .verifiers import VerifierContext, make_verifier

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
        if llm is None:  # a kernel this build or CPU does not have is refused before anything loads
            from ..backends.llama_kernels import resolve_kernel

            resolve_kernel(settings.llm_kernel)
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
        self.timings = Timings()
        self.counts = {"generated": 0, "given": 0}  # responding items by where their facts came from (finalize)
        self.run_share: float | None = None  # the run's share of supported facts (finalize)
        ctx = VerifierContext(settings, options, self.bundle, self.store, self.cache, lambda: self.llm)
        self.verifier = make_verifier(ctx, self.timings)

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
            from .decomposers import Models, make_decomposer

            self._generator = make_decomposer(self.options.decomposer, lambda: self.llm,
                                              demo_shortcut=self.options.demo_shortcut,
                                              models=Models(self.settings, self.bundle, self.cache))
        return self._generator

    @generator.setter
    def generator(self, generator) -> None:
        self._generator = generator

    def identity(self) -> dict:
        """What a result depends on, known before any model runs (the resume key)."""
        llm = self.settings.llm
        llm_id = self.bundle.get(llm).sha256 if llm in self.bundle.entries else str(llm)
        return {"settings": self.describe()["settings"], "llm": llm_id, "store": self.store.sha256,
                "embed": self.embedder.sha256, "verifier": self.verifier.sha256,
                "verifier_decisions": self.verifier.decisions_sha256}

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
        if self.llm_loaded and getattr(self._llm, "kernel", None) is not None:
            models["llm"]["cpu_kernel"] = self._llm.kernel.to_json()  # what computed its bits, and its instruction sets
        runner = getattr(self._generator, "runner", None)  # a decomposer with a model of its own (tuned)
        if runner is not None and runner.name in self.bundle.entries:
            entry = self.bundle.get(runner.name).to_json()
            training = entry["extra"].pop("training", None) or {}  # the build report is long: its CPU is kept
            models["decomposer"] = entry | {"sha256": runner.sha256} | (
                {"build_cpu": training["build_cpu"]} if training.get("build_cpu") else {})
            if getattr(runner, "kernel", None) is not None:
                models["decomposer"]["cpu_kernel"] = runner.kernel.to_json()
        verifier = self.verifier.describe()
        models.update(verifier["models"])
        o = self.options
        return {
            "models": models,
            "store": {"path": str(self.store.path), "sha256": self.store.sha256, "meta": self.store.meta},
            "settings": {
                "mode": o.mode, "gamma": o.gamma, "abstain": o.abstain, "k": o.k, "search_all": o.search_all,
                "npm": o.npm, "npm_threshold": o.npm_threshold if o.npm else None,
                "prompt_style": "chat-template" if o.chat_template else "completion (reference)",
                "verifier": self.verifier.kind,
                "share": verifier["share"],
                "decision": verifier["decision"],
                "context_budget_tokens": o.context_budget if o.mode == "shared-context" else None,
                "shared_context_order": ("passages retrieved for more facts first, then best rank; laid out in "
                                         "page order" if o.mode == "shared-context" else None),
                "parity_call_order": "facts sorted by their prompt's passage sequence to share KV prefixes",
                "sentence_splitter": SPLITTER,
                "atomic_facts": decomposer_settings(o.decomposer, o.demo_shortcut),
                "calibration": self.verifier.calibration_report(self.counts["generated"], self.counts["given"]),
                "npm_passages": NPM_PASSAGES if o.npm else None,
                "threads": self.settings.threads, "n_ctx": self.settings.n_ctx,
                "llm_kernel": self._kernel_setting(),
                "onnx_spin_us": session_spin(self.settings.threads),
                "decode_parallel": self.settings.parallel if self.llm_loaded else None,  # no LLM: nothing decoded
            },
        }

    def _kernel_setting(self) -> dict:
        """llama.cpp's CPU kernel as asked for and the variant that runs it (known before any model
        loads: part of the resume key); the loaded LLM's entry adds its instruction sets."""
        k = getattr(self._llm, "kernel", None) if self.llm_loaded else None  # runners made elsewhere may not say
        if k is not None:
            return {"requested": k.requested, "ran": k.name}
        from ..backends.llama_kernels import resolve_kernel

        return {"requested": self.settings.llm_kernel, "ran": resolve_kernel(self.settings.llm_kernel)}

    def run_fact_settings(self) -> dict | None:
        """What makes this run's generated facts (the LLM as loaded, else its bundle entry; None: unknown)."""
        from .decomposers import Models, fact_source, uses_llm

        o = self.options
        if not uses_llm(o.decomposer):
            name, sha = fact_source(o.decomposer, lambda: None, Models(self.settings, self.bundle))
        elif self.llm_loaded:
            name, sha = self._llm.name, self._llm.sha256
        elif self.settings.llm in self.bundle.entries:
            name, sha = self.settings.llm, self.bundle.get(self.settings.llm).sha256
        else:
            return None
        return fact_settings(name, sha, decomposer_settings(o.decomposer, o.demo_shortcut))

    def score_item(self, item: Item, progress: Progress | None = None) -> dict:
        """One item's output record; ``progress`` counts its facts as they are generated and verified."""
        return self.record(item, progress).to_json()

    def record(self, item: Item, progress: Progress | None = None) -> ItemRecord:
        o = self.options

        def unscored(status: str, before: dict | None = None, after: dict | None = None) -> ItemRecord:
            nulls = {"score": None, "init_score": None, "decisions": None}
            return ItemRecord(item.data, {"status": status, **(before or {}), **nulls, **(after or {})}, RESULT_KEYS)

        if item.problem:
            return unscored(item.problem[0], before={"error": item.problem[1]})
        if item.facts is None and is_abstained(item.output, o.abstain):
            return unscored("abstained")
        if not self.retriever.has_topic(item.topic) and not o.search_all:
            return unscored("topic_not_found", after={"error": self.retriever.missing_topic_message(item.topic)})
        t0 = time.monotonic()
        if item.facts is not None:
            facts, sentences = given_facts(item), None
        else:
            if self._generator is None and progress is not None:
                with progress.uncharged():  # the decomposer's model loads once: not a cost per fact
                    self.generator  # noqa: B018
            sentences = [asdict(s) for s in self.generator.run(item.output)]
            facts = [f for s in sentences for f in s["facts"]]
            self.timings.facts_generated += len(facts)
            if progress is not None:
                progress.advance(len(facts), unit=FACTS_GENERATED)
        t1 = time.monotonic()
        self.timings.atomic_facts += t1 - t0
        if not facts:
            return unscored("no_facts", after={"sentences": sentences})
        if progress is not None and not progress.is_upfront(FACTS_VERIFIED):
            progress.add_total(len(facts), FACTS_VERIFIED)
        evidence = [self.retriever.retrieve(item.topic, f) for f in facts]
        t2 = time.monotonic()
        npm0 = self.timings.npm
        decisions = self.verifier.verify(item.topic, facts, evidence, generated=sentences is not None)
        self.timings.retrieval += t2 - t1
        self.timings.verification += time.monotonic() - t2 - (self.timings.npm - npm0)
        self.timings.facts_verified += len(facts)
        if progress is not None:
            progress.advance(len(facts), unit=FACTS_VERIFIED)
        cal = self.verifier.calibration_of(generated=sentences is not None)
        # before the run share (finalize): the response's share under its calibration's own prior
        own_share = sum(d.probability for d in decisions) / len(decisions) if cal is not None else None
        score, init = response_score([d.is_supported for d in decisions], o.gamma, own_share)
        result = {"status": "ok", "score": round(score, 6), "init_score": round(init, 6), "num_facts": len(facts),
                  "calibration": cal.facts if cal is not None else None,
                  "generated": sentences is not None, "decisions": [d.to_json() for d in decisions]}
        if sentences is not None:
            result["sentences"] = sentences
        return ItemRecord(item.data, result, RESULT_KEYS)

    def priors(self) -> dict[str, float] | None:
        """Calibration name → the prior its probabilities hold under (None: the verifier counts decisions)."""
        cals = getattr(self.verifier, "calibrations", None)
        if not cals or self.options.share != "estimate" or self.options.npm:
            return None
        return {c.facts: c.prior for c in cals.values()}

    def finalize(self, results: list[dict]) -> list[dict]:
        """Every record of the run, its facts moved to the run's share (:func:`apply_run_share`), when
        the verifier estimates shares. Records are copied: what the partial file holds is unchanged."""
        import copy

        ok = [r for r in results if r.get("status") == "ok"]
        self.counts = {"generated": sum(1 for r in ok if r.get("generated")),
                       "given": sum(1 for r in ok if not r.get("generated"))}
        priors = self.priors()
        if priors is None:
            return results
        results = copy.deepcopy(results)
        self.run_share = apply_run_share(results, priors, self.options.gamma)
        return results

    def summary(self, results: list[dict], run: RunFacts) -> dict:
        """The summary of a file (its records finalized): the aggregate scores, statuses, models and
        settings, timings."""
        from ..backends.llm import LLMStats

        summary = aggregate(results, self.options.gamma, self.priors())
        if self.run_share is not None:
            summary["run_share"] = round(self.run_share, 6)
        summary["status_counts"] = status_counts(results)
        summary.update(self.describe())
        if self.settings.store_default:
            summary["store_default"] = True  # no store was named: the demo store stood in
        t = self.timings
        summary["timings"] = {
            "load_s": round(run.load_s, 3), "total_s": round(run.total_s, 3),
            "atomic_facts_s": round(t.atomic_facts, 3), "retrieval_s": round(t.retrieval, 3),
            "verification_s": round(t.verification, 3), "npm_s": round(t.npm, 3),
            "facts_generated": t.facts_generated, "facts_verified": t.facts_verified,
            "items_resumed": run.items_resumed,
        }
        s = self._llm.stats if self.llm_loaded else LLMStats()
        summary["llm_calls"] = {"calls": s.calls, "cached": s.cached_calls, "tokens_evaluated": s.tokens_evaluated,
                                "tokens_reused": s.tokens_reused, "tokens_generated": s.tokens_generated}
        return summary


# every field score_item writes: an input field of the same name is replaced
RESULT_KEYS = ("status", "error", "score", "init_score", "num_facts", "calibration", "generated", "decisions",
               "sentences")


def given_facts(item: Item) -> list[str]:
    """An item's own ``facts``, blank ones dropped."""
    return [f.strip() for f in item.facts if f.strip()]


def _declare_facts(scorer: FactScorer, pending: list[Item], progress: Progress) -> None:
    """With every fact given, the facts to verify are known up front: no extrapolation."""
    if pending and all(it.facts is not None for it in pending):
        o = scorer.options
        progress.add_total(sum(len(given_facts(it)) for it in pending
                               if o.search_all or scorer.retriever.has_topic(it.topic)), FACTS_VERIFIED)


def score_file(input_path: str | Path, output_path: str | Path, settings: Settings | None = None,
               options: ScoreOptions | None = None, resume: bool = False, scorer: FactScorer | None = None,
               summary_path: str | Path | None = None, executor=None, force: bool = False) -> dict:
    """Score a JSONL file; write ``output_path`` (one line per item) and the summary JSON.

    The input is read and checked, and every output path checked (not an input file, not a
    directory, writable), before any model is loaded. ``scorer``: an already loaded one.
    ``executor`` (default: this process, one item after the other) scores the pending items:
    see :mod:`fscore_lite.distributed`."""
    settings = settings or Settings()
    check_threads(settings.threads)  # a bad FSCORE_LITE_THREADS (no --threads) stops here, before any work
    options = options or ScoreOptions()
    options.validate()
    data = read_input(input_path)  # once: a pipe cannot be read twice
    items = load_items(data, options.max_output_chars)
    summary, _ = run_file(input_path, output_path, items, lambda: scorer or FactScorer(settings, options),
                          input_sha256=data.sha256, summary_path=summary_path, resume=resume, label="factscore",
                          progress=options.progress, note=lambda item: item.topic[:30], plan=_declare_facts,
                          executor=executor, force=force, protected=[settings.store, settings.models_dir])
    missing = summary["status_counts"].get("topic_not_found", 0)
    if summary.get("store_default") and missing:
        _warn_demo_store(summary["store"]["path"], missing, summary["num_items"])
    return summary


def _warn_demo_store(store: str, missing: int, total: int) -> None:
    """Said once per run: topics the implicit demo store lacks are not the user's mistake to guess."""
    import sys

    sys.stderr.write(
        f"warning: no --store was given, so the demo store ({store}, a few example pages) was used, and "
        f"{missing} of the {total} items have a topic that is not in it (status topic_not_found, no score).\n"
        "  Build a store from your own pages:  fscore-lite kb build PAGES.jsonl -o STORE\n"
        "  then pass it:                       fscore-lite score INPUT --store STORE  (or set FSCORE_LITE_STORE)\n")
    sys.stderr.flush()
