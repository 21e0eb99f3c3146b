"""lcr on a Ray cluster (docs/cluster.md): ``lcr index``, ``lcr eval`` and
``lcr ask -`` with ``--ray ADDRESS`` fan their work out to Ray actors and make what
a serial run makes.

Ray is an optional extra (``pip install 'lcr[ray]'``) and is imported only when
``--ray`` is given: nothing here imports it at module level.

- :mod:`lcr.cluster.connect`: ``auto``, ``local`` or a head's address, checked
  before Ray is asked; the extra missing or an address wrong is one line, exit 2.
- :mod:`lcr.cluster.storage`: every index folder and source reachable from the
  workers, checked by probe files written both ways.
- :mod:`lcr.cluster.pool`: the workers of every command, planned (how many, the
  CPUs or GPU and the threads each has) and kept busy, a dead one replaced.
- :mod:`lcr.cluster.worker`: the index actor: its models loaded once, one
  document's build (every method asked for) per task.
- :mod:`lcr.cluster.build`, :mod:`lcr.cluster.questions`: the drivers of
  ``lcr index``, and of ``lcr eval`` and ``lcr ask -``.
"""

from __future__ import annotations
