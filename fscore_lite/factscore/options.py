"""What a FActScore run is asked to do (:class:`ScoreOptions`) and where its time goes (:class:`Timings`)."""
from __future__ import annotations

from dataclasses import dataclass

from .abstain import MODES as ABSTAIN_MODES
from .items import MAX_OUTPUT_CHARS
from .score import GAMMA
from .verify import DEFAULT_CONTEXT_BUDGET

VERIFIERS = ("auto", "trained", "llm", "llm+trained")


@dataclass
class ScoreOptions:
    mode: str = "parity"  # parity | shared-context
    gamma: float = GAMMA
    abstain: str = "none"
    k: int = 5
    search_all: bool = False
    npm: bool = False
    npm_model: str | None = None
    npm_threshold: float = 0.3
    chat_template: bool = False
    context_budget: int = DEFAULT_CONTEXT_BUDGET
    max_output_chars: int = MAX_OUTPUT_CHARS
    demo_shortcut: bool = False  # deviation: answer a demo sentence with its demo facts, no LM call
    decomposer: str = "default"  # default (prompt-lookup drafts, stop rules) | reference (today's decoding)
    # auto (trained when installed, else llm) | trained | llm (the reference's LM judge) | llm+trained (both, stacked)
    verifier: str = "auto"
    # trained verifier: a response's share of supported facts estimated by PACC ("adjusted"), or
    # counted from its decisions ("decisions", the reference's definition)
    share: str = "adjusted"
    progress: bool = True

    def validate(self) -> None:
        from ..errors import FscoreError

        if self.mode not in ("parity", "shared-context"):
            raise FscoreError(f"--mode must be parity or shared-context, not {self.mode!r}")
        if self.abstain not in ABSTAIN_MODES:
            raise FscoreError(f"--abstain must be one of {', '.join(ABSTAIN_MODES)}, not {self.abstain!r}")
        if self.share not in ("adjusted", "decisions"):
            raise FscoreError(f"--share must be adjusted or decisions, not {self.share!r}")
        if self.verifier not in VERIFIERS:
            raise FscoreError(f"--verifier must be one of {', '.join(VERIFIERS)}, not {self.verifier!r}")
        from .fact_decoding import check_decomposer

        check_decomposer(self.decomposer)
        if self.max_output_chars < 1:
            raise FscoreError(f"--max-output-chars must be 1 or more, not {self.max_output_chars}")


@dataclass
class Timings:
    atomic_facts: float = 0.0
    retrieval: float = 0.0
    verification: float = 0.0
    npm: float = 0.0
    facts_generated: int = 0
    facts_verified: int = 0
