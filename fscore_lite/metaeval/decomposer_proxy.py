"""``meta-eval decomposer``: a cheap proxy for end-to-end agreement, sentence by sentence.

For a fixed sample of annotated sentences of the training bios (topics with a page under
``DATA/wiki-*``, the development topics), the decomposer's facts are compared with the human
atomic facts of the same sentence: how many (facts per sentence, and how many are over 15
words), coverage (the share of human facts that some generated fact entails) and precision
(the share of generated facts that some human fact entails), plus the share of degenerate
facts. Entailment here is token overlap, no model: ``a`` entails ``b`` when ≥ 80% of ``b``'s
content words occur in ``a``. Each filter of :mod:`fscore_lite.factscore.fact_filters` is
measured alone and all together on the same generated facts (one LLM call per sentence, cached).
Decomposers without an LLM (``parse``) are measured beside them on the same sentences, and with
only those asked for no LLM is loaded.
"""
from __future__ import annotations

import hashlib

from ..factscore.fact_filters import FILTERS, apply_filters
from ..factscore.fact_overlap import LONG_WORDS, compare, entails  # noqa: F401  (re-exported)
from ..training.labeled import SUBJECTS


def sample_sentences(data, pages: dict[str, str], limit: int | None, subjects=SUBJECTS) -> list[tuple[str, str, list[str]]]:
    """(topic, sentence, human facts) of relevant annotated sentences of bios with a page, a fixed
    sample of ``limit`` chosen by a stable hash of subject, bio line and sentence."""
    from ..training.labeled import load_subject

    rows = []
    for subject in subjects:
        for b in load_subject(data, subject):
            if not b.responded or b.topic not in pages:
                continue
            for j, s in enumerate(b.sentences):
                if s.is_relevant and s.human_facts:
                    key = hashlib.sha256(f"{subject}\t{b.line}\t{j}".encode()).hexdigest()
                    rows.append((key, b.topic, s.text, [f.text for f in s.human_facts]))
    rows.sort()
    return [(t, s, h) for _, t, s, h in (rows[:limit] if limit else rows)]


def run_proxy(data, settings, limit: int | None = 100, progress: bool = True, llm=None,
              decomposers: tuple[str, ...] = ("default", "parse")) -> dict:
    """The decomposers' facts against the human facts: for the LLM ones the reference's decoding with its
    post-processing, then each filter alone and all together; each other decomposer as it runs."""
    import time

    from ..factscore.decomposers import check_decomposer, make_decomposer, uses_llm
    from ..training.labeled import wiki_pages

    for name in decomposers:
        check_decomposer(name)
    pages, _ = wiki_pages(data)
    sents = sample_sentences(data, pages, limit)
    human = [h for _, _, h in sents]
    variants: dict[str, list[list[str]]] = {}
    seconds: dict[str, float] = {}
    report = {"sentences": len(sents), "limit": limit, "llm": None, "llm_sha256": None}
    if any(uses_llm(n) for n in decomposers):
        report.update(_llm_variants(settings, sents, variants, seconds, progress, llm))
    for name in decomposers:
        if not uses_llm(name):
            gen = make_decomposer(name, lambda: None)
            t0 = time.monotonic()
            variants[name] = [[f for sf in gen.run(s) for f in sf.facts] for _, s, _ in sents]
            seconds[name] = round(time.monotonic() - t0, 3)
    return report | {"entailment": "token overlap (>= 80% of the entailed fact's content words), no model",
                     "variants": {k: compare(v, human) for k, v in variants.items()},
                     "generation_s": seconds}


def _llm_variants(settings, sents, variants: dict, seconds: dict, progress: bool, llm) -> dict:
    import time

    from ..backends.llm import load_llm
    from ..cache import CallCache
    from ..factscore.atomic_facts import AtomicFactGenerator, postprocess
    from ..manifest import Bundle
    from ..progress import Progress

    if llm is None:
        llm = load_llm(settings, Bundle(settings.models_dir), CallCache(settings.cache_path if settings.use_cache else None))
    gen = AtomicFactGenerator(llm, decomposer="reference")
    t0 = time.monotonic()
    bar = Progress(len(sents), "decomposer proxy", enabled=progress)
    reference = []
    for _, s, _ in sents:
        reference.append([f for _, fs in postprocess([(s, gen.facts_for_sentence(s))], [0]) for f in fs])
        bar.advance(note=s[:30])
    bar.close()
    seconds["reference"] = round(time.monotonic() - t0, 1)
    variants["reference"] = reference
    for name in FILTERS:
        variants[name] = [apply_filters([("", fs)], (name,))[0][1] for fs in reference]
    variants["all filters"] = [apply_filters([("", fs)])[0][1] for fs in reference]
    return {"llm": llm.name, "llm_sha256": llm.sha256}


def format_proxy(report: dict) -> str:
    by = f"{report['llm']} ({report['llm_sha256'][:12]})" if report["llm"] else "no LLM"
    lines = [f"decomposer proxy: {report['sentences']} annotated sentences of the training bios, facts by "
             f"{by}; entailment by {report['entailment']}",
             f"{'variant':<14}{'facts/sent':>11}{'human':>7}{'>15 words':>10}{'human':>7}{'coverage':>10}"
             f"{'precision':>10}{'degenerate':>11}"]
    pct = lambda x: f"{100 * x:.1f}%" if x is not None else "-"  # noqa: E731
    for name, r in report["variants"].items():
        lines.append(f"{name:<14}{r['facts_per_sentence']:>11.2f}{r['human_facts_per_sentence']:>7.2f}"
                     f"{r['long_facts']:>10}{r['human_long_facts']:>7}{pct(r['coverage']):>10}"
                     f"{pct(r['precision']):>10}{pct(r['degenerate_share']):>11}")
    lines.append("generation: " + ", ".join(f"{k} {v} s" for k, v in report["generation_s"].items()))
    return "\n".join(lines)
