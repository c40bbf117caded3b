"""Runs as records: the sweep engine, its backends, the records and the selections over them.

``spec``          what a run is (:class:`RunSpec`, :class:`RunResult`) and what an experiment
                  provides (:class:`Experiment`); how one batch is executed
``records``       JSON Lines records: run ids, provenance, strict JSON, crash-safe appends
``sweep``         the one sweep engine: grid → batches → records, resumable
``backends``      where the batches run: local processes or a Dask cluster; one call in a child
                  process of its own, under a wall-clock limit
``collect``       the one collector: a part's records, read or computed, with their provenance
``selection``     hyperparameter selection protocols over records (oracle, validation, speed)
``matched_loss``  the matched-loss protocol: first crossings of training-loss levels
"""

# Developer note (layers, gaugekit/__init__.py): floor 6, runs/, on config.
