"""Choosing a backend for each Q² role (qg, qa, nli).

``auto`` (the default): the ONNX model of the role when the bundle has one
(``Bundle.first_for_role``), else the local LLM — with a warning on stderr, since the LLM
stand-ins are not the paper's models (and the LLM comparison never says "contradiction"), and
with the choice recorded per role in the summary (``backends.ROLE.selection``). ``onnx``
requires the three ONNX models; ``llm`` uses the LLM for all roles. The LLM is loaded once and
shared.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

from ..cache import CallCache
from ..errors import FscoreError, ModelNotInstalled
from ..manifest import Bundle

ROLES = ("qg", "qa", "nli")
BACKENDS = ("auto", "onnx", "llm")
PRECISIONS = ("int8", "fp32")


def check_choice(name: str, value, allowed: tuple[str, ...]) -> None:
    """Raise FscoreError naming the option, the bad value and the choices unless ``value`` is one
    of ``allowed``: the one check of Q²'s ``--questions``, ``--backend`` and ``--precision``, used by
    :class:`~fscore_lite.q2.score.Q2Options` (CLI and Python API) and by :func:`load_roles`."""
    if value not in allowed:
        raise FscoreError(f"--{name} must be one of {', '.join(allowed)}, not {value!r}")


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
    return (f"warning: --backend auto: no ONNX model for {', '.join(roles)} in {manifest_path}; the local LLM "
            f"stands in (a prompt, not the paper's model{caveat}), so "
            "the result is not the paper's Q2; recorded per role in the summary (backends.ROLE.selection)")


def load_roles(settings, *, backend: str = "auto", cache: CallCache | None = None, precision: str = "int8",
               bundle: Bundle | None = None) -> Q2Roles:
    """Build the three role objects for ``settings`` (threads, bundle, LLM name)."""
    from .answer import LlmQuestionAnswerer, OnnxQuestionAnswerer
    from .compare import LlmEntailmentJudge, OnnxEntailmentJudge
    from .generate import LlmQuestionGenerator, OnnxQuestionGenerator

    check_choice("backend", backend, BACKENDS)
    check_choice("precision", precision, PRECISIONS)
    bundle = bundle or Bundle(settings.models_dir)
    cache = cache if cache is not None else CallCache(None)
    llm_holder: list = []

    def llm():
        if not llm_holder:
            from ..backends.llm import load_llm

            llm_holder.append(load_llm(settings, bundle, cache=cache))
        return llm_holder[0]

    def onnx_entry(role: str):
        if backend == "llm":
            return None
        entry = bundle.first_for_role(role)
        if entry is None and backend == "onnx":
            raise ModelNotInstalled(
                f"no ONNX {role} model in {bundle.manifest_path}; export one "
                f"(`fscore-lite models export {role}`) or run with --backend auto/llm"
            )
        return entry

    selection: dict[str, str] = {}
    stand_ins: list[str] = []

    def chosen(role: str, entry) -> None:
        if backend != "auto":
            selection[role] = f"--backend {backend}"
        elif entry is not None:
            selection[role] = "auto: ONNX model installed"
        else:
            selection[role] = "auto: no ONNX model installed, LLM stand-in"
            stand_ins.append(role)

    kw = dict(threads=settings.threads, cache=cache, precision=precision)
    entry = onnx_entry("qg")
    chosen("qg", entry)
    if entry is not None:
        from ..backends.onnx_seq2seq import Seq2SeqGenerator

        qg = OnnxQuestionGenerator(Seq2SeqGenerator.from_bundle(bundle, entry, **kw))
    else:
        qg = LlmQuestionGenerator(llm())
    entry = onnx_entry("qa")
    chosen("qa", entry)
    if entry is not None:
        from ..backends.onnx_qa import ExtractiveQA

        qa = OnnxQuestionAnswerer(ExtractiveQA.from_bundle(bundle, entry, **kw))
    else:
        qa = LlmQuestionAnswerer(llm())
    entry = onnx_entry("nli")
    chosen("nli", entry)
    if entry is not None:
        from ..backends.onnx_nli import NliCrossEncoder

        nli = OnnxEntailmentJudge(NliCrossEncoder.from_bundle(bundle, entry, **kw))
    else:
        nli = LlmEntailmentJudge(llm())
    if stand_ins:
        print(stand_in_warning(stand_ins, bundle.manifest_path), file=sys.stderr)
    return Q2Roles(qg, qa, nli, selection)


def available_backends(settings, bundle: Bundle | None = None) -> list[str]:
    """Backends that can serve all three roles with what is installed: "onnx", "llm"."""
    bundle = bundle or Bundle(settings.models_dir)
    out = []
    if all(bundle.first_for_role(r) is not None for r in ROLES):
        out.append("onnx")
    if settings.llm in bundle.entries or str(settings.llm).endswith(".gguf"):
        out.append("llm")
    return out
