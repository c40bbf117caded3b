"""What the book and the README show: figures, tables, glued values, the headline.

``viz``         the shared figures and tables (colours, ``table_html``, ``glue_page``)
``headline``    the README's results at a glance
one module per experiment (``matrix_sensing``, ``spectral_tails``, ``hyperspectral``,
``attention``, ``language_model``, ``ladder``, ``ecosystem``, ``dial``) and ``theory`` for the
theory chapters: each turns records into the tables, figures and sentences of its chapter
(``attention_summary``: the attention chapter's numbers from its records, without figures).

Needs the ``experiments`` extra (``pip install 'gaugekit[experiments]'``).
"""

# Developer note (layers, DESIGN.md): floor 7 (report/): stands on experiments/.
