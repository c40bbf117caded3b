"""What the book and the README show: figures, tables, glued values, the headline.

``viz``         the shared figures (colours, legends, axes) and, from ``tables``, the rest
``tables``      the shared tables, number formats and words (``table_html``, ``glue_page``)
``headline``    the README's results at a glance
one module per experiment (``matrix_sensing``, ``spectral_tails``, ``hyperspectral``,
``attention``, ``language_model``, ``ladder``, ``ecosystem``, ``dial``): each turns records into
the tables, figures and sentences of its chapter; a chapter's section with a job of its own has
its own module (``sensing_controls``, ``tails_crossing``, ``ladder_paper``: the ladder beside
the paper's and beside the matrix-sensing protocol at n = 40; ``attention_summary`` and
``language_model_summary``: their chapter's numbers without figures (the first also its glued
values and live checks); ``hyperspectral_page``: its chapter's glued values and section notes;
``dial_numbers`` and ``flow_adam_numbers``: chapter 5's summaries, numbers and live
demonstrations; ``ecosystem`` holds the appendix's EigenAdam sections too).
``theory`` (the gauge, chapter 3's dynamics) and ``taxonomy`` (which rules keep the gauge, their
Gram form, the registry's tables) run the theory chapters' small live checks instead and draw
their figures.

The chapter modules keep three rules. Nothing is typed in: our numbers come from the records
(through the experiment's summaries and the selection protocols of :mod:`gaugekit.runs.selection`),
the published ones from the experiment's constants, each in its own column. A table is HTML from
:func:`~gaugekit.report.tables.table_html`. An optimizer has its colour of the book
(:func:`~gaugekit.report.viz.method_color`) in every figure.

Needs the ``experiments`` extra (``pip install 'gaugekit[experiments]'``).
"""

# Developer note (layers, gaugekit/__init__.py): floor 9, report/, on experiments/.
