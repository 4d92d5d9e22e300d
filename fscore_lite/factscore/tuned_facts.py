"""``--decomposer tuned``: a small causal LM fine-tuned to turn one sentence into its atomic facts.

The model (role ``decomposer`` in the bundle, made by ``fscore-lite models train decomposer``) was
trained on the development topics' sentences and their human atomic facts with the prompt
:data:`PROMPT` and the target :func:`target`: no demos, a few tens of prompt tokens a sentence.
Decoding is greedy with drafts looked up in the sentence (facts copy its words), ended by the
default decomposer's stop rules (blank line, non-item line, repeated fact, runaway fact); a fact
whose content words equal an earlier fact's of the response is dropped. A response's facts are a
function of its text, the model file (sha256), these settings, the thread count and the recorded
CPU kernel.
"""
from __future__ import annotations

from ..errors import FscoreError

ROLE = "decomposer"
PROMPT = "Sentence: {sentence}\nFacts:\n"
MAX_TOKENS = 160
N_CTX = 1024
RULE = "tuned v1"  # names the prompt and stop rule in the call cache
NOT_INSTALLED = ("--decomposer tuned needs the fine-tuned decomposer in the model bundle: "
                 "`make models-decomposer` (or `fscore-lite models train decomposer`)")


def prompt(sentence: str) -> str:
    return PROMPT.format(sentence=sentence.strip())


def target(facts: list[str]) -> str:
    """What the model is trained to write after :func:`prompt`: one ``- fact`` line each, then a blank line."""
    return "".join(f"- {f.strip()}\n" for f in facts) + "\n"


def parse(text: str) -> list[str]:
    """The facts of a completion (its ``- `` lines)."""
    return [line[2:].strip() for line in text.split("\n") if line.startswith("- ") and line[2:].strip()]


def model_entry(bundle):
    """The bundle's fine-tuned decomposer entry (the error says how to make one)."""
    entry = bundle.first_for_role(ROLE)
    if entry is None:
        raise FscoreError(f"{NOT_INSTALLED}; none in {bundle.root}")
    return entry


def load_runner(settings, bundle, cache=None):
    """A llama.cpp runner of the installed decomposer (sha256-checked), at the run's threads and kernel."""
    from ..backends.llm import LlamaRunner
    from ..cache import CallCache

    entry = model_entry(bundle)
    path = bundle.verified_path(entry)
    return LlamaRunner(path, entry.sha256, entry.name, settings.threads, N_CTX,
                       cache=cache if cache is not None else CallCache(None), kernel=settings.llm_kernel)


def describe_settings() -> dict:
    from ..backends.llm_lookup import DRAFT, NGRAM
    from .fact_decoding import STOP_RULE

    return {"decomposer": "tuned",
            "decoding": (f"a fine-tuned decomposer model (role {ROLE}), prompt {PROMPT!r} with no demos (deviation); "
                         f"greedy, prompt-lookup drafts ({DRAFT} tokens, n-grams {list(NGRAM)}), <= {MAX_TOKENS} "
                         f"tokens, stop rules {STOP_RULE}"),
            "filters": {"duplicates": "a fact whose content words equal an earlier one's dropped (deviation)"},
            "demo_sentences": "not used (no demos)"}


class TunedDecomposer:
    """``tuned``: each sentence through the fine-tuned model, duplicates across the response dropped."""

    name = "tuned"

    def __init__(self, runner):
        self.runner = runner

    def describe(self) -> dict:
        return describe_settings()

    def sentence_facts(self, sentence: str) -> list[str]:
        from .fact_decoding import cut, fact_stop

        text = self.runner.generate_lookup(prompt(sentence), MAX_TOKENS, fact_stop, RULE)
        return parse(cut(text))

    def run(self, generation: str) -> list:
        from .atomic_facts import SentenceFacts
        from .fact_filters import drop_duplicates
        from .sentences import gets_no_facts, split_sentences

        sentences, _ = split_sentences(generation)
        seen: set = set()
        out = []
        for i, s in enumerate(sentences):
            facts = [] if gets_no_facts(s, i) or not s.strip() else self.sentence_facts(s)
            out.append(SentenceFacts(s.strip(), drop_duplicates(facts, seen)))
        return out
