"""``--verifier llm+trained``: the trained verifier's logit and a local LLM's margin, stacked.

Per fact, two signals of different kinds:

* the trained verifier's combiner logit (cross-encoder passage scores + page features,
  :mod:`.trained`), and
* a local LLM's margin ``log P(True) − log P(False)`` for the next token of a short prompt: the
  reference's definition line, the best :data:`LLM_PASSAGES` retrieved passages — each cut, like
  the cross-encoder's, to the window of sentences that best matches the fact, here within
  :data:`LLM_WINDOW_TOKENS` tokens of the LLM's tokenizer — and the reference's question.

A logistic regression over the two (:data:`STACK_FEATURES`) gives the probability; its
coefficients and calibration (its probabilities under the labelled share of the facts it was
fitted on) are fitted by ``fscore-lite models train llm-combiner``
(:mod:`fscore_lite_models.verifier.llm_stack`) on human-labelled facts of the training topics,
with the trained logits taken out of fold, and recorded in the verifier's manifest entry under
the LLM's sha256: a combiner fitted on one LLM's margins is never applied to another's.

The short prompt is this mode's own (a named deviation): the reference's parity prompt (all
k passages whole, ~800 tokens) is ``--verifier llm``; five times as long, it is that much slower
to evaluate, and its leniency is what the combiner has to undo anyway.
"""
from __future__ import annotations

from ..errors import FscoreError
from .calibration import Calibration
from .combiner import Combiner
from .retrieve import Evidence
from .trained import TrainedVerdict, TrainedVerifier, evidence_window, relative_positions
from .verify import FALSE_WORDS, TRUE_WORDS, _definition, fact_suffix, margin_from_logprobs

STACK_FEATURES = ("trained_logit", "llm_margin")
LLM_PASSAGES = 2  # retrieved passages (best first) in the LLM's prompt
LLM_WINDOW_TOKENS = 120  # each passage's window, in the LLM's tokens


def window_prompt(topic: str, fact: str, evidence: list[Evidence], count_tokens,
                  passages: int = LLM_PASSAGES, budget: int = LLM_WINDOW_TOKENS) -> str:
    """The LLM's prompt for one fact: definition, the windows of the best ``passages`` passages
    (best last, as in the reference), then the question. A window is
    :func:`.trained.evidence_window` without a title (its budget still counts the ". " a title
    would be joined by)."""
    best = sorted(evidence, key=lambda e: e.rank)[:passages]
    windows = [evidence_window("", e.passage.text, fact, count_tokens, budget)[2:] for e in best]
    context = "".join("Text: {}\n\n".format(w) for w in reversed(windows)).strip()
    return _definition(topic) + context + fact_suffix(fact)


def llm_margin(llm, topic: str, fact: str, evidence: list[Evidence], passages: int = LLM_PASSAGES,
               budget: int = LLM_WINDOW_TOKENS) -> float:
    """The LLM's True − False margin on :func:`window_prompt` (through its call cache)."""
    prompt = window_prompt(topic, fact, evidence, lambda t: len(llm.tokenize(t, add_bos=False)), passages, budget)
    return margin_from_logprobs(llm.next_token_logprobs(prompt, list(TRUE_WORDS + FALSE_WORDS)))


def stack_record(entry, llm) -> dict | None:
    """The combiner recorded for ``llm`` (by its sha256) in a verifier entry, if any."""
    return entry.extra.get("llm_combiners", {}).get(llm.sha256)


def check_prompt_style(record: dict, llm) -> None:
    """Refuse a combiner fitted with the other prompt style (chat template or completion)."""
    if bool(record.get("chat_template", False)) != bool(llm.chat_template):
        raise FscoreError(f"the llm+trained combiner for {llm.name} was fitted with chat_template="
                          f"{record.get('chat_template', False)}; run with the same prompt style")


def require_stack_record(entry, llm, manifest_path) -> dict:
    """:func:`stack_record`, refused (with the command that fits one) when missing or fitted
    with the other prompt style."""
    record = stack_record(entry, llm)
    if record is None:
        raise FscoreError(
            f"the verifier {entry.name} in {manifest_path} has no llm+trained combiner for "
            f"{llm.name} ({llm.sha256[:12]}): fit one with `fscore-lite models train llm-combiner --llm {llm.name}`")
    check_prompt_style(record, llm)
    return record


class LlmTrainedVerifier:
    """Applies a trained verifier and an LLM's margin through the stacked combiner for that LLM."""

    def __init__(self, trained: TrainedVerifier, llm, record: dict):
        check_prompt_style(record, llm)
        self.trained = trained
        self.llm = llm
        self.record = record
        self.combiner = Combiner.from_json(record["combiner"])
        self.calibration = Calibration.from_json(record["calibration"])
        self.passages = int(record.get("passages", LLM_PASSAGES))
        self.window_tokens = int(record.get("window_tokens", LLM_WINDOW_TOKENS))
        self.name, self.sha256, self.builder = trained.name, trained.sha256, trained.builder

    @classmethod
    def from_bundle(cls, bundle, trained: TrainedVerifier, llm) -> "LlmTrainedVerifier":
        return cls(trained, llm, require_stack_record(bundle.get(trained.name), llm, bundle.manifest_path))

    def margin(self, topic: str, fact: str, evidence: list[Evidence]) -> float:
        return llm_margin(self.llm, topic, fact, evidence, self.passages, self.window_tokens)

    def verify(self, topic: str, facts: list[str], evidence: list[list[Evidence]]) -> list[TrainedVerdict]:
        base = self.trained.combiner
        out = []
        for fact, ev, pos in zip(facts, evidence, relative_positions(len(facts))):
            feats, scores = self.trained.features(topic, fact, ev, pos)
            logit = float(base.logit(base.matrix([feats]))[0])
            margin = self.margin(topic, fact, ev)
            p = float(self.calibration.probability(self.combiner.logit([[logit, margin]]))[0])
            feats = {**feats, "trained_logit": logit, "llm_margin": margin}
            out.append(TrainedVerdict(p > 0.5, p, scores, {k: round(v, 5) for k, v in feats.items()}))
        return out

    def rule(self) -> str:
        c = self.combiner
        return (f"llm+trained: the trained verifier {self.name}'s logit and {self.llm.name}'s True − False margin on "
                f"a short prompt (definition, the best {self.passages} passages cut to {self.window_tokens}-token "
                f"windows, the question), logistic combiner ({c.coef[0]:+.4f}·logit {c.coef[1]:+.4f}·margin, "
                f"standardised), calibrated on human-labelled facts; supported iff probability > 0.5")
