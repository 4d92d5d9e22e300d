"""Training core: the labelled data, the verifier's training examples and the cross-validated fits
of its combiners. Meta-evaluation and the build step (models/) import it, one way."""
