"""The fact verifiers behind ``--verifier`` and ``--npm``: one interface, one decision shape.

A verifier takes one response's facts with their retrieved evidence and returns one
:class:`Decision` per fact; it also says how a response's share of supported facts is
estimated and what it is made of, for the summary. :data:`REGISTRY` maps each ``--verifier``
name to the class that builds it from a :class:`VerifierContext`; ``--npm`` wraps the chosen
one (:class:`NpmChecked`). Adding a verifier is one class and one registry entry.

The components themselves (:mod:`.verify`, :mod:`.trained`, :mod:`.stacked`, :mod:`.npm`) are
imported only when a verifier is built, so the CLI can list the choices cheaply.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol

from .score import fact_settings, response_shares, same_facts

REFERENCE_SHARE = "decisions: the share of facts decided supported (reference)"


@dataclass(frozen=True)
class Decision:
    """One fact's verdict; :meth:`to_json` is its line in the per-item output."""

    atom: str
    is_supported: bool
    rule: str  # the verifier kind, or the LLM judge's "logprob" | "text"
    probability: float | None = None  # trained kinds: the combiner's probability
    margin: float | None = None  # LLM judge: log P(True) − log P(False) (None for the text rule)
    passage_scores: tuple[float, ...] = ()  # trained kinds: entailment log-odds per passage, rank order
    features: dict | None = None  # trained kinds: the combiner's inputs
    evidence: tuple = ()  # the retrieved passages (retrieve.Evidence), best first
    npprob: float | None = None  # --npm: the nonparametric probability (facts the verifier supported)

    def to_json(self) -> dict:
        d: dict[str, Any] = {"atom": self.atom, "is_supported": bool(self.is_supported)}
        if self.probability is not None:
            d.update(probability=round(self.probability, 5), rule=self.rule,
                     passage_scores=[round(x, 4) for x in self.passage_scores], features=self.features)
        else:
            d.update(margin=None if self.margin is None else round(self.margin, 4), rule=self.rule)
        d["evidence"] = [{"id": e.passage.id, "title": e.passage.title, "score": round(e.score, 5)}
                         for e in self.evidence]
        if self.npprob is not None:
            d["npprob"] = round(self.npprob, 5)
        return d


class Verifier(Protocol):
    kind: str  # the --verifier name it was chosen by
    name: str | None  # the trained verifier's bundle entry (None: no trained model)
    sha256: str | None  # that model's sha256 (part of the resume key)
    decisions_sha256: str | None  # the hash of its decision settings (combiner, threshold); in the key too

    def verify(self, topic: str, facts: list[str], evidence: list[list], generated: bool = False) -> list[Decision]:
        """``generated``: the facts were made by this run's decomposer (not given in the input)."""

    def response_shares(self, decisions: list[Decision], generated: bool = False) -> dict:
        """A response's estimated shares (``readable_share``, its own score's share, and
        ``pacc_share_unclipped``, what the run's adjusted aggregate averages) when this verifier
        estimates them; {} when the share is the count of supported decisions."""

    def describe(self) -> dict:
        """``{"decision": rule, "share": rule, "models": {role: entry}}`` for the summary."""


@dataclass
class VerifierContext:
    """What a verifier may be built from; ``llm()`` loads the LLM on first call."""

    settings: Any
    options: Any  # ScoreOptions
    bundle: Any
    store: Any
    cache: Any
    llm: Callable[[], Any]


class LlmJudge:
    """``llm``: the reference's LM judge (True vs False), in parity or shared-context mode."""

    kind, name, sha256, decisions_sha256 = "llm", None, None, None

    def __init__(self, ctx: VerifierContext):
        self.ctx = ctx
        self._judge = None  # made, with the LLM, on first use

    @property
    def judge(self):
        if self._judge is None:
            from .verify import Verifier as LlmVerifier

            self._judge = LlmVerifier(self.ctx.llm(), self.ctx.options.mode, self.ctx.options.context_budget)
        return self._judge

    def verify(self, topic, facts, evidence, generated: bool = False) -> list[Decision]:
        verdicts = self.judge.verify(topic, facts, evidence)
        return [Decision(f, bool(v.is_supported), v.rule, margin=v.margin, evidence=tuple(ev))
                for f, ev, v in zip(facts, evidence, verdicts)]

    def response_shares(self, decisions, generated: bool = False) -> dict:
        return {}

    def describe(self) -> dict:
        from .verify import FALSE_WORDS, TRUE_WORDS

        return {"decision": f"logprob of first token: {list(TRUE_WORDS)} vs {list(FALSE_WORDS)} (logsumexp)",
                "share": REFERENCE_SHARE, "models": {}}


class Trained:
    """``trained``: cross-encoder passage scores + page features through the calibrated combiner."""

    kind = "trained"

    def __init__(self, ctx: VerifierContext):
        from .trained import TrainedVerifier

        self.ctx = ctx
        self.trained = TrainedVerifier.from_bundle(ctx.bundle, ctx.store, threads=ctx.settings.threads,
                                                   cache=ctx.cache)
        self.name, self.sha256 = self.trained.name, self.trained.sha256
        # the combiner's weights, intercept, threshold and the rest of its settings, as hashed now
        self.decisions_sha256 = ctx.bundle.get(self.name).decisions_sha256
        # the threshold and share means fitted on the facts the default decomposer made for the training
        # bios: applied to the facts a run generates when its fact settings are the ones recorded
        self.own_calibration = ctx.bundle.get(self.name).extra.get("own_facts_calibration")
        self._own_combiner = None

    def run_fact_settings(self) -> dict:
        """What makes this run's generated facts: the LLM and the atomic-fact settings (loads the LLM)."""
        from .atomic_facts import describe_settings

        llm, o = self.ctx.llm(), self.ctx.options
        return fact_settings(llm.name, llm.sha256, describe_settings(o.demo_shortcut, o.decomposer))

    def own_combiner(self):
        """The combiner with the own-facts calibration when it was fitted for the facts this run
        generates, else None (they get the paper calibration, and the summary says so)."""
        if self.own_calibration is None or self.kind != "trained":
            return None
        if self._own_combiner is None:
            fits = same_facts(self.own_calibration["calibrated_for_facts"], self.run_fact_settings())
            self._own_combiner = self.trained.combiner.with_calibration(self.own_calibration) if fits else False
        return self._own_combiner or None

    @property
    def applied(self):
        """The component whose verdicts and combiner are used."""
        return self.trained

    def verify(self, topic, facts, evidence, generated: bool = False) -> list[Decision]:
        own = self.own_combiner() if generated else None
        verdicts = (self.trained.verify(topic, facts, evidence, own) if own is not None
                    else self.applied.verify(topic, facts, evidence))
        return [Decision(f, bool(v.is_supported), self.kind, probability=v.probability,
                         passage_scores=tuple(v.passage_scores), features=v.features, evidence=tuple(ev))
                for f, ev, v in zip(facts, evidence, verdicts)]

    def response_shares(self, decisions, generated: bool = False) -> dict:
        if self.ctx.options.share != "adjusted":
            return {}
        own = self.own_combiner() if generated else None
        return response_shares(own if own is not None else self.applied.combiner, [d.probability for d in decisions])

    def share_rule(self) -> str:
        c = self.applied.combiner
        if not c.adjusts or self.ctx.options.share != "adjusted":
            return REFERENCE_SHARE
        return (f"adjusted (deviation, --share decisions for the reference's count): a response's score is the mean "
                f"probability of its facts (readable_share); the run's score_adjusted is PACC on the mean over "
                f"responses, (mean − {c.p_not_supported:.4f}) / ({c.p_supported:.4f} − {c.p_not_supported:.4f}) "
                "clipped to [0, 1] once, the means being the out-of-fold probabilities of supported / unsupported "
                "human facts")

    def decision_rule(self) -> str:
        t = self.trained
        position = " + the fact's position in its response" if "position" in t.combiner.features else ""
        return (f"trained verifier {t.name}: cross-encoder entailment log-odds of the best {t.builder.passages} "
                f"retrieved passages ({t.builder.window_tokens}-token windows) + page-level features{position}, "
                f"logistic combiner; supported iff probability > {t.combiner.threshold:.4f}")

    def models(self) -> dict:
        entry = self.ctx.bundle.get(self.trained.name).to_json()
        # the training reports are long
        entry["extra"] = {k: v for k, v in entry["extra"].items() if k not in ("training", "llm_combiners")}
        return {"verifier": entry | {"sha256": self.trained.sha256, "decisions_sha256": self.decisions_sha256}}

    def describe(self) -> dict:
        return {"decision": self.decision_rule(), "share": self.share_rule(), "models": self.models()}


class LlmTrained(Trained):
    """``llm+trained``: the trained verifier's logit and the LLM's margin, stacked (fit per LLM)."""

    kind = "llm+trained"

    def __init__(self, ctx: VerifierContext):
        super().__init__(ctx)
        self._stacked = None  # made, with the LLM, on first use

    @property
    def stacked(self):
        if self._stacked is None:
            from .stacked import LlmTrainedVerifier

            self._stacked = LlmTrainedVerifier.from_bundle(self.ctx.bundle, self.trained, self.ctx.llm())
        return self._stacked

    @property
    def applied(self):
        return self.stacked

    def decision_rule(self) -> str:
        return self.stacked.rule()

    def models(self) -> dict:
        return super().models() | {"llm_combiner": {k: v for k, v in self.stacked.record.items() if k != "training"}}


class NpmChecked:
    """``--npm``: a fact another verifier supported stays supported iff its NP > the threshold."""

    def __init__(self, inner: Verifier, npm, threshold: float, timings=None):
        self.inner, self.npm, self.threshold, self.timings = inner, npm, threshold, timings
        self.kind, self.name, self.sha256 = inner.kind, inner.name, inner.sha256
        self.decisions_sha256 = inner.decisions_sha256

    def verify(self, topic, facts, evidence, generated: bool = False) -> list[Decision]:
        decisions = self.inner.verify(topic, facts, evidence, generated)
        t0 = time.monotonic()
        out = []
        for d in decisions:
            if d.is_supported:
                p = self.npm.probability(topic, d.atom)
                d = replace(d, npprob=p, is_supported=p > self.threshold)
            out.append(d)
        if self.timings is not None:
            self.timings.npm += time.monotonic() - t0
        return out

    def response_shares(self, decisions, generated: bool = False) -> dict:
        return {}  # NP changes decisions the combiner's estimate knows nothing of: count them

    def describe(self) -> dict:
        d = self.inner.describe()
        return d | {"share": REFERENCE_SHARE,
                    "models": d["models"] | {"mlm": {"name": self.npm.name, "sha256": self.npm.sha256}}}


REGISTRY: dict[str, type] = {"trained": Trained, "llm": LlmJudge, "llm+trained": LlmTrained}
AUTO = "auto"  # trained when one is installed, else llm


def resolve_kind(kind: str, bundle) -> str:
    if kind == AUTO:
        return "trained" if bundle.first_for_role("verifier") else "llm"
    return kind


def make_verifier(ctx: VerifierContext, timings=None) -> Verifier:
    """The verifier ``ctx.options`` asks for (``--npm`` wrapping it)."""
    verifier = REGISTRY[resolve_kind(ctx.options.verifier, ctx.bundle)](ctx)
    if ctx.options.npm:
        from .npm import load_npm

        npm = load_npm(ctx.settings, ctx.bundle, ctx.store, ctx.options.npm_model, ctx.cache)
        verifier = NpmChecked(verifier, npm, ctx.options.npm_threshold, timings)
    return verifier
