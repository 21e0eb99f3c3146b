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


class ArgumentTypeError(UsageError, TypeError):
    """A Python API argument of the wrong type (``k="3"``, ``question=None``); the
    message names the argument. A ``TypeError`` too, as Python code expects."""


class ArgumentValueError(UsageError, ValueError):
    """A Python API argument of the right type with a value lcr cannot use (``k=0``);
    the message names the argument. A ``ValueError`` too, as Python code expects."""


class OutputError(LcrError):
    """Standard output cannot be written: closed (``>&-``), or a full device
    (``> /dev/full``). Not a closed pipe: a reader that has gone is not an error."""


class OutOfMemoryError(LcrError):
    """Memory ran out (the machine's RAM, or a limit such as ``ulimit -v``); the message
    says what to try with less."""


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


class MethodPluginError(LcrError):
    """A method another package declares (entry point group ``lcr.methods``) cannot
    be loaded: the message names the package and what failed."""


class SettingError(UsageError):
    """An unknown ``--set`` key or a value of the wrong type."""


class CapabilityError(UsageError):
    """The chosen LLM backend cannot do what the command needs (checked before any work)."""


class NoLogprobsError(CapabilityError):
    """An OpenAI-compatible server returns no log-probabilities (a yes/no check needs them)."""


class ModelError(LcrError):
    """A model cannot be found, assembled or loaded, or a backend lacks a feature."""


class LLMCallError(LcrError):
    """An LLM call failed during a build; the build stops cleanly and can resume."""


class FileAccessError(LcrError):
    """The system refused a file: permission denied, a read-only file system."""


class DiskFullError(LcrError):
    """No space left (or a quota reached) while writing."""


class LostRaceError(LcrError):
    """Another process changed a file or folder while this one was using it."""


def from_os_error(exc: OSError) -> LcrError | None:
    """The one-line error for a failure the system caused, or None for what is a bug.

    Every ``OSError`` that reaches the command line is mapped here, so permission
    problems, a full disk and a lost race read as such instead of "internal error".
    """
    import errno
    import os

    def shown(name: object) -> str:
        # lcr's temporary files and folders (.NAME.tmp-1234) are named by their folder
        text = os.fsdecode(name) if isinstance(name, (str, bytes)) else str(name)
        base = os.path.basename(text)
        # and the writer lock beside an index (.NAME.lock) by the folder it is in
        if base.startswith(".") and (
            ".tmp-" in base or base.endswith(".tmp") or base.endswith(".lock")
        ):
            return os.path.dirname(text) or "."
        return text

    path = shown(exc.filename) if exc.filename is not None else "a file"
    if exc.filename2 is not None:
        path = f"{shown(exc.filename)} -> {shown(exc.filename2)}"
    code = exc.errno
    if code in (errno.EACCES, errno.EPERM):
        return FileAccessError(f"permission denied: {path}")
    if code == errno.EROFS:
        return FileAccessError(f"read-only file system: cannot write {path}")
    if code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        what = {
            errno.ENOSPC: "no space left on the device",
            errno.EDQUOT: "disk quota exceeded",
            errno.EFBIG: "file too large for this system's file-size limit (ulimit -f)",
        }[code]
        where = f" while writing {path}" if exc.filename is not None else ""
        return DiskFullError(
            f"{what}{where}; nothing was committed, so the index is as it was: "
            "free some space and run the command again"
        )
    if code == errno.ENOENT:
        return LostRaceError(
            f"{path} disappeared while lcr was using it (another process removed or "
            "replaced it); run the command again"
        )
    if code in (errno.EEXIST, errno.ENOTEMPTY):
        return LostRaceError(
            f"{path} was created by another process at the same time; run the command again"
        )
    if code == errno.EIO:
        return FileAccessError(f"input/output error on {path} (a failing disk or network share?)")
    return None


class MissingExtraError(LcrError):
    """A part of lcr is used without the optional packages it needs (``lcr serve``
    without the ``serve`` extra); the message says what to install."""
