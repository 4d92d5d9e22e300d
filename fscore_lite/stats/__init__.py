"""Statistics shared by scoring, meta-evaluation and the report: seeded bootstrap intervals,
the mean, AUC, F1. Pure Python, deterministic, importing nothing else of fscore-lite."""
from .bootstrap import (LEVEL, N_BOOT, SEED, auc_ci, bootstrap_ci, clustered_mean_ci, clustered_ratio_ci, f1_ns_ci,
                        paired_difference, score_ci95, signed_error_ci)
from .summaries import auc, f1_not_supported, mean

__all__ = ["LEVEL", "N_BOOT", "SEED", "auc", "auc_ci", "bootstrap_ci", "clustered_mean_ci", "clustered_ratio_ci",
           "f1_not_supported", "f1_ns_ci", "mean", "paired_difference", "score_ci95", "signed_error_ci"]
