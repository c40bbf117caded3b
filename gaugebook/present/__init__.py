"""What every page of the book shares (see the design page, ``book/design.md``).

``tables``    the one HTML table (``table_html``), the one number format (``fmt`` and its
              named styles), the one glue (``glue_page``), words and a records note
``viz``       figures: the book's style and colours, one producer per figure
``verdicts``  a claim of the paper, our number beside the published one, and the verdict
``notebooks`` the notebooks a reader downloads, their glue markup replaced by the values and
              their MyST markup written as the page shows it (``myst_markdown``, reading
              the built pages with ``book_html``)

Nothing here imports a chapter's module (``lint-imports``).
"""
