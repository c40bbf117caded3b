r"""What chapter 7 pastes, one function per section: each returns its glue items (name → text;
names with ``_tab_`` are HTML tables through :func:`gaugebook.present.viz.table_html`), from the
records of :func:`gaugebook.hyperspectral.hyperspectral_runs.collect` through the rows and
sentences of
:mod:`gaugebook.hyperspectral.hyperspectral_views`; and the page's notes on those records
(:func:`source_note`, :func:`waiting_markdown`, :func:`absent`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from gaugebook.engine import collection
from gaugebook.engine.collection import Collected
from gaugebook.hyperspectral import hyperspectral_runs as hs
from gaugebook.hyperspectral import hyperspectral_views as views
from gaugebook.hyperspectral.hyperspectral_views import label
from gaugebook.hyperspectral.scenes import get_scene_info
from gaugebook.present import viz
from gaugebook.present.tables import fmt


def source_note(c: Collected) -> Any:
    """:func:`gaugebook.present.viz.records_note` of the records shown; the runs still missing
    are left to :func:`waiting_markdown` (which names only the scenes whose file is here)."""
    return viz.records_note(replace(c, missing={}))


def absent(c: Collected, scene: str) -> str:
    """Why the page has no complete records of ``scene``: records still to be made (its file
    is here), or its file is not in the data folder."""
    if any(p.scene.name == scene for p, _, _ in views.waiting(c)):
        return (f"The {get_scene_info(scene).label} records are not complete yet: the note "
                "above gives the command that makes them.")
    return (f"No {get_scene_info(scene).label} records at this scale: the scene's file is "
            "not in the data folder.")


_TAB_HEADERS = {"level": "train MSE", "gd": "GD", "adam": "Adam", "gap": "GD below Adam",
                "wins": "seeds"}
_TAB_FORMATS = {"density": "g", "level": "g", "gd": ".5f", "adam": ".5f", "gap": "pct"}


def _table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], **kw: Any) -> str:
    """The page's one table helper: :func:`gaugebook.present.viz.table_html`, one line when
    empty."""
    if not rows:
        return viz.table_html([{columns[0]: "no records at this scale"}], columns,
                              headers=kw.get("headers"))
    return viz.table_html(rows, columns, **kw)


def _ip_parts(c: Collected) -> list[hs.Part]:
    return [p for p in views.paper_parts(c) if p.scene.name == "indian_pines"]


def claim_items() -> dict[str, str]:
    """The paper's claims quoted in the chapter, from the published constants."""
    pub5 = hs.PUBLISHED_TABLE5[("indian_pines", 0.15)]
    deep = hs.THRESHOLDS[-1]
    t5 = ("At density 0.15 the paper selects "
          + ", ".join(f"{label(m)} at {v['lr']:g}" for m, v in pub5.items())
          + f"; at the deepest level, {deep:g}, its held-out RMSE and effective rank are "
          + ", ".join(f"{v['levels'][deep][0]:.5f} and {v['levels'][deep][1]} for {label(m)}"
                      for m, v in pub5.items()) + ".")
    sens = "; ".join(
        f"at ρ = {rho:g} " + ", ".join(f"{fmt(g, 'pct')} against Adam at {lr:g}"
                                      for lr, g in v.items())
        for (scene, rho), v in hs.PUBLISHED_FIXED_LR_GAPS.items() if scene == "indian_pines")
    pavia = [(rho, v) for (scene, rho), v in hs.PUBLISHED_HEADLINE.items() if scene == "pavia_u"]
    return {"hsi_claim_t5": t5, "hsi_claim_sens": sens,
            "hsi_pavia_pub": " and ".join(f"{fmt(v['gap'], 'pct')} at ρ = {rho:g}"
                                          for rho, v in pavia)}


def waiting_markdown(c: Collected) -> str:
    """A note (MyST) naming the parts whose data is here but whose records are not."""
    listed = "\n".join(f"- {p.description}: {done} of {total} runs recorded"
                        for p, done, total in views.waiting(c))
    if not listed:
        return "Every part whose data file is here has its records."
    command = collection.run_command(hs.NAME, c.scale, [p.name for p, _, _ in views.waiting(c)],
                                     workers=2)
    command += " --max-batch-size 1" if c.scale == "paper" else ""
    make = "\n".join("    " + line for line in collection.wrap_command(command).splitlines())
    return ("```{note}\nThese parts have their data here but not all their records, so this "
            f"page leaves them out:\n\n{listed}\n\nMake (or resume) them with\n\n"
            f"{make}\n```")


def protocol_items() -> dict[str, str]:
    """The table of the paper's protocol as the ``_paper`` parts run it."""
    grids = "; ".join(f"{label(m)} {', '.join(f'{v:g}' for v in hs.PAPER_LR_GRIDS[m])}"
                      for m in hs.METHODS)
    extra = ", ".join(f"{label(m)} {hs.EXTENDED_LR[m]:g}" for m in hs.METHODS)
    steps = [
        ("matrix", "2,000 × 200, float32 steps, leaky band centring"),
        ("mask", "i.i.d. Bernoulli(ρ), float32 uniforms, seed s + 7"),
        ("densities", "0.15 and 0.25 (m / dof₂₄ = 1.149 and 1.915)"),
        ("model", "W = U Vᵀ, rank 48, N(0, 1)·1e-2 from seed s + 1000"),
        ("dynamics", "float64, full batch, constant rate, ≤ 30,000 steps"),
        ("levels", "3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5 (pre-update MSE)"),
        ("grids", grids),
        ("one rate more", extra + " (ours, above each grid's top)"),
        ("selection", "seeds 42, 123: most levels, then fewest steps"),
        ("evaluation", "seeds 42, 123, 456, 789 at the selected rates"),
    ]
    return {"hsi_tab_protocol": _table([{"step": a, "what": b} for a, b in steps],
                                       ["step", "what"])}


def table5_items(c: Collected) -> dict[str, str]:
    """Table 5 cell by cell, its verdict, and the sentences that read it."""
    low = next((p for p in _ip_parts(c) if p.density_label == "low"), None)
    t5 = views.table5_rows(c, low) if low else []
    shown = [{**r, "method": f"{r['method']} ({r['lr']:g}"
              + (f" · {r['lr_pub']:g})" if r["lr_pub"] else ")")
              if i == 0 or t5[i - 1]["method"] != r["method"] else ""}
             for i, r in enumerate(t5)]
    table = _table(
        shown, ["method", "level", "n", "rmse", "rmse_pub", "diff", "erank", "erank_pub"],
        headers={"method": "method (lr: ours · paper)", "level": "train MSE", "n": "seeds",
                 "rmse": "RMSE", "rmse_pub": "RMSE, paper", "diff": "difference",
                 "erank": "erank", "erank_pub": "erank, paper"},
        formats={"level": "g", "rmse": ".5f", "rmse_pub": ".5f", "diff": "+.1e",
                 "erank": ".1f", "erank_pub": "g"})
    return {"hsi_tab_table5": table, "hsi_t5_saw": views.table5_verdict(t5),
            "hsi_levels_text": views.levels_text(t5), "hsi_order_text": views.equivariant_text(t5)}


def headline_items(c: Collected) -> dict[str, str]:
    """The headline table of the paper-protocol parts and the sentences that read it."""
    head = views.headline_rows(c, views.paper_parts(c))
    table = _table(head, ["setting", "level", "gd", "adam", "gap", "wins", "gap_pub", "wins_pub"],
                   headers={**_TAB_HEADERS, "gap_pub": "paper", "wins_pub": "seeds, paper"},
                   formats=_TAB_FORMATS | {"gap_pub": "pct"})

    def sentence(r: Mapping[str, Any]) -> str:
        paper = (f" (paper: {fmt(r['gap_pub'], 'pct')} on {r['wins_pub']})"
                 if r["gap_pub"] is not None else " (the paper has no value for this density)")
        return f"{r['setting']}: {fmt(r['gap'], 'pct')} on {r['wins']} seeds" + paper

    def holds(density: float) -> str:
        r = next((r for r in head if r["setting"] == f"Indian Pines, ρ = {density:g}"), None)
        if r is None:
            return "— (no records at this scale)"
        return (f"{fmt(r['gap'], 'pct')} on {r['wins']} seeds, against the paper's "
                f"{fmt(r['gap_pub'], 'pct')} on {r['wins_pub']}")

    return {"hsi_tab_headline": table,
            "hsi_head_text": "; ".join(sentence(r) for r in head)
            or "no paper-protocol records at this scale",
            "hsi_hold_015": holds(0.15), "hsi_hold_025": holds(0.25)}


def grid_items(c: Collected) -> dict[str, str]:
    """The lr-sensitivity and the grid tables of Indian Pines, and their sentences."""
    parts = _ip_parts(c)
    sens = views.lr_sensitivity_rows(c, parts)
    heads = {"lr": "Adam lr (fixed)"}
    for p in parts:
        rho = f"ρ = {p.density:g}"
        heads |= {f"{p.name}:gap": rho, f"{p.name}:pub": f"{rho}, paper"}
    grids = {p.density: views.grid_rows(c, p) for p in parts}
    rows = [{"density": d, **r} for d, rs in grids.items() for r in rs]

    def gap_of(name: str) -> str:
        out = []
        for d, rs in grids.items():
            r = next((r for r in rs if r["grid"].startswith(name)), None)
            out.append(f"ρ = {d:g}: —" if r is None or r["level"] is None else
                       f"ρ = {d:g}: {fmt(r['gap'], 'pct')} at {r['level']:g} ({r['wins']} seeds)")
        return "; ".join(out) or "—"

    return {
        "hsi_tab_sens": _table(sens, list(heads), headers=heads,
                               formats=dict.fromkeys(heads, "pct") | {"lr": "g"}),
        "hsi_sens_text": views.sensitivity_text(sens, parts),
        "hsi_tab_grids": _table(rows, ["density", "grid", *hs.METHODS, "level", "gap", "wins"],
                                headers={**{m: label(m) for m in hs.METHODS}, **_TAB_HEADERS},
                                formats={"density": "g", "level": "g", "gap": "pct"}),
        "hsi_cpu_text": gap_of("CPU"), "hsi_ext_text": gap_of("extended"),
    }


def arm_items(c: Collected) -> dict[str, str]:
    """The arms of Indian Pines (dtype, centring) and their sentence."""
    arms = views.arm_rows(c, "indian_pines")
    return {"hsi_tab_arms": _table(
        arms, ["density", "dtype", "centring", "level", "gd", "adam", "gap", "wins"],
        headers=_TAB_HEADERS, formats=_TAB_FORMATS),
        "hsi_arms_text": views.arms_text(arms), "hsi_arms_verdict": views.arms_verdict(arms)}


def beyond_items(c: Collected) -> dict[str, str]:
    """The scenes beyond the paper: selections and headline, Samson's GD rates."""
    others = [p for p in views.main_parts(c) if p.scene.name not in hs.PAPER_SCENES
              and (p.scene.name, p.density) not in hs.PUBLISHED_HEADLINE]
    beyond = []
    for p in others:
        s = views.summary(c, p)
        h, comp = s["headline"], s["comparison"]["methods"]
        beyond.append({"setting": f"{p.scene.label}, ρ = {p.density:g}", "level": h["level"],
                       "gap": h["gap"], "wins": views.seeds_won(h),
                       **{m: comp[m]["lr"] for m in hs.METHODS}})
    samson = [p for p in others if p.scene.name == "samson"]
    gd = [{"density": p.density, **r} for p in samson for r in views.gd_rate_rows(c, p)]
    return {
        "hsi_tab_beyond": _table(beyond, ["setting", *hs.METHODS, "level", "gap", "wins"],
                                 headers={**{m: f"{label(m)} lr" for m in hs.METHODS},
                                          **_TAB_HEADERS},
                                 formats=_TAB_FORMATS | dict.fromkeys(hs.METHODS, "g")),
        "hsi_tab_samson_gd": _table(gd, ["density", "lr", "selected", "diverged", "rmse",
                                         "erank"],
                                    headers={"lr": "GD lr", "diverged": "seeds diverged",
                                             "rmse": "held-out RMSE", "erank": "erank"},
                                    formats={"density": "g", "lr": "g", "rmse": ".5f",
                                             "erank": ".1f"}),
        "hsi_beyond_text": "; ".join(f"{r['setting']}: {fmt(r['gap'], 'pct')} ({r['wins']} seeds)"
                                     for r in beyond) or "—",
        "hsi_samson_edge": "; ".join(f"at ρ = {p.density:g}, "
                                     + views.gd_edge_text(views.gd_rate_rows(c, p)) for p in samson)
        or "no Samson records at this scale",
    }

