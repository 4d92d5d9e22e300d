"""The fine-tuned decomposer (``fscore-lite models train decomposer``): a small causal LM trained on the
development topics' sentences and their human atomic facts, written back to GGUF for llama.cpp."""
