"""llama-cpp-python set up for lcr: its logs silenced during lcr's calls, a crashing
build refused, the GGUF's chat template rendered as transformers renders it."""

from __future__ import annotations

import atexit
import ctypes
import os
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Protocol

from lcr.errors import ModelError
from lcr.models import machine
from lcr.models.base import Message
from lcr.models.machine import llamacpp_rebuild_command

_SILENT_LOG: Any = None


def _silent_log() -> Any:
    global _SILENT_LOG
    import llama_cpp

    if _SILENT_LOG is None:

        @llama_cpp.llama_log_callback
        def _drop(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
            return None

        _SILENT_LOG = _drop  # kept alive: llama.cpp holds a raw pointer to it
    return _SILENT_LOG


@contextmanager
def quiet_llama_logs() -> Iterator[None]:
    """llama.cpp's log lines go nowhere during the block (they would garble lcr's
    output); the callback the process had before (llama-cpp-python's own, or the
    host application's) is put back after, so lcr changes it only for its own calls."""
    import llama_cpp

    before = llama_cpp.llama_log_callback()
    user_data = ctypes.c_void_p()
    llama_cpp.llama_log_get(ctypes.byref(before), ctypes.byref(user_data))
    llama_cpp.llama_log_set(_silent_log(), ctypes.c_void_p(0))
    try:
        yield
    finally:
        llama_cpp.llama_log_set(before, user_data)


class _Closable(Protocol):
    def close(self) -> None: ...


_OPEN: weakref.WeakSet[_Closable] = weakref.WeakSet()
_OPEN_AT_EXIT: list[bool] = []  # one exit hook, registered with the first model


def close_at_exit(model: _Closable) -> None:
    """``model`` is closed before the interpreter's teardown if it is still open then,
    while llama.cpp's logs can still be kept quiet (teardown frees in any order)."""
    if not _OPEN_AT_EXIT:
        atexit.register(_close_open_models)
        _OPEN_AT_EXIT.append(True)
    _OPEN.add(model)


def _close_open_models() -> None:
    for model in list(_OPEN):
        with suppress(Exception):
            model.close()


def refuse_amx_build() -> None:
    """A build with llama.cpp's AMX kernels crashes the process on the AMX machines lcr
    was measured on (a segfault in the first matrix product), so it is refused with
    the rebuild command unless ``LCR_LLAMACPP_AMX=1`` says it works here."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode("utf-8", errors="replace")
    if "AMX_INT8 = 1" in info and os.environ.get("LCR_LLAMACPP_AMX") != "1":
        rebuild = llamacpp_rebuild_command(cuda=machine.current().gpu_present)
        raise ModelError(
            "this llama-cpp-python build uses AMX kernels, which crash on the machines lcr "
            f"is tested on; rebuild it without them: {rebuild} (or set LCR_LLAMACPP_AMX=1 "
            "if they work on this machine)"
        )


class ChatTemplate:
    """The GGUF's own chat template (``tokenizer.chat_template``), rendered with Jinja.

    The same template transformers renders, with the same Jinja options, so
    both backends send a model the same tokens.
    """

    def __init__(self, source: str, bos: str, eos: str) -> None:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

        def raise_exception(message: str) -> None:
            raise ModelError(f"the model's chat template refused the messages: {message}")

        def strftime_now(fmt: str) -> str:
            import datetime

            return datetime.datetime.now().strftime(fmt)

        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = strftime_now
        self._template = env.from_string(source)
        self._bos = bos
        self._eos = eos

    def render(self, messages: Sequence[Message]) -> str:
        return str(
            self._template.render(
                messages=[dict(m) for m in messages],
                add_generation_prompt=True,
                bos_token=self._bos,
                eos_token=self._eos,
            )
        )
