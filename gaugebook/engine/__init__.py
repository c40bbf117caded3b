"""What every experiment of the book shares (see the design page, ``book/design.md``).

``settings``        scale, device, data folder, records mode (the ``GAUGEKIT_*`` variables)
``scales``          the one config base: an experiment at one scale, its parts, paper/quick
``spec``            what a run is, what an experiment provides, how one batch runs
``records``         run records as JSON Lines: identity, provenance, crash-safe appends
``sweep``           the one sweep engine: grid → batches → records, resumable
``backends``        where batches run: local processes, a Dask cluster, one isolated call
``collection``      the one collector: what a page shows, read or computed
``selection``       the one selection: protocols over records (the matched-loss one included)
``factor_trainer``  the one trainer of factor runs ``W = U Vᵀ``, stacked (``factor_stack``:
                    its rows; ``factor_families``: the problems it trains, as plain objects)
``twin_trainer``    the one trainer of twins: the paper's small transformer (``transformer``)
                    and its texts (``texts``)
``datafiles``       finding, verifying and downloading a data file

Nothing here imports a chapter's module or draws a figure (``lint-imports``).
"""
