"""lcr on a Ray cluster (docs/cluster.md): ``lcr index --ray ADDRESS`` fans the
documents' builds out to Ray actors, one index beside each file, as a serial run
builds them.

Ray is an optional extra (``pip install 'lcr[ray]'``) and is imported only when
``--ray`` is given: nothing here imports it at module level.

- :mod:`lcr.cluster.connect`: ``auto``, ``local`` or a head's address, checked
  before Ray is asked; the extra missing or an address wrong is one line, exit 2.
- :mod:`lcr.cluster.storage`: every index folder and source reachable from the
  workers, checked by probe files written both ways.
- :mod:`lcr.cluster.worker`: the actor: its models loaded once, one document's
  build (every method asked for) per task, through :func:`lcr.pipeline.index_files`.
- :mod:`lcr.cluster.build`: the driver: tasks handed out, a dead worker's task
  retried, a failure reported with its document, Ctrl-C ending every worker.
"""

from __future__ import annotations
