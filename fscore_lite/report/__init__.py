"""``fscore-lite report``: one self-contained HTML file from ``score`` / ``q2`` outputs."""
from .html import build_report, write_report

__all__ = ["build_report", "write_report"]
