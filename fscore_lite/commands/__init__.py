"""CLI command groups; each module parses flags and calls the public API."""
