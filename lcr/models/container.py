"""The lazy container of a run's models: each role loaded on first use, checked before work.

A command that never needs the LLM never pays for loading it. Every role
(:class:`~lcr.models.base.Role`: the answering LLM, the embedder, a second
"scorer" LLM) is loaded, cached and capability-checked the same way, so a
method asking for a scorer gets the same one-line error before any work as one
asking too much of the LLM.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Self

from lcr.errors import CapabilityError
from lcr.evidence import Usage
from lcr.models.backends import (
    Configuration,
    choose_backend,
    llm_configuration,
    planned_configuration,
)
from lcr.models.base import LLM, Capability, Embedder, Role, describe_capabilities
from lcr.models.binding import NO_BINDING, Binding, RoleModel, bind_role
from lcr.models.spec import ModelSpec
from lcr.progress import NULL_PROGRESS, Progress

EMBEDDER_BACKEND = "sentence-transformers"  # the one way lcr runs an embedder
_GENERATE = frozenset({Capability.GENERATE})


@dataclass
class _Loaded:
    """The models a run has loaded: a cache shared by every copy of its :class:`Models`
    (:meth:`Models.bound`, :meth:`Models.requiring`), so a model is loaded once per run.
    Each scorer model has its own entry, so reading one never drops another. What each
    role runs on is not here: it is the copy's own frozen :class:`Binding`."""

    llm: LLM | None = None
    embedder: Embedder | None = None
    scorers: dict[str | None, LLM] = field(default_factory=dict)  # by spec.scorer


@dataclass
class Models:
    """Lazily loaded models. Pass ``llm=`` / ``embedder=`` / ``scorer=`` to inject ready objects.

    ``spec`` is what the caller asked for; lcr never changes it. A phase that works
    with another model in a role (the embedder an index was built with, a method's
    scorer) gets :meth:`bound` models: the same loaded models, its roles fixed. What
    the run needs of each role and the backend chosen for it is ``binding``, a frozen
    value made by :meth:`requiring`, which returns a new copy and changes nothing.
    """

    spec: ModelSpec = field(default_factory=ModelSpec)
    progress: Progress = NULL_PROGRESS
    _loaded: _Loaded = field(default_factory=_Loaded, repr=False)
    binding: Binding = NO_BINDING

    @classmethod
    def with_objects(
        cls,
        llm: LLM | None = None,
        embedder: Embedder | None = None,
        spec: ModelSpec | None = None,
        scorer: LLM | None = None,
    ) -> Models:
        spec = spec or ModelSpec()
        if scorer is not None and spec.scorer is None:
            spec = dataclasses.replace(spec, scorer=scorer.model_id)
        scorers = {spec.scorer: scorer} if scorer is not None else {}
        return cls(spec=spec, _loaded=_Loaded(llm=llm, embedder=embedder, scorers=scorers))

    def bound(self, embedder: str, scorer: str | None, llm: str | None = None) -> Self:
        """These models with the embedder role fixed to ``embedder``, the scorer role to
        ``scorer`` (None: the LLM itself) and the LLM to ``llm`` (None: as asked), for
        one phase. What is loaded is shared; a model already loaded in a role stays."""
        llm = llm or self.spec.llm
        if (embedder, scorer, llm) == (self.spec.embedder, self.spec.scorer, self.spec.llm):
            return self
        spec = dataclasses.replace(self.spec, embedder=embedder, scorer=scorer, llm=llm)
        return dataclasses.replace(self, spec=spec)

    # ------------------------------------------------------------------ roles

    @property
    def llm(self) -> LLM:
        if self._loaded.llm is None:
            from lcr.models.loading import load_llm

            backend = self._backend_to_load(Role.LLM, "the LLM")
            self._loaded.llm = load_llm(self.spec, self.progress, backend=backend)
        return self._loaded.llm

    @property
    def embedder(self) -> Embedder:
        if self._loaded.embedder is None:
            from lcr.models.loading import load_embedder

            self._loaded.embedder = load_embedder(self.spec, self.progress)
        return self._loaded.embedder

    @property
    def scorer(self) -> LLM:
        """The second LLM (``spec.scorer``); the LLM itself when none or the same model is named.

        Loaded with a backend chosen for the scorer's own needs and the spec's device
        and quantisation; ``--base-url`` serves the answering LLM, so a scorer of
        another name runs in process unless ``--backend openai`` is asked for.
        """
        if self._scorer_is_llm():
            return self.llm
        scorer = self._current_scorer()
        if scorer is None:
            from lcr.models.loading import load_llm

            backend = self._backend_to_load(Role.SCORER, "the scorer")
            scorer = load_llm(self._scorer_spec(), self.progress, backend=backend)
            self._loaded.scorers[self.spec.scorer] = scorer
        return scorer

    def requiring(self, role: Role, needs: frozenset[Capability], purpose: str) -> Self:
        """These models with ``needs`` of ``role`` added to their binding, checked before
        any work: a new copy (the same loaded models); this one does not change.

        Needs add up per role, so ``auto`` picks one backend able to do every phase the
        copy has been checked for; a model already loaded (or injected) must have them.
        A scorer that is the LLM itself puts its needs on the LLM.
        """
        if role is Role.EMBEDDER:
            if needs:
                raise CapabilityError(
                    f"{purpose} needs {describe_capabilities(needs)} of the embedder, "
                    "which only an LLM provides"
                )
            return self
        if role is Role.SCORER and self._scorer_is_llm():
            role = Role.LLM
        model = self._loaded.llm if role is Role.LLM else self._current_scorer()
        loaded = None if model is None else (str(model.backend), _capabilities(model))
        spec = self.spec if role is Role.LLM else self._scorer_spec()
        binding = bind_role(self.binding, self._key(role), spec, loaded, needs, purpose)
        return self if binding == self.binding else dataclasses.replace(self, binding=binding)

    def require_role(self, role: Role, needs: frozenset[Capability], purpose: str) -> str:
        """Check that ``role``'s backend can do ``needs`` (with what these models are
        already bound for); the backend's name. Changes nothing: :meth:`requiring`
        gives the bound copy."""
        if role is Role.EMBEDDER:
            self.requiring(role, needs, purpose)
            return EMBEDDER_BACKEND
        if role is Role.SCORER and self._scorer_is_llm():
            role = Role.LLM
        bound = self.requiring(role, needs, purpose)
        return bound.backend_of(role) or bound.spec.backend

    def require(self, needs: frozenset[Capability], purpose: str) -> str:
        """:meth:`require_role` for the answering LLM."""
        return self.require_role(Role.LLM, needs, purpose)

    # ---------------------------------------------------------- role-generic

    def loaded(self, role: Role) -> bool:
        if role is Role.EMBEDDER:
            return self._loaded.embedder is not None
        if role is Role.SCORER and not self._scorer_is_llm():
            return self._current_scorer() is not None
        return self._loaded.llm is not None

    def model_id(self, role: Role) -> str:
        """The loaded model's id, else the name asked for (nothing is loaded to answer)."""
        if role is Role.EMBEDDER:
            embedder = self._loaded.embedder
            return embedder.model_id if embedder is not None else self.spec.embedder
        if role is Role.SCORER and not self._scorer_is_llm():
            scorer = self._current_scorer()
            return scorer.model_id if scorer is not None else str(self.spec.scorer)
        return self._loaded.llm.model_id if self._loaded.llm is not None else self.spec.llm

    def backend_of(self, role: Role) -> str | None:
        """The backend of ``role``'s model: the loaded one's, else the one chosen, else None."""
        if role is Role.EMBEDDER:
            return EMBEDDER_BACKEND if self._loaded.embedder is not None else None
        if role is Role.SCORER and self._scorer_is_llm():
            role = Role.LLM
        loaded = self._loaded.llm if role is Role.LLM else self._current_scorer()
        if loaded is not None:
            return str(loaded.backend)
        return self.binding.backend(self._key(role))

    def configuration(self, role: Role) -> Configuration | None:
        """What ``role``'s LLM runs (or will run) with: backend, device, dtype, quantisation;
        None before a backend is chosen."""
        if role is Role.SCORER and self._scorer_is_llm():
            role = Role.LLM
        loaded = self._loaded.llm if role is Role.LLM else self._current_scorer()
        if loaded is not None:
            return llm_configuration(loaded)
        backend = self.binding.backend(self._key(role))
        if backend is None:
            return None
        spec = self.spec if role is Role.LLM else self._scorer_spec()
        return planned_configuration(backend, spec)

    def usage_snapshot(self) -> Usage:
        """A copy of the summed usage of every loaded LLM (one object counted once).

        Taken before and after a phase, the difference is what the phase spent,
        cached tokens included.
        """
        total = Usage()
        seen: list[LLM] = []
        for llm in (self._loaded.llm, self._current_scorer()):
            if llm is not None and not any(llm is s for s in seen):
                seen.append(llm)
                total = total.merged(llm.usage)
        return total

    # today's names for the LLM and embedder roles
    @property
    def llm_loaded(self) -> bool:
        return self.loaded(Role.LLM)

    @property
    def embedder_loaded(self) -> bool:
        return self.loaded(Role.EMBEDDER)

    def llm_id(self) -> str:
        return self.model_id(Role.LLM)

    def embedder_id(self) -> str:
        return self.model_id(Role.EMBEDDER)

    # ---------------------------------------------------------------- helpers

    def _scorer_is_llm(self) -> bool:
        name = self.spec.scorer
        return name is None or name in {self.spec.llm, self.llm_id()}

    def _current_scorer(self) -> LLM | None:
        """The scorer loaded (or injected) for ``spec.scorer``, if any: a lookup that
        changes nothing (each scorer model keeps its own state)."""
        return self._loaded.scorers.get(self.spec.scorer)

    def _backend_to_load(self, role: Role, purpose: str) -> str:
        """The backend ``role``'s model loads on: the one bound for the run's needs, else
        the one chosen for generating alone."""
        key = self._key(role)
        spec = self.spec if role is Role.LLM else self._scorer_spec()
        return self.binding.backend(key) or choose_backend(spec.backend, _GENERATE, purpose, spec)

    def _key(self, role: Role) -> RoleModel:
        """Whose needs and backend: the LLM role's, or the scorer model's own."""
        return (role, self.spec.scorer) if role is Role.SCORER else (role, None)

    def _scorer_spec(self) -> ModelSpec:
        """The spec the scorer loads with: its own model name, the run's device and backend."""
        base_url = self.spec.base_url if self.spec.backend == "openai" else None
        return dataclasses.replace(self.spec, llm=str(self.spec.scorer), base_url=base_url)


def _capabilities(model: LLM) -> frozenset[Capability] | None:
    """What a loaded model declares it can do (None: it declares nothing, trusted)."""
    caps = getattr(model, "capabilities", None)
    return frozenset(caps) if caps is not None else None
