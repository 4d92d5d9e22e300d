"""Statistics shared by scoring, meta-evaluation and the report: seeded bootstrap intervals,
the mean, AUC. Pure Python, deterministic, importing nothing else of fscore-lite."""
from .bootstrap import (LEVEL, N_BOOT, SEED, bootstrap_ci, clustered_mean_ci, clustered_ratio_ci,
                        paired_difference, score_ci95)
from .summaries import auc, mean

__all__ = ["LEVEL", "N_BOOT", "SEED", "auc", "bootstrap_ci", "clustered_mean_ci", "clustered_ratio_ci", "mean",
           "paired_difference", "score_ci95"]
