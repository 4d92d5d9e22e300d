"""Errors a user can cause: each carries a message written for a person."""


class FscoreError(Exception):
    """Base class; the CLI prints the message and exits non-zero without a traceback."""


class InputError(FscoreError):
    """Bad input data, located by file and line."""

    def __init__(self, path, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class ModelIntegrityError(FscoreError):
    """A model file is missing or its sha256 does not match the manifest."""


class ModelNotInstalled(FscoreError):
    """No model for a role is installed in the bundle."""


class StoreError(FscoreError):
    """The passage store is missing, malformed, or does not match its manifest."""


class OutputError(FscoreError):
    """An output path that cannot be written, or that would overwrite an input."""
