"""Every failure a user can meet, each a clear one-line message and an exit code.

The CLI catches :class:`LcrError` and prints ``lcr: <message>`` on stderr with
``exit_code``; anything else is a bug and shows a traceback only with ``--debug``.
"""

from __future__ import annotations


class LcrError(Exception):
    """Base of user-facing errors: the message is shown as is, on one line."""

    exit_code = 1


class UsageError(LcrError):
    """The command line itself is wrong (unknown setting, bad option value)."""

    exit_code = 2


class InputError(LcrError):
    """An input document cannot be used (missing, binary, empty, undecodable)."""


class IndexNotFoundError(LcrError):
    """The path is not an lcr index."""


class IndexDamagedError(LcrError):
    """The index exists but a listed file is missing or unreadable."""


class SchemaMismatchError(LcrError):
    """The index was written by an incompatible schema version."""


class SourceMismatchError(LcrError):
    """``lcr index`` into an index built over other documents, without --force."""


class MethodNotBuiltError(LcrError):
    """The index has no artefacts for the requested method."""


class SettingError(UsageError):
    """An unknown ``--set`` key or a value of the wrong type."""


class CapabilityError(UsageError):
    """The chosen LLM backend cannot do what the command needs (checked before any work)."""


class ModelError(LcrError):
    """A model cannot be found, assembled or loaded, or a backend lacks a feature."""


class LLMCallError(LcrError):
    """An LLM call failed during a build; the build stops cleanly and can resume."""
