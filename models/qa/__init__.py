"""Build step: the extractive reader of Q²'s QA role, trained here (``fscore-lite models train qa``)."""
