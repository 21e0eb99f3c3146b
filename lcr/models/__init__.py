"""Models: what methods talk to, and how lcr finds, loads and runs them.

- :mod:`lcr.models.base`: the protocols (:class:`~lcr.models.base.LLM`,
  :class:`~lcr.models.base.Embedder`, :class:`~lcr.models.base.AttentionLLM`),
  capabilities and roles; a leaf that imports nothing else of this package.
- :mod:`lcr.models.spec`: what the user asked for (``ModelSpec``).
- :mod:`lcr.models.backends`: which backend runs an LLM, and whether it can do
  what a method needs.
- :mod:`lcr.models.loading`: from a name to a loaded model (presets, folders,
  ``.gguf`` files, hub ids).
- :mod:`lcr.models.container`: ``Models``, the lazy container of a run's models.
- the backends: :mod:`~lcr.models.transformers_llm` (over
  :mod:`~lcr.models.transformers_core`), :mod:`~lcr.models.llamacpp_llm`,
  :mod:`~lcr.models.openai_llm`; the embedder: :mod:`~lcr.models.embedder`.

Importing this package imports none of them, nor torch or transformers (``lcr
--help`` stays fast): import what you need from its module.
"""
