"""Which backend runs each model role in one run, chosen once from everything the run
needs of it.

A run (``lcr index -m lightpal -m raptor``, one ``ask``, an ``lcr eval``) plans its
phases first; each phase declares what it needs of each role (a
:class:`~lcr.models.needs.Needs`). :func:`bind_role` folds one phase's needs into a
:class:`Binding` and returns a new one: ``--backend auto`` picks one backend able to do
every phase, and a phase no backend can serve with the others fails in one line before
any work. Nothing here loads a model or changes shared state, so checking a plan twice
gives the same answer and a caller's models never change under it.
"""

from __future__ import annotations

from dataclasses import dataclass

from lcr.errors import CapabilityError
from lcr.models.backends import choose_backend
from lcr.models.base import Capability, Role, describe_capabilities
from lcr.models.spec import ModelSpec

RoleModel = tuple[Role, str | None]  # a role and the model that plays it (a scorer's name)


@dataclass(frozen=True)
class Binding:
    """Each role's backend and what the run needs of it, as frozen pairs (a value: two
    bindings of the same needs are equal)."""

    backends: tuple[tuple[RoleModel, str], ...] = ()
    needs: tuple[tuple[RoleModel, frozenset[Capability]], ...] = ()

    def backend(self, key: RoleModel) -> str | None:
        """The backend chosen for ``key``'s model; None when the run needs nothing of it."""
        return dict(self.backends).get(key)

    def needs_of(self, key: RoleModel) -> frozenset[Capability]:
        return dict(self.needs).get(key, frozenset())

    def with_role(self, key: RoleModel, backend: str, needs: frozenset[Capability]) -> Binding:
        """This binding with ``key`` bound to ``backend`` for ``needs``."""
        backends = {**dict(self.backends), key: backend}
        wanted = {**dict(self.needs), key: needs}
        return Binding(tuple(backends.items()), tuple(wanted.items()))


NO_BINDING = Binding()


def bind_role(
    binding: Binding,
    key: RoleModel,
    spec: ModelSpec,
    loaded: tuple[str, frozenset[Capability] | None] | None,
    needs: frozenset[Capability],
    purpose: str,
) -> Binding:
    """``binding`` with ``needs`` of ``key``'s model added, checked: a pure function.

    ``loaded`` is the backend and capabilities of a model already loaded (or injected)
    in that role, which must have ``needs`` (capabilities None: not declared, trusted);
    otherwise the backend is chosen for everything the run needs of the role so far,
    with ``spec``'s backend, device and quantisation.
    """
    if not needs:
        return binding
    wanted = binding.needs_of(key) | needs
    if loaded is not None:
        backend, caps = loaded
        missing = needs - caps if caps is not None else frozenset()
        if missing:
            raise CapabilityError(
                f"{purpose} needs {describe_capabilities(missing)}, which the loaded "
                f"{backend} backend does not provide"
            )
        return binding.with_role(key, backend, wanted)
    return binding.with_role(key, choose_backend(spec.backend, wanted, purpose, spec), wanted)
