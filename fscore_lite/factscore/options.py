"""What a FActScore run is asked to do (:class:`ScoreOptions`) and where its time goes (:class:`Timings`).

The CLI takes its defaults and choices from here; :meth:`ScoreOptions.validate` is the one check."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .abstain import MODES as ABSTAIN_MODES
from ..settings import MAX_N_CTX
from .items import MAX_OUTPUT_CHARS
from .score import GAMMA
from .verifiers import AUTO, REGISTRY
from .decomposers import NAMES as DECOMPOSERS
from .verify import DEFAULT_CONTEXT_BUDGET

MODES = ("parity", "shared-context")
SHARES = ("estimate", "decisions")
VERIFIERS = (AUTO, *REGISTRY)


@dataclass
class ScoreOptions:
    mode: str = "parity"  # parity | shared-context (LLM judge only)
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
    # a name in decomposers.REGISTRY: default (named deviations) | reference (byte-faithful) | parse (no LLM)
    decomposer: str = "default"
    # auto (trained when installed, else llm) | trained | llm (the reference's LM judge) | llm+trained (both, stacked)
    verifier: str = AUTO
    # trained verifier: a response's share of supported facts estimated under the run's share
    # ("estimate", :mod:`.calibration`), or counted from its decisions ("decisions", the reference's definition)
    share: str = "estimate"
    progress: bool = True

    def __post_init__(self):
        self.validate()  # where the options are made: a bad value stops the run before any work

    @staticmethod
    def choices() -> dict[str, tuple[str, ...]]:
        """The allowed values of each option that has a fixed set."""
        return {"mode": MODES, "abstain": ABSTAIN_MODES, "share": SHARES, "verifier": VERIFIERS,
                "decomposer": DECOMPOSERS}

    def validate(self) -> None:
        from ..errors import FscoreError

        for name, allowed in self.choices().items():
            value = getattr(self, name)
            if value not in allowed:
                raise FscoreError(f"--{name.replace('_', '-')} must be one of {', '.join(allowed)}, not {value!r}")
        if isinstance(self.k, int) and not isinstance(self.k, bool) and self.k > MAX_K:
            raise FscoreError(f"--k must be at most {MAX_K} passages, not {self.k}")
        if _finite(self.gamma) and self.gamma > MAX_GAMMA:
            raise FscoreError(f"--gamma must be at most {MAX_GAMMA}, not {self.gamma!r}")
        if isinstance(self.context_budget, int) and self.context_budget > MAX_N_CTX:
            raise FscoreError(f"--context-budget must be at most {MAX_N_CTX} tokens (the largest --n-ctx), "
                              f"not {self.context_budget}")
        if self.max_output_chars < 1:
            raise FscoreError(f"--max-output-chars must be 1 or more, not {self.max_output_chars}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise FscoreError(f"--k must be a whole number of passages, 1 or more, not {self.k!r} "
                              "(a fact needs evidence to be decided)")
        if not _finite(self.gamma) or self.gamma < 0:
            raise FscoreError(f"--gamma must be a finite number, 0 or more (0 disables the length penalty), "
                              f"not {self.gamma!r}")
        if isinstance(self.context_budget, bool) or not isinstance(self.context_budget, int) or self.context_budget < 1:
            raise FscoreError(f"--context-budget must be 1 or more tokens, not {self.context_budget!r}")
        if not _finite(self.npm_threshold) or not 0 <= self.npm_threshold <= 1:
            raise FscoreError(f"the NP threshold must be a probability from 0 to 1, not {self.npm_threshold!r}")


MAX_K = 1000  # passages per fact
MAX_GAMMA = 1e6  # length penalty: far beyond any value the penalty is meant for


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass
class Timings:
    atomic_facts: float = 0.0
    retrieval: float = 0.0
    verification: float = 0.0
    npm: float = 0.0
    facts_generated: int = 0
    facts_verified: int = 0
