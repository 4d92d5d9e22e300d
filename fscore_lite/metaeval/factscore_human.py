"""Human FActScores from the annotated bios (the paper's Table 1).

Convention (SPEC): per-response mean of S / (S + NS + IR) over responding items (annotations
not null), where the model facts of sentences annotated ``is-relevant: false`` count as not
supported. This reproduces the paper's 42.5 / 58.3 / 71.5.
"""
from __future__ import annotations

from pathlib import Path

from ..training.labeled import SUBJECTS, AnnotatedBio, human_fact_labels, load_subject

PAPER = {  # Min et al. 2023, Table 1: FActScore, % responding
    "InstructGPT": (42.5, 99.5),
    "ChatGPT": (58.3, 85.8),
    "PerplexityAI": (71.5, 90.7),
}


def human_score(bio: AnnotatedBio) -> float | None:
    """S / (S + NS + IR) for a responding bio; None when it abstained or has no facts."""
    labels = human_fact_labels(bio)
    return sum(labels) / len(labels) if labels else None


def evaluate(data: str | Path) -> dict:
    result = {}
    for subject in SUBJECTS:
        bios = load_subject(data, subject)
        scores = [s for s in (human_score(b) for b in bios if b.responded) if s is not None]
        responding = [b for b in bios if b.responded]
        n_facts = [len(human_fact_labels(b)) for b in responding]
        result[subject] = {
            "factscore": 100 * sum(scores) / len(scores),
            "respond_pct": 100 * len(responding) / len(bios),
            "facts_per_response": sum(n_facts) / len(n_facts),
            "n_bios": len(bios),
            "paper_factscore": PAPER[subject][0],
            "paper_respond_pct": PAPER[subject][1],
        }
    return result


def format_table(result: dict) -> str:
    lines = [
        f"{'subject':<14}{'FActScore':>10}{'paper':>8}{'diff':>7}{'% resp':>9}{'paper':>8}{'facts/resp':>12}",
    ]
    for subject, r in result.items():
        lines.append(
            f"{subject:<14}{r['factscore']:>10.2f}{r['paper_factscore']:>8.1f}"
            f"{r['factscore'] - r['paper_factscore']:>+7.2f}{r['respond_pct']:>9.1f}{r['paper_respond_pct']:>8.1f}"
            f"{r['facts_per_response']:>12.1f}"
        )
    return "\n".join(lines)
