"""Readers for FActScore's human-annotated bios (``factscore-labeled/{Subject}.jsonl``) and the
wiki pages of their topics (``wiki-*/pages.jsonl``): what training and meta-evaluation learn
from, and what the report sets beside a run as the human one."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..errors import FscoreError, InputError
from ..io import read_jsonl, require_text

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


def human_fact_labels(bio: AnnotatedBio) -> list[bool]:
    """is_supported per fact under the paper's convention (irrelevant sentences' model facts = NS)."""
    out: list[bool] = []
    for s in bio.sentences or ():
        if s.is_relevant:
            out += [f.label == "S" for f in s.human_facts]
        else:
            out += [False] * len(s.model_facts)
    return out


def wiki_pages(data: str | Path) -> tuple[dict[str, str], list[Path]]:
    """{topic: page text} from every ``wiki-*/pages.jsonl`` under ``data``."""
    files = sorted(Path(data).glob("wiki-*/pages.jsonl"))
    if not files:
        raise FscoreError(f"no wiki-*/pages.jsonl under {data}: pass --data DIR")
    pages: dict[str, str] = {}
    for f in files:
        for rec in read_jsonl(f):  # bad JSON or a missing field: an error naming the file and line
            key = "topic" if rec.data.get("topic") else "title"
            pages.setdefault(require_text(f, rec, key), require_text(f, rec, "text", allow_empty=True))
    return pages, files


def fixed_sample(bios: list[AnnotatedBio], limit: int | None) -> list[AnnotatedBio]:
    """A fixed sample: bios ordered by a stable hash of their topic, first ``limit`` (meta-eval's ``--limit``)."""
    if not limit:
        return bios
    key = lambda b: hashlib.sha256(b.topic.encode()).hexdigest()  # noqa: E731
    return sorted(sorted(bios, key=key)[:limit], key=lambda b: b.line)
