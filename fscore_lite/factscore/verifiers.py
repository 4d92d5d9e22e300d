"""The fact verifiers behind ``--verifier`` and ``--npm``: one interface, one decision shape.

A verifier takes one response's facts with their retrieved evidence and returns one
:class:`Decision` per fact. A verifier that estimates a response's share (the trained kinds)
also owns its calibration: it says which calibration it applied to a response's facts
(:meth:`Verifier.calibration_of`), the prior each one holds under, and what it applied to the
run, for the summary (:meth:`Verifier.calibration_report`); the pipeline only reads these.
:data:`REGISTRY` maps each ``--verifier`` name to the class that builds it from a
:class:`VerifierContext`; ``--npm`` wraps the chosen one (:class:`NpmChecked`). Adding a
verifier is one class and one registry entry.

The components themselves (:mod:`.verify`, :mod:`.trained`, :mod:`.stacked`, :mod:`.npm`) are
imported only when a verifier is built, so the CLI can list the choices cheaply.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Protocol

from .kinds import GIVEN
from .score import fact_settings, same_facts

if TYPE_CHECKING:
    from .calibration import Calibration

REFERENCE_SHARE = "decisions: the share of facts decided supported (reference)"


def run_share_rule() -> str:
    """``settings.share`` of an estimated run: the rule, with the strength of each response's prior."""
    from .calibration import RESPONSE_PRIOR_FACTS  # numpy: loaded only by commands that score

    return ("estimated (deviation, --share decisions for the reference's count): each fact's probability calibrated "
            "on facts of its kind made for the training bios, then moved to the run's share of supported facts, "
            "estimated by maximum likelihood over the run's responses (EM under label shift, each response weighing "
            "alike); each response's own share estimated the same way from its facts under a Beta prior worth "
            f"{RESPONSE_PRIOR_FACTS:g} facts at the run's share, each fact's probability its posterior under that "
            "share; a response's score is the mean of its facts' probabilities, the run's score the mean of the "
            "responses' scores, and a fact is supported iff its probability > 0.5")


@dataclass(frozen=True)
class Decision:
    """One fact's verdict; :meth:`to_json` is its line in the per-item output."""

    atom: str
    is_supported: bool
    rule: str  # the verifier kind, or the LLM judge's "logprob" | "text"
    probability: float | None = None  # trained kinds: calibrated probability (after the run: under the run share)
    margin: float | None = None  # LLM judge: log P(True) − log P(False) (None for the text rule)
    passage_scores: tuple[float, ...] = ()  # trained kinds: entailment log-odds per passage, rank order
    features: dict | None = None  # trained kinds: the combiner's inputs
    evidence: tuple = ()  # the retrieved passages (retrieve.Evidence), best first
    npprob: float | None = None  # --npm: the nonparametric probability (facts the verifier supported)

    def to_json(self) -> dict:
        d: dict[str, Any] = {"atom": self.atom, "is_supported": bool(self.is_supported)}
        if self.probability is not None:
            # the calibration's own probability; the run share adds "probability" beside it (score.apply_run_share)
            d.update(verifier_probability=round(self.probability, 6), rule=self.rule,
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
    decisions_sha256: str | None  # the hash of its decision settings (combiner, calibrations); in the key too

    def verify(self, topic: str, facts: list[str], evidence: list[list], generated: bool = False) -> list[Decision]:
        """``generated``: the facts were made by this run's decomposer (not given in the input)."""

    def calibration_of(self, generated: bool) -> Calibration | None:
        """The calibration applied to a response's facts (None: the share is the count of decisions)."""

    def calibration_report(self, generated: int, given: int) -> dict | None:
        """For the summary: what was applied to the run's ``generated`` / ``given`` responses."""

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

    def calibration_of(self, generated: bool) -> None:
        return None

    def calibration_report(self, generated: int, given: int) -> None:
        return None

    def describe(self) -> dict:
        from .verify import FALSE_WORDS, TRUE_WORDS

        return {"decision": f"logprob of first token: {list(TRUE_WORDS)} vs {list(FALSE_WORDS)} (logsumexp)",
                "share": REFERENCE_SHARE, "models": {}}


class Trained:
    """``trained``: cross-encoder passage scores + page features through the combiner, its logit
    calibrated for the kind of facts verified."""

    kind = "trained"

    def __init__(self, ctx: VerifierContext):
        from .trained import TrainedVerifier

        self.ctx = ctx
        self.trained = TrainedVerifier.from_bundle(ctx.bundle, ctx.store, threads=ctx.settings.threads,
                                                   cache=ctx.cache)
        self.name, self.sha256 = self.trained.name, self.trained.sha256
        # the combiner's weights, its calibrations and the rest of its settings, as hashed now
        self.decisions_sha256 = ctx.bundle.get(self.name).decisions_sha256
        self._generated: Calibration | None | bool = False  # False: not looked up yet

    @property
    def calibrations(self) -> dict[str, Calibration]:
        return self.trained.calibrations

    def run_fact_settings(self) -> dict:
        """What makes this run's generated facts: the decomposer's model (the LLM, loaded, or the parser) and
        the atomic-fact settings."""
        from .decomposers import Models, describe_settings, fact_source

        o = self.ctx.options
        name, sha = fact_source(o.decomposer, self.ctx.llm, Models(self.ctx.settings, self.ctx.bundle))
        return fact_settings(name, sha, describe_settings(o.decomposer, o.demo_shortcut))

    def generated_calibration(self) -> Calibration | None:
        """The calibration fitted for the facts this run generates (same decomposer settings and LLM), if any."""
        if self._generated is False:
            run = self.run_fact_settings()
            self._generated = next((c for c in self.calibrations.values()
                                    if c.facts != GIVEN and same_facts(c.fitted_for, run)), None)
        return self._generated

    def calibration_of(self, generated: bool) -> Calibration | None:
        if self.ctx.options.share != "estimate":
            return None
        return (self.generated_calibration() if generated else None) or self.calibrations[GIVEN]

    def verify(self, topic, facts, evidence, generated: bool = False) -> list[Decision]:
        cal = self.calibration_of(generated) or self.calibrations[GIVEN]
        verdicts = self.applied_verify(topic, facts, evidence, cal)
        return [Decision(f, bool(v.is_supported), self.kind, probability=v.probability,
                         passage_scores=tuple(v.passage_scores), features=v.features, evidence=tuple(ev))
                for f, ev, v in zip(facts, evidence, verdicts)]

    def applied_verify(self, topic, facts, evidence, calibration: Calibration):
        return self.trained.verify(topic, facts, evidence, calibration)

    def calibration_report(self, generated: int, given: int) -> dict | None:
        """Which calibration each kind of the run's responses got, with what it was fitted on."""
        if self.ctx.options.share != "estimate":
            return None
        applied = {}
        if given:
            applied[GIVEN] = given
        note = None
        if generated:
            own = self.generated_calibration()
            applied[own.facts if own else GIVEN] = applied.get(own.facts if own else GIVEN, 0) + generated
            if own is None:
                note = ("no calibration was fitted for the facts this run generated (other decomposer settings or LLM "
                        f"than {', '.join(c.facts for c in self.calibrations.values() if c.facts != GIVEN) or 'any'}"
                        "): they got the calibration of given facts, and its error (meta-eval factscore-er --facts "
                        "generated measures it)")
        return {"responses": applied,
                "calibrations": {k: self.calibrations[k].to_json() for k in applied},
                **({"warning": note} if note else {})}

    def share_rule(self) -> str:
        return run_share_rule() if self.ctx.options.share == "estimate" else REFERENCE_SHARE

    def decision_rule(self) -> str:
        t = self.trained
        position = " + the fact's position in its response" if "position" in t.combiner.features else ""
        return (f"trained verifier {t.name}: cross-encoder entailment log-odds of the best {t.builder.passages} "
                f"retrieved passages ({t.builder.window_tokens}-token windows) + page-level features{position}, "
                "logistic combiner, its logit calibrated for the kind of facts verified; supported iff probability "
                "> 0.5")

    def models(self) -> dict:
        entry = self.ctx.bundle.get(self.trained.name).to_json()
        training = entry["extra"].get("training") or {}
        # the training reports are long; the machine that built the weights is kept: another CPU kernel
        # trains other last bits (docs/VERIFIER.md, "Same bytes")
        entry["extra"] = {k: v for k, v in entry["extra"].items() if k not in ("training", "llm_combiners")}
        built = {"build_cpu": training["build_cpu"]} if training.get("build_cpu") else {}
        return {"verifier": entry | {"sha256": self.trained.sha256, "decisions_sha256": self.decisions_sha256} | built}

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
    def calibrations(self) -> dict[str, Calibration]:
        return {GIVEN: self.stacked.calibration}  # fitted on human-labelled facts, applied to every kind

    def generated_calibration(self) -> None:
        return None

    def applied_verify(self, topic, facts, evidence, calibration: Calibration):
        return self.stacked.verify(topic, facts, evidence)

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

    def calibration_of(self, generated: bool) -> None:
        return None  # NP changes decisions the calibration knows nothing of: count them

    def calibration_report(self, generated: int, given: int) -> None:
        return None

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
