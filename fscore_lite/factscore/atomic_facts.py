"""Atomic facts (SPEC FActScore §3): few-shot prompt, parsing, and the reference's clean-up.

One LLM call per sentence. The prompt is the first 7 demos of ``demons.json``, then the single
best BM25 match among all demo sentences (tokenised on spaces), then the target sentence.
The 7-demo prefix is identical for every call, so the LLM runner evaluates it once.
"""
from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from ..bm25 import BM25Okapi
from . import fact_decoding, spacy_pipeline
from .fact_filters import filters_of
from .sentences import gets_no_facts, split_sentences

N_FIXED_DEMOS = 7
N_BM25_DEMOS = 1
MAX_FACT_TOKENS = 128
STOP = ("\n\n",)  # a local model would go on with another demo block; the reference's GPT-3 stopped itself
INSTRUCTION = "Please breakdown the following sentence into independent facts: {}\n"


@lru_cache(maxsize=1)
def load_demos() -> dict[str, list[str]]:
    text = resources.files("fscore_lite").joinpath("data/demons.json").read_text(encoding="utf-8")
    return json.loads(text)


class DemoSelector:
    """BM25 over the demo sentences, split on single spaces as in the reference."""

    def __init__(self, demos: dict[str, list[str]]):
        self.sentences = list(demos.keys())
        self.bm25 = BM25Okapi([s.split(" ") for s in self.sentences])

    def best(self, sentence: str, k: int = N_BM25_DEMOS) -> list[str]:
        return [self.sentences[i] for i in self.bm25.top_n(sentence.split(" "), k)]


def _block(sentence: str, facts: list[str]) -> str:
    return INSTRUCTION.format(sentence) + "".join(f"- {f}\n" for f in facts) + "\n"


def fixed_prefix(demos: dict[str, list[str]]) -> str:
    """The 7 fixed demos every prompt opens with (the LLM runner keeps their KV state)."""
    keys = list(demos.keys())
    return "".join(_block(keys[i], demos[keys[i]]) for i in range(N_FIXED_DEMOS))


def build_prompt(sentence: str, demos: dict[str, list[str]], selector: DemoSelector) -> str:
    """SPEC §3: 7 fixed demos, the best BM25 demo, then the target with no facts."""
    prompt = fixed_prefix(demos)
    for match in selector.best(sentence):
        prompt += _block(match, demos[match])
    return prompt + INSTRUCTION.format(sentence)


def parse_facts(completion: str) -> list[str]:
    """SPEC §3 parsing: split on "- ", drop what precedes the first item, end the last with "."."""
    items = completion.split("- ")[1:]
    facts = [s.strip()[:-1] if s.strip()[-1:] == "\n" else s.strip() for s in items]
    facts = [f for f in facts if f]
    if facts and facts[-1][-1] != ".":
        facts[-1] = facts[-1] + "."
    return facts


# ---- the reference's post-processing (postprocess_atomic_facts) -----------------------------
MONTHS = [m.lower() for m in ("January February March April May June July August September October "
                              "November December").split()]
_VERBS = ["born.", " appointed.", " characterized.", " described.", " known.", " member.", " advocate.",
          "served.", "elected."]
_PERMITTED = ["founding member."]


def _normalize(s: str) -> str:
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _is_num(t: str) -> bool:
    try:
        int(t)
        return True
    except ValueError:
        return False


def _is_date(text: str) -> bool:
    return all(_is_num(t) or t in MONTHS for t in _normalize(text).split(" "))


def detect_entities(text: str, nlp) -> list[str]:
    """Dates and numbers mentioned in ``text`` (the reference's ``detect_entities``).

    The reference collects them in a set; here they are kept once each in the order they are
    found (entities in document order, then the numbers in text order), so that the clean-up
    below, which picks the first matching entity, gives the same facts in every process
    whatever the string hash seed."""
    entities: dict[str, None] = {}  # an ordered set

    def add(t: str):
        if "-" in t:
            for part in t.split("-"):
                entities[part.strip()] = None
        else:
            entities[t] = None

    for ent in nlp(text).ents:
        if ent.label_ in ("DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"):
            if _is_date(ent.text):
                add(ent.text)
            else:
                for tok in ent.text.split():
                    if _is_date(tok):
                        add(tok)
    for num in dict.fromkeys(re.findall(r"\b\d+\b", text)):
        if not any(num in e for e in entities):
            entities[num] = None
    return list(entities)


_LOAD = object()


def postprocess(pairs: list[tuple[str, list[str]]], para_breaks: list[int], nlp=_LOAD) -> list[tuple[str, list[str]]]:
    """SPEC §3 clean-up: merge one-word sentences into the previous one; drop facts whose
    dates/numbers do not occur in the sentence, and near-duplicate "… born." style facts.

    ``nlp`` is the spaCy pipeline (default: loaded once; None skips the entity clean-up).
    Every choice iterates lists in a fixed order, never a set of strings."""
    merged: list[list] = []
    for i, (sent, facts) in enumerate(pairs):
        sent = sent.strip()
        if len(sent.split()) == 1 and i not in para_breaks and i > 0:
            merged[-1][0] += " " + sent
            merged[-1][1] = merged[-1][1] + facts
        else:
            merged.append([sent, list(facts)])
    if nlp is _LOAD:
        nlp = spacy_pipeline.pipeline()
    if nlp is None:
        return [(s, f) for s, f in merged]
    out = []
    for sent, facts in merged:
        entities = detect_entities(sent, nlp)
        covered: dict[str, None] = {}
        new_facts: list[str] = []
        for i, fact in enumerate(facts):
            if any(fact.endswith(v) for v in _VERBS) and not any(fact.endswith(v) for v in _PERMITTED):
                if any(fact[:-1] in other for j, other in enumerate(facts) if j != i):
                    continue
            fact_entities = detect_entities(fact, nlp)
            covered.update((e, None) for e in fact_entities if e in entities)
            skip = False
            for new_ent in [e for e in fact_entities if e not in entities]:
                pre = next((e for e in entities if e.startswith(new_ent)), None)
                if pre is None:
                    skip = True
                    break
                fact = fact.replace(new_ent, pre)
                covered[pre] = None
            if skip or fact in new_facts:
                continue
            new_facts.append(fact)
        if set(entities) != set(covered):
            new_facts = facts  # the reference keeps the raw facts when spaCy disagrees with itself
        out.append((sent, new_facts))
    return out


@dataclass(frozen=True)
class SentenceFacts:
    sentence: str
    facts: list[str]


def describe_settings(demo_shortcut: bool, decomposer: str = "default") -> dict:
    """The atomic-fact settings that change facts, for the summary (and the resume key)."""
    from .fact_filters import describe_filters

    return {
        "demo_sentences": ("answered with their demo facts (--demo-shortcut, deviation)" if demo_shortcut
                           else "sent to the LM (reference)"),
        "spacy_cleanup": spacy_pipeline.status(),
        "decomposer": decomposer,
        "decoding": fact_decoding.describe(decomposer)["decomposer"],
        "filters": describe_filters(decomposer),
    }


class AtomicFactGenerator:
    """Sentences → atomic facts with a local LLM (greedy, cached): the ``default`` and ``reference``
    decomposers of :mod:`.decomposers`."""

    @property
    def name(self) -> str:
        return self.decomposer

    def __init__(self, llm, demos: dict[str, list[str]] | None = None, demo_shortcut: bool = False,
                 decomposer: str = "default"):
        self.llm = llm
        if decomposer not in fact_decoding.LLM_DECOMPOSERS:
            raise ValueError(f"{decomposer!r} is not an LLM decomposer ({', '.join(fact_decoding.LLM_DECOMPOSERS)})")
        self.decomposer = decomposer
        self.demos = demos or load_demos()
        self.selector = DemoSelector(self.demos)
        self.demo_shortcut = demo_shortcut
        keep = getattr(llm, "keep_prefix", None)
        if keep is not None:  # evaluated once, never pushed out by verification (cost only, same bits)
            keep(fixed_prefix(self.demos))
            if self.decomposer == "default":  # and the fixed demos with each BM25 demo after them
                for demo, demo_facts in self.demos.items():
                    keep(fixed_prefix(self.demos) + _block(demo, demo_facts), evictable=True)

    def facts_for_sentence(self, sentence: str) -> list[str]:
        """The LM's facts for a sentence, as in the reference, which sends every sentence to the
        LM (its demos only fill in sentences it has no answer for). With ``demo_shortcut`` (a
        named deviation, ``--demo-shortcut``) a sentence that is a demo gets the demo's facts."""
        if self.demo_shortcut and sentence in self.demos:
            return list(self.demos[sentence])
        return parse_facts(self._complete([build_prompt(sentence, self.demos, self.selector)])[0])

    def _complete(self, prompts: list[str]) -> list[str]:
        """The LM's completions of atomic-fact prompts, decoded as ``decomposer`` says."""
        if self.decomposer == "default":
            lookup = getattr(self.llm, "generate_lookup", None)
            if lookup is not None:
                return [lookup(p, MAX_FACT_TOKENS, fact_decoding.fact_stop, fact_decoding.STOP_RULE) for p in prompts]
            # an LM without drafting (test doubles): the same stop rules on its plain output
            return [fact_decoding.cut(self.llm.generate(p, MAX_FACT_TOKENS, STOP)) for p in prompts]
        many = getattr(self.llm, "generate_many", None)
        return (many(prompts, MAX_FACT_TOKENS, STOP) if many is not None
                else [self.llm.generate(p, MAX_FACT_TOKENS, STOP) for p in prompts])

    def describe(self) -> dict:
        """The atomic-fact settings that change facts, for the summary (and the resume key)."""
        return describe_settings(self.demo_shortcut, self.decomposer)

    def run(self, generation: str) -> list[SentenceFacts]:
        """A response's sentences and their facts. With ``--decomposer reference`` the sentences that
        go to the LM are generated together (:meth:`LlamaRunner.generate_many`: the same bytes as
        one at a time); by default each is decoded with prompt-lookup drafts (:mod:`.fact_decoding`)."""
        sentences, para_breaks = split_sentences(generation)
        facts: list[list[str] | None] = [
            [] if gets_no_facts(s, i) else (list(self.demos[s]) if self.demo_shortcut and s in self.demos else None)
            for i, s in enumerate(sentences)
        ]
        todo = [i for i, f in enumerate(facts) if f is None]
        completions = self._complete([build_prompt(sentences[i], self.demos, self.selector) for i in todo])
        for i, completion in zip(todo, completions):
            facts[i] = parse_facts(completion)
        pairs = [(s, f or []) for s, f in zip(sentences, facts)]
        return [SentenceFacts(s, f) for s, f in filters_of(self.decomposer)(postprocess(pairs, para_breaks))]
