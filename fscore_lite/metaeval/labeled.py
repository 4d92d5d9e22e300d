"""Reader for FActScore's human-annotated bios (``factscore-labeled/{Subject}.jsonl``)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import FscoreError, InputError
from ..io import read_jsonl

SUBJECTS = ("InstructGPT", "ChatGPT", "PerplexityAI")


@dataclass(frozen=True)
class HumanFact:
    text: str
    label: str  # S | NS | IR


@dataclass(frozen=True)
class AnnotatedSentence:
    text: str
    is_relevant: bool
    model_facts: tuple[str, ...]
    human_facts: tuple[HumanFact, ...]


@dataclass(frozen=True)
class AnnotatedBio:
    subject: str
    line: int
    topic: str
    output: str
    category: tuple[str, ...]
    sentences: tuple[AnnotatedSentence, ...] | None  # None: the model abstained

    @property
    def responded(self) -> bool:
        return self.sentences is not None

    def model_facts(self) -> list[str]:
        """The paper estimator's input: InstructGPT-made atomic facts of every sentence."""
        return [f for s in self.sentences or () for f in s.model_facts]


def data_dir(data: str | Path) -> Path:
    d = Path(data) / "factscore-labeled"
    if not d.is_dir():
        raise FscoreError(f"{d} not found: pass --data DIR, the folder holding factscore-labeled/")
    return d


def load_subject(data: str | Path, subject: str) -> list[AnnotatedBio]:
    path = data_dir(data) / f"{subject}.jsonl"
    bios = []
    for rec in read_jsonl(path):
        d = rec.data
        try:
            anns = d["annotations"]
            sentences = None
            if anns is not None:
                sentences = tuple(
                    AnnotatedSentence(
                        text=a["text"],
                        is_relevant=bool(a["is-relevant"]),
                        model_facts=tuple(f["text"] for f in a.get("model-atomic-facts") or []),
                        human_facts=tuple(HumanFact(f["text"], f["label"]) for f in a.get("human-atomic-facts") or []),
                    )
                    for a in anns
                )
            bios.append(AnnotatedBio(subject, rec.line, d["topic"], d["output"], tuple(d.get("cat") or ()), sentences))
        except (KeyError, TypeError) as e:
            raise InputError(path, rec.line, f"not in the labeled-data format ({e!r})") from None
    return bios
