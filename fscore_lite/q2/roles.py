"""Choosing a backend for each Q² role (qg, qa, nli).

Every backend of a role is a factory in :data:`REGISTRY`, keyed ``(role, backend)``: it
builds a :class:`~.generate.QuestionGenerator` (qg), a :class:`~.answer.QuestionAnswerer` (qa)
or a :class:`~.compare.EntailmentJudge` (nli) from a :class:`RoleContext` (bundle, call
cache, threads, precision, and the local LLM, loaded once and shared). :func:`load_roles`
resolves a backend name per role and looks its factory up.

``auto`` (the default): the ONNX model of the role when the bundle has one
(``Bundle.first_for_role``) that its build did not mark ``"auto_select": false`` (a model measured
to agree less with people than the stand-in, e.g. the reader of ``models train qa``), else for QG the
``rules`` generator (it agreed with people at least as well as the LLM's questions on q2-wow, at less
than half the time: docs/Q2.md), else the local LLM — with a warning on stderr, since the LLM
stand-ins are not the paper's models (and the LLM comparison never says "contradiction"), and
with the choice recorded per role in the summary (``backends.ROLE.selection``). ``onnx``
requires the three ONNX models; ``llm`` uses the LLM for all roles. ``qa_backend`` (the CLI's
``--qa-backend``) names the QA backend on its own, e.g. ``llm-free``: the LLM's answer as
written, without snapping it to a span of the text; ``qg_backend`` (``--qg-backend``) the QG
backend, e.g. ``rules``: the question written by rule around the answer span (:mod:`.rule_qg`).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Union

from ..cache import CallCache
from ..errors import FscoreError, ModelNotInstalled
from ..manifest import Bundle
from .answer import LlmQuestionAnswerer, OnnxQuestionAnswerer, QuestionAnswerer
from .compare import EntailmentJudge, LlmEntailmentJudge, OnnxEntailmentJudge
from .generate import LlmQuestionGenerator, OnnxQuestionGenerator, QuestionGenerator

ROLES = ("qg", "qa", "nli")
BACKENDS = ("auto", "onnx", "llm")
PRECISIONS = ("int8", "fp32")
STAND_IN = "llm"  # what ``auto`` gives a role without an ONNX model (QG: rules, below)
AUTO_FALLBACK = {"qg": "rules"}  # roles whose ``auto`` fallback is not the LLM
AUTO_ONNX = "auto: ONNX model installed"
AUTO_STAND_IN = "auto: no ONNX model installed, LLM stand-in"
AUTO_NOT_SELECTED = "auto: the installed ONNX model is marked not for auto (auto_select false), LLM stand-in"
AUTO_RULES = "auto: no ONNX model installed, rules (no model)"


def check_choice(name: str, value, allowed: tuple[str, ...]) -> None:
    """Raise FscoreError naming the option, the bad value and the choices unless ``value`` is one
    of ``allowed``: the one check of Q²'s ``--questions``, ``--backend`` and ``--precision``, used by
    :class:`~fscore_lite.q2.score.Q2Options` (CLI and Python API) and by :func:`load_roles`."""
    if value not in allowed:
        raise FscoreError(f"--{name} must be one of {', '.join(allowed)}, not {value!r}")


@dataclass
class RoleContext:
    """What a role factory builds from. ``llm()`` loads the local LLM on first use, once."""

    settings: object  # fscore_lite.settings.Settings
    bundle: Bundle
    cache: CallCache
    precision: str
    _llm: list = field(default_factory=list)

    def llm(self):
        if not self._llm:
            from ..backends.llm import load_llm

            self._llm.append(load_llm(self.settings, self.bundle, cache=self.cache))
        return self._llm[0]

    def onnx(self, role: str, loader):
        """``loader.from_bundle`` on the role's first ONNX entry; ModelNotInstalled without one."""
        entry = self.bundle.first_for_role(role)
        if entry is None:
            raise ModelNotInstalled(
                f"no ONNX {role} model in {self.bundle.manifest_path}; export one "
                f"(`fscore-lite models export {role}`) or run with --backend auto/llm"
            )
        return loader.from_bundle(self.bundle, entry, threads=self.settings.threads, cache=self.cache,
                                  precision=self.precision)


RoleObject = Union[QuestionGenerator, QuestionAnswerer, EntailmentJudge]
Factory = Callable[[RoleContext], RoleObject]


def _onnx_qg(ctx: RoleContext) -> QuestionGenerator:
    from ..backends.onnx_seq2seq import Seq2SeqGenerator

    return OnnxQuestionGenerator(ctx.onnx("qg", Seq2SeqGenerator))


def _onnx_qa(ctx: RoleContext) -> QuestionAnswerer:
    from ..backends.onnx_qa import ExtractiveQA

    return OnnxQuestionAnswerer(ctx.onnx("qa", ExtractiveQA))


def _onnx_nli(ctx: RoleContext) -> EntailmentJudge:
    from ..backends.onnx_nli import NliCrossEncoder

    return OnnxEntailmentJudge(ctx.onnx("nli", NliCrossEncoder))


def _llm_qg(ctx: RoleContext) -> QuestionGenerator:
    return LlmQuestionGenerator(ctx.llm())


def _rules_qg(ctx: RoleContext) -> QuestionGenerator:
    from .rule_qg import RuleQuestionGenerator

    return RuleQuestionGenerator()


def _llm_qa(ctx: RoleContext) -> QuestionAnswerer:
    return LlmQuestionAnswerer(ctx.llm(), snap=True)


def _llm_free_qa(ctx: RoleContext) -> QuestionAnswerer:
    return LlmQuestionAnswerer(ctx.llm(), snap=False)


def _llm_nli(ctx: RoleContext) -> EntailmentJudge:
    return LlmEntailmentJudge(ctx.llm())


REGISTRY: dict[tuple[str, str], Factory] = {
    ("qg", "onnx"): _onnx_qg,
    ("qg", "llm"): _llm_qg,
    ("qg", "rules"): _rules_qg,
    ("qa", "onnx"): _onnx_qa,
    ("qa", "llm"): _llm_qa,
    ("qa", "llm-free"): _llm_free_qa,
    ("nli", "onnx"): _onnx_nli,
    ("nli", "llm"): _llm_nli,
}


def backends_for(role: str) -> tuple[str, ...]:
    """The backend names registered for ``role``, in registry order."""
    return tuple(b for r, b in REGISTRY if r == role)


@dataclass
class Q2Roles:
    qg: object  # generate.QuestionGenerator
    qa: object  # answer.QuestionAnswerer
    nli: object  # compare.EntailmentJudge
    selection: dict = field(default_factory=dict)  # role -> how its backend was chosen

    def describe(self) -> dict:
        """Which backend serves each role, how it was chosen, model name and sha256 (for the summary)."""
        out = {}
        for role in ROLES:
            d = getattr(self, role).describe()
            if role in self.selection:
                d = d | {"selection": self.selection[role]}
            out[role] = d
        return out


def stand_in_warning(roles: list[str], manifest_path) -> str:
    """The stderr warning for roles that ``--backend auto`` gave to the LLM."""
    caveat = "; its answer comparison never says 'contradiction'" if "nli" in roles else ""
    return (f"warning: --backend auto: no ONNX model for {', '.join(roles)} in {manifest_path} "
            "(or only one its build marked auto_select false); the local LLM "
            f"stands in (a prompt, not the paper's model{caveat}), so "
            "the result is not the paper's Q2; recorded per role in the summary (backends.ROLE.selection)")


def resolve(role: str, backend: str, bundle: Bundle, override: str | None = None) -> tuple[str, str]:
    """``(backend name, how it was chosen)`` for ``role``: ``override`` when given, else
    ``backend``, where ``auto`` is "onnx" if the bundle has the role's ONNX model, else the LLM."""
    if override is not None:
        return override, f"--{role}-backend {override}"
    if backend != "auto":
        return backend, f"--backend {backend}"
    entry = bundle.first_for_role(role)
    if entry is None:
        if role in AUTO_FALLBACK:
            return AUTO_FALLBACK[role], AUTO_RULES
        return STAND_IN, AUTO_STAND_IN
    if getattr(entry, "extra", {}).get("auto_select") is False:
        return STAND_IN, AUTO_NOT_SELECTED
    return "onnx", AUTO_ONNX


def load_roles(settings, *, backend: str = "auto", cache: CallCache | None = None, precision: str = "int8",
               bundle: Bundle | None = None, qa_backend: str | None = None,
               qg_backend: str | None = None) -> Q2Roles:
    """Build the three role objects for ``settings`` (threads, bundle, LLM name): per role, the
    factory of the backend :func:`resolve` names. ``qa_backend``, ``qg_backend``: that role's backend by name."""
    check_choice("backend", backend, BACKENDS)
    overrides = {"qa": qa_backend, "qg": qg_backend}
    for role, name in overrides.items():
        if name is not None:
            check_choice(f"{role}-backend", name, backends_for(role))
    check_choice("precision", precision, PRECISIONS)
    bundle = bundle or Bundle(settings.models_dir)
    ctx = RoleContext(settings, bundle, cache if cache is not None else CallCache(None), precision)
    built: dict[str, object] = {}
    selection: dict[str, str] = {}
    stand_ins: list[str] = []
    for role in ROLES:
        name, how = resolve(role, backend, bundle, overrides.get(role))
        built[role], selection[role] = REGISTRY[(role, name)](ctx), how
        if how in (AUTO_STAND_IN, AUTO_NOT_SELECTED):
            stand_ins.append(role)
    if stand_ins:
        print(stand_in_warning(stand_ins, bundle.manifest_path), file=sys.stderr)
    return Q2Roles(built["qg"], built["qa"], built["nli"], selection)


def available_backends(settings, bundle: Bundle | None = None) -> list[str]:
    """Backends that can serve all three roles with what is installed: "onnx", "llm"."""
    bundle = bundle or Bundle(settings.models_dir)
    out = []
    if all(bundle.first_for_role(r) is not None for r in ROLES):
        out.append("onnx")
    if settings.llm in bundle.entries or str(settings.llm).endswith(".gguf"):
        out.append("llm")
    return out
