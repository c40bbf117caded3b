"""What the book and the README show: figures, tables, glued values, the headline.

``viz``         the shared figures and tables (colours, ``table_html``, ``glue_page``)
``headline``    the README's results at a glance
one module per experiment (``matrix_sensing``, ``spectral_tails``, ``hyperspectral``,
``attention``, ``language_model``, ``ladder``, ``ecosystem``, ``dial``; chapter 5's summaries and
numbers are ``dial_numbers`` and ``flow_adam_numbers``) and ``theory`` for the theory
chapters: each turns records into the tables, figures and sentences of its chapter.

Needs the ``experiments`` extra (``pip install 'gaugekit[experiments]'``).
"""

# Developer note (layers, DESIGN.md): floor 7 (report/): stands on experiments/.
