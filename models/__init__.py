"""Build step for model bundles: install the registry-packaged defaults, export checkpoints.

This package may import :mod:`fscore_lite` (to share the manifest format); the runtime never
imports it.
"""
