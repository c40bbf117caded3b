"""What a built page shows, read from its HTML (gaugebook.present.book_html), on a page written
here in the shape Sphinx, sphinx-proof, sphinx-exercise and sphinxcontrib-bibtex write."""

from __future__ import annotations

from gaugebook.present.book_html import (
    Target,
    book_targets,
    page_citations,
    page_targets,
    page_toc,
    read_page,
    read_pages,
)

URL = "https://book.example/chapters/01_x.html"
PAGE = f"""<html><head><link rel="canonical" href="{URL}" /></head><body><main>
<section id="gauge-symmetry"><span id="ch-gauge"></span>
<h1><span class="section-number">1. </span>Gauge symmetry of <code>W</code>
<a class="headerlink" href="#gauge-symmetry">#</a></h1>
<p>By <span class="bibtex-citation" id="id1">Singh [<a class="reference internal"
href="../book/references.html#id2" title="long">2026</a>]</span> and
<span class="bibtex-citation" id="id3">[<a class="reference internal"
href="../book/references.html#id5">Su <em>et al.</em>, 2024</a>]</span>.</p>
<div class="math notranslate nohighlight" id="equation-gl-action">
<span class="eqno">(1.2)<a class="headerlink" href="#equation-gl-action">#</a></span>\\[x\\]</div>
<div class="proof lemma admonition" id="lem-cov"><p class="admonition-title">
<span class="caption-number">Lemma 1.1 </span> (Gradient covariance)</p></div>
<div class="proof admonition" id="proof"><p>Proof. Easy.</p></div>
<div class="exercise admonition" id="ex-one"><p class="admonition-title">
<span class="caption-number">Exercise 1.3 </span> (The smallest pair)</p></div>
<section id="orbits"><span id="sec-orbit"></span><h2><span class="section-number">1.2. </span>
The orbit at <span class="math notranslate nohighlight">\\(k = 2\\)</span></h2>
<figure id="fig-loss"><img src="a.png"/><figcaption><p><span class="caption-number">Fig. 1.4
</span><span class="caption-text">Loss <em>along</em> the orbit.</span></p></figcaption></figure>
<figure id="tab-zoo"><div>t</div><figcaption><span class="caption-number">Table 1.1 </span>
The zoo.</figcaption></figure><figure id="plain"><img/></figure>
<dl><dt class="sig sig-object py" id="gaugekit.optim.Adam">Adam</dt></dl>
<div class="toctree-wrapper compound"><p class="caption"><span class="caption-text">Theory
</span></p><ul><li class="toctree-l1"><a class="reference internal" href="02_y.html">2. Y</a>
<ul><li class="toctree-l2"><a class="reference internal" href="../book/api/z.html">2.1. Z</a>
</li></ul></li></ul></div>
</section></section></main></body></html>"""


def _target(label: str, kind: str, shown: str, number: str, title: str,
            anchor: str | None = None) -> Target:
    return Target(label, "chapters/01_x", f"{URL}#{anchor or label}", kind, shown, number,
                  title)


def test_every_numbered_target_with_its_number_and_title():
    targets = page_targets(PAGE, "chapters/01_x")
    expected = [
        _target("fig-loss", "figure", "Fig. 1.4", "1.4", "Loss *along* the orbit."),
        _target("tab-zoo", "table", "Table 1.1", "1.1", "The zoo."),
        _target("gl-action", "equation", "(1.2)", "1.2", "", "equation-gl-action"),
        _target("lem-cov", "statement", "Lemma 1.1", "1.1", "Gradient covariance"),
        _target("ex-one", "statement", "Exercise 1.3", "1.3", "The smallest pair"),
        _target("gaugekit.optim.Adam", "object", "gaugekit.optim.Adam", "",
                "gaugekit.optim.Adam"),
        _target("gauge-symmetry", "section", "Section 1", "1", "Gauge symmetry of `W`"),
        _target("ch-gauge", "section", "Section 1", "1", "Gauge symmetry of `W`"),
        _target("orbits", "section", "Section 1.2", "1.2", "The orbit at $k = 2$"),
        _target("sec-orbit", "section", "Section 1.2", "1.2", "The orbit at $k = 2$"),
    ]
    assert list(targets.values()) == expected
    assert "plain" not in targets and "proof" not in targets  # unnumbered: no target


def test_citations_in_order_with_absolute_links():
    assert [(c.markdown, c.works) for c in page_citations(PAGE, "chapters/01_x")] == [
        ("Singh \\[[2026](https://book.example/book/references.html#id2)\\]", 1),
        ("\\[[Su *et al.*, 2024](https://book.example/book/references.html#id5)\\]", 1)]


def test_table_of_contents_as_a_nested_list_of_links():
    assert page_toc(PAGE, "chapters/01_x") == (
        "**Theory**\n\n- [2. Y](https://book.example/chapters/02_y.html)\n"
        "  - [2.1. Z](https://book.example/book/api/z.html)")


def test_a_page_without_a_canonical_address_links_to_its_file():
    page = read_page("<main><h1>Notation</h1></main>", "book/notation")
    assert (page.url, page.title, page.doc.url) == ("book/notation.html", "Notation",
                                                    "book/notation.html")


def test_the_book_wide_targets_and_pages(tmp_path):
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "01_x.html").write_text(PAGE)
    for skipped in ("search.html", "genindex.html", "index.html"):
        (tmp_path / skipped).write_text(PAGE)
    pages = read_pages(tmp_path)
    assert list(pages) == ["chapters/01_x"]
    targets, docs = book_targets(pages)
    assert targets["tab-zoo"].shown == "Table 1.1"
    assert docs["chapters/01_x"] == Target("chapters/01_x", "chapters/01_x", URL, "page",
                                           title="Gauge symmetry of `W`")
