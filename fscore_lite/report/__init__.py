"""``fscore-lite report``: one self-contained HTML file from ``score`` / ``q2`` outputs."""
from .bootstrap import bootstrap_ci, paired_difference, score_ci95
from .html import build_report, write_report

__all__ = ["bootstrap_ci", "paired_difference", "score_ci95", "build_report", "write_report"]
