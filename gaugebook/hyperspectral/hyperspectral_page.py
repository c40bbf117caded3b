r"""What chapter 7 pastes, one function per section: each returns its glue items (name → value;
names with ``_tab_`` are HTML tables through :func:`gaugebook.present.viz.table_html`), from the
records of :func:`gaugebook.hyperspectral.hyperspectral_runs.collect` through the rows of
:mod:`gaugebook.hyperspectral.hyperspectral_views`: the tables, and the numbers the chapter's
own sentences quote and check (with :func:`gaugebook.present.viz.check_prose`); and the page's
notes on those records (:func:`source_note`, :func:`waiting_markdown`, :func:`absent`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from gaugebook.engine import collection
from gaugebook.engine.collection import Collected
from gaugebook.hyperspectral import hyperspectral_runs as hs
from gaugebook.hyperspectral import hyperspectral_views as views
from gaugebook.hyperspectral.hyperspectral_views import label
from gaugebook.hyperspectral.scenes import get_scene_info
from gaugebook.present import stats, viz


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


def _pct(gap: float | None) -> float:
    """A gap (a fraction) in percent for ``{glue:text}`` (NaN without one)."""
    return math.nan if gap is None or not math.isfinite(gap) else 100 * gap


def _all_won(wins: str | None) -> bool:
    """Whether a ``"k/n"`` seed count (:func:`~gaugebook.hyperspectral.hyperspectral_views.
    seeds_won`) is every seed."""
    won, _, seeds = (wins or "").partition("/")
    return bool(seeds) and won == seeds


def _none_won(wins: str | None) -> bool:
    """Whether a ``"k/n"`` seed count is no seed of several."""
    won, _, seeds = (wins or "").partition("/")
    return bool(seeds) and won == "0"


# --------------------------------------------------------------------------------------------
# comparisons of runs: the one rule of the book's words
# --------------------------------------------------------------------------------------------

def _values(runs: Mapping[int, float] | Sequence[float]) -> list[float]:
    return [float(v) for v in (runs.values() if isinstance(runs, Mapping) else runs)]


def _points(gaps: Mapping[int, float]) -> dict[int, float]:
    """Gaps (fractions) per seed in percentage points."""
    return {k: 100 * v for k, v in gaps.items()}


def _words(c: stats.Comparison | None, lower: str, higher: str) -> str | None:
    return None if c is None else c.words(lower, higher)


def _text(c: stats.Comparison | None) -> str:
    return "—" if c is None else c.text()


def _paired_resolved(c: stats.Comparison | None) -> bool:
    """Whether the paired interval of ``c`` excludes zero (Welch's may not)."""
    return bool(c and c.paired_n and (c.paired_low > 0 or c.paired_high < 0))


def _by_density(parts: Sequence[hs.Part]) -> dict[str, hs.Part]:
    """``parts`` by density label (``low``, ``high``)."""
    return {p.density_label: p for p in parts}


def claim_items() -> dict[str, Any]:
    """The paper's numbers the chapter quotes, from the published constants: Table 5's selected
    rates and deepest-level RMSE and effective rank per method (``hsi_pub_lr_<m>``,
    ``hsi_pub_rmse_<m>``, ``hsi_pub_erank_<m>``), GD's gap below Adam at Adam's slowest and
    fastest rate of the paper's grid (``hsi_pub_sens_<low|high>_<lo|hi>``, percent) and Pavia
    University's headline (``hsi_pavia_<low|high>`` percent, ``hsi_pavia_rho_<low|high>``);
    the smallest and largest of the two scenes' gaps at their lowest density
    (``hsi_pub_lowest_lo``, ``_hi``, percent: the paper's headline)."""
    pub5 = hs.PUBLISHED_TABLE5[("indian_pines", 0.15)]
    deep = hs.THRESHOLDS[-1]
    values: dict[str, Any] = {}
    for m, v in pub5.items():
        rmse, erank = v["levels"][deep]
        values |= {f"hsi_pub_lr_{m}": v["lr"], f"hsi_pub_rmse_{m}": rmse,
                   f"hsi_pub_erank_{m}": erank}
    for key, (_, rho) in zip(("low", "high"), sorted(
            k for k in hs.PUBLISHED_FIXED_LR_GAPS if k[0] == "indian_pines"), strict=True):
        gaps = hs.PUBLISHED_FIXED_LR_GAPS[("indian_pines", rho)]
        values |= {f"hsi_pub_sens_{key}_lo": _pct(gaps[min(gaps)]),
                   f"hsi_pub_sens_{key}_hi": _pct(gaps[max(gaps)])}
    pavia = sorted(rho for scene, rho in hs.PUBLISHED_HEADLINE if scene == "pavia_u")
    for key, rho in zip(("low", "high"), pavia, strict=True):
        values |= {f"hsi_pavia_{key}": _pct(hs.PUBLISHED_HEADLINE[("pavia_u", rho)]["gap"]),
                   f"hsi_pavia_rho_{key}": rho}
    lowest = [_pct(hs.PUBLISHED_HEADLINE[(scene, min(rho for sc, rho in hs.PUBLISHED_HEADLINE
                                                     if sc == scene))]["gap"])
              for scene in hs.PAPER_SCENES]
    values |= {"hsi_pub_lowest_lo": min(lowest), "hsi_pub_lowest_hi": max(lowest)}
    return values



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


def level_values(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What :func:`~gaugebook.hyperspectral.hyperspectral_views.table5_rows` shows along the
    levels, per method key ``m`` (mean held-out RMSE over the levels some seed reached):
    ``hsi_lv_<m>_deep`` (at the deepest), ``_min`` and ``_min_at`` (the lowest and its level),
    ``_max`` and ``_max_at``, ``_falls`` (whether it falls or stays at every level) and
    ``_falls_after_max`` (whether it does so from its highest level on). By the rule, on the
    RMSE per seed of one level against the last (:func:`compare`, paired: the same runs),
    where the rows carry it: ``_steps`` (per step ``"falls"``, ``"rises"`` or the level words;
    ``_before_max`` and ``_after_max``, those before and from the highest level;
    ``_after_min``, the one from the lowest), ``_rises`` (some step is a resolved rise),
    ``_last_text`` (the numbers of the last step),
    and the deepest level against the lowest (``_deep_vs_min``, ``_deep_vs_min_text``), the
    highest against the first (``_max_vs_first``) and the deepest against the highest
    (``_deep_vs_max``), each ``"lower"``, ``"higher"`` or the level words."""
    keys = {label(m): m for m in hs.METHODS}
    values: dict[str, Any] = {}
    for name in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == name and r["n"]]
        if not mine:
            continue
        rmse = [r["rmse"] for r in mine]
        lo = min(range(len(rmse)), key=rmse.__getitem__)
        hi = max(range(len(rmse)), key=rmse.__getitem__)
        tag = f"hsi_lv_{keys[name]}"
        seeds = [r.get("rmse_by_seed") or {} for r in mine]
        steps = [stats.compare_seeds(b, a) for a, b in zip(seeds, seeds[1:], strict=False)]
        deep_min, max_first, deep_max = (stats.compare_seeds(seeds[-1], seeds[lo]),
                                         stats.compare_seeds(seeds[hi], seeds[0]),
                                         stats.compare_seeds(seeds[-1], seeds[hi]))
        words = [_words(c, "falls", "rises") for c in steps]
        values |= {f"{tag}_steps": words, f"{tag}_before_max": words[:hi],
                   f"{tag}_after_max": words[hi:],
                   f"{tag}_after_min": words[lo] if lo < len(words) else None,
                   f"{tag}_rises": any(c is not None and c.sign > 0 for c in steps),
                   f"{tag}_last_text": _text(steps[-1]) if steps else "—",
                   f"{tag}_deep_vs_min": _words(deep_min, "lower", "higher"),
                   f"{tag}_deep_vs_min_text": _text(deep_min),
                   f"{tag}_max_vs_first": _words(max_first, "lower", "higher"),
                   f"{tag}_deep_vs_max": _words(deep_max, "lower", "higher")}
        values |= {f"{tag}_deep": rmse[-1], f"{tag}_min": rmse[lo],
                   f"{tag}_min_at": mine[lo]["level"], f"{tag}_max": rmse[hi],
                   f"{tag}_max_at": mine[hi]["level"],
                   f"{tag}_falls": all(b <= a for a, b in zip(rmse, rmse[1:], strict=False)),
                   f"{tag}_falls_after_max": all(b <= a for a, b in zip(
                       rmse[hi:], rmse[hi + 1:], strict=False))}
    return values


def table5_items(c: Collected) -> dict[str, Any]:
    """Table 5 cell by cell and what the text says of it: how many cells have a published value
    (``hsi_t5_cells``), agree with it to the five decimals printed (``hsi_t5_digits``) and
    have its effective rank after rounding (``hsi_t5_ranks``), the largest difference
    (``hsi_t5_worst``), how many of the ``hsi_t5_methods`` methods select the paper's rate
    (``hsi_t5_same_lr``); :func:`level_values` of the rows; and :func:`deepest_order`."""
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
    cells = [r for r in t5 if r["rmse_pub"] is not None and r["n"]]
    chosen = {r["method"]: (r["lr"], r["lr_pub"]) for r in t5 if r["lr_pub"] is not None}
    return {
        "hsi_tab_table5": table, "hsi_t5_cells": len(cells),
        "hsi_t5_digits": sum(abs(r["diff"]) <= 5e-6 + 1e-12 for r in cells),
        "hsi_t5_ranks": sum(round(r["erank"]) == r["erank_pub"] for r in cells),
        "hsi_t5_worst": max((abs(r["diff"]) for r in cells), default=math.nan),
        "hsi_t5_methods": len(chosen),
        "hsi_t5_same_lr": sum(a == b for a, b in chosen.values()),
        **level_values(t5),
        **deepest_order(t5),
    }


def deepest_order(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The order of the methods at the deepest level of
    :func:`~gaugebook.hyperspectral.hyperspectral_views.table5_rows`, by the rule
    (:func:`compare` of the held-out RMSE per seed, paired): GD against Adam
    (``hsi_deep_gd_adam``), Adam against Muon and against shared-scale Adam
    (``hsi_deep_adam_muon``, ``hsi_deep_adam_scalar_adam``), Muon against shared-scale Adam
    (``hsi_deep_muon_scalar_adam``, and its numbers ``_text``), each ``"below"``, ``"above"``
    or the level words (``None`` without the level on every seed of both)."""
    deepest = min((r["level"] for r in rows), default=None)
    full = {r["method"]: r.get("rmse_by_seed") or {} for r in rows
            if r["level"] == deepest and r["n"]}
    seeds = {m: full.get(label(m), {}) for m in hs.METHODS}
    pairs = {"gd_adam": ("gd", "adam"), "adam_muon": ("adam", "muon"),
             "adam_scalar_adam": ("adam", "scalar_adam"),
             "muon_scalar_adam": ("muon", "scalar_adam")}
    out: dict[str, Any] = {}
    for name, (a, b) in pairs.items():
        c = stats.compare_seeds(seeds[a], seeds[b])
        out |= {f"hsi_deep_{name}": _words(c, "below", "above"),
                f"hsi_deep_{name}_text": _text(c)}
    return out


def headline_items(c: Collected) -> dict[str, Any]:
    """The headline table of the paper-protocol parts, and per Indian Pines density
    (``low``, ``high``) its density, GD's gap below Adam and the paper's (percent), and whether
    GD is below on every seed in ours and in the paper's (``hsi_head_<key>``,
    ``hsi_head_rho_<key>``, ``hsi_head_pub_<key>``, ``hsi_head_won_<key>``,
    ``hsi_head_pub_won_<key>``; NaN and ``False`` without records); the smallest and largest
    gap of a seed (``hsi_head_seed_lo_<key>``, ``_hi_``, percent); and by the rule, GD's held-out
    RMSE minus Adam's paired by seed (``hsi_head_words_<key>``: ``"below"``, ``"above"`` or
    the level words; ``hsi_head_cmp_<key>``: its numbers)."""
    parts = views.paper_parts(c)
    head = views.headline_rows(c, parts)
    table = _table(head, ["setting", "level", "gd", "adam", "gap", "wins", "gap_pub", "wins_pub"],
                   headers={**_TAB_HEADERS, "gap_pub": "paper", "wins_pub": "seeds, paper"},
                   formats=_TAB_FORMATS | {"gap_pub": "pct"})
    values: dict[str, Any] = {"hsi_tab_headline": table}
    rows = {p.density_label: (p, r) for p, r in zip(parts, head, strict=True)
            if p.scene.name == "indian_pines"}
    for key in ("low", "high"):
        p, r = rows.get(key, (None, None))
        c = stats.compare_seeds(r["gd_by_seed"], r["adam_by_seed"]) if r else None
        seed_gaps = _values(_points(r["gap_by_seed"])) if r else []
        values |= {f"hsi_head_{key}": _pct(r and r["gap"]),
                   f"hsi_head_rho_{key}": p.density if p else math.nan,
                   f"hsi_head_pub_{key}": _pct(r and r["gap_pub"]),
                   f"hsi_head_won_{key}": bool(r) and _all_won(r["wins"]),
                   f"hsi_head_pub_won_{key}": bool(r) and _all_won(r["wins_pub"]),
                   f"hsi_head_seed_lo_{key}": min(seed_gaps, default=math.nan),
                   f"hsi_head_seed_hi_{key}": max(seed_gaps, default=math.nan),
                   f"hsi_head_words_{key}": _words(c, "below", "above"),
                   f"hsi_head_cmp_{key}": _text(c)}
    return values


def grid_items(c: Collected) -> dict[str, Any]:
    """The lr-sensitivity and the grid tables of Indian Pines, and per density (``low``,
    ``high``): GD's gap below Adam at Adam's slowest and fastest fixed rate
    (``hsi_sens_<key>_lo``, ``_hi``, percent; the rates ``hsi_sens_lr_lo``, ``_hi``), whether
    it is positive at every rate (``_positive``) and grows with the rate (``_grows``); the
    headline of the paper's CPU grid (``hsi_cpu_<key>``, its level ``hsi_cpu_level_<key>``,
    ``hsi_cpu_won_<key>``: on every seed) and of the extended grid (``hsi_ext_<key>``,
    ``hsi_ext_won_<key>``); the extended grid's selections of GD and Adam at the lower density
    (``hsi_ext_gd``, ``hsi_ext_adam``) and whether Adam's selection is the top of every grid
    at every density (``hsi_adam_top``). By the rule (:func:`compare`, paired by seed): whether
    GD is resolved below Adam at every fixed rate of Adam (``hsi_sens_<key>_below``) and under
    every grid (``hsi_grids_<key>_below``); the gap at each rate against the one at the next
    slower (``hsi_sens_<key>_steps``: ``"larger"``, ``"smaller"`` or the level words), whether
    it grows at every step up to the top of the paper's grid (``_grid_grows``), the gap at that
    top (``hsi_sens_<key>_top``, percent; the rate ``hsi_sens_lr_top``) and the step from it
    to the rate we added above it (``_added``, ``_added_text``, in points); and whether Adam's
    held-out RMSE at the top of the paper's grid is resolved above its RMSE at every other
    rate of that grid, at the same level (``hsi_sens_<key>_adam_worst``)."""
    parts = _ip_parts(c)
    sens = views.lr_sensitivity_rows(c, parts)
    heads = {"lr": "Adam lr (fixed)"}
    for p in parts:
        rho = f"ρ = {p.density:g}"
        heads |= {f"{p.name}:gap": rho, f"{p.name}:pub": f"{rho}, paper"}
    grids = {p.density: views.grid_rows(c, p) for p in parts}
    rows = [{"density": d, **r} for d, rs in grids.items() for r in rs]
    values: dict[str, Any] = {
        "hsi_tab_sens": _table(sens, list(heads), headers=heads,
                               formats=dict.fromkeys(heads, "pct") | {"lr": "g"}),
        "hsi_tab_grids": _table(rows, ["density", "grid", *hs.METHODS, "level", "gap", "wins"],
                                headers={**{m: label(m) for m in hs.METHODS}, **_TAB_HEADERS},
                                formats={"density": "g", "level": "g", "gap": "pct"}),
        "hsi_sens_lr_lo": sens[0]["lr"] if sens else math.nan,
        "hsi_sens_lr_hi": sens[-1]["lr"] if sens else math.nan,
        "hsi_ext_gd": math.nan, "hsi_ext_adam": math.nan,
        "hsi_adam_top": bool(rows) and all(
            (r["adam"] or "").endswith("*") for r in rows if not r["grid"].startswith("pub")),
        "hsi_sens_lr_top": max(hs.PAPER_LR_GRIDS["adam"]),
    }
    by_density = _by_density(parts)
    for key in ("low", "high"):
        p = by_density.get(key)
        gaps = [r[f"{p.name}:gap"] for r in sens
                if r.get(f"{p.name}:gap") is not None] if p else []
        mine = grids.get(p.density, []) if p else []
        cpu = next((r for r in mine if r["grid"].startswith("CPU")), None)
        ext = next((r for r in mine if r["grid"].startswith("extended")), None)
        values |= _sens_rule(key, p, sens)
        below = [stats.compare_seeds(r["gd_by_seed"], r["adam_by_seed"]) for r in mine
                 if not r["grid"].startswith("pub")]
        values |= {
            f"hsi_grids_{key}_below": bool(below) and all(
                _words(c, "below", "above") == "below" for c in below),
            f"hsi_sens_{key}_lo": _pct(gaps[0] if gaps else None),
            f"hsi_sens_{key}_hi": _pct(gaps[-1] if gaps else None),
            f"hsi_sens_{key}_positive": bool(gaps) and all(g > 0 for g in gaps),
            f"hsi_sens_{key}_grows": bool(gaps) and all(
                b > a for a, b in zip(gaps, gaps[1:], strict=False)),
            f"hsi_cpu_{key}": _pct(cpu and cpu["gap"]),
            f"hsi_cpu_level_{key}": cpu["level"] if cpu and cpu["level"] else math.nan,
            f"hsi_cpu_won_{key}": bool(cpu) and _all_won(cpu["wins"]),
            f"hsi_ext_{key}": _pct(ext and ext["gap"]),
            f"hsi_ext_won_{key}": bool(ext) and _all_won(ext["wins"]),
        }
        if key == "low" and ext:
            values |= {f"hsi_ext_{m}": float(ext[m].rstrip("*")) if ext[m] else math.nan
                       for m in ("gd", "adam")}
    return values


def _sens_rule(key: str, part: hs.Part | None, sens: Sequence[Mapping[str, Any]]
               ) -> dict[str, Any]:
    """The rule's reading of one density's column of the lr-sensitivity rows (see
    :func:`grid_items`)."""
    name = part.name if part else None
    mine = [r for r in sens if name and r.get(f"{name}:gap") is not None]
    gd_adam = [stats.compare_seeds(r[f"{name}:gd_by_seed"], r[f"{name}:adam_by_seed"])
               for r in mine]
    gaps = [_points(r[f"{name}:gap_by_seed"]) for r in mine]
    steps = [stats.compare_seeds(b, a) for a, b in zip(gaps, gaps[1:], strict=False)]
    grid = [i for i, r in enumerate(mine) if r["lr"] in hs.PAPER_LR_GRIDS["adam"]]
    top = max(grid, key=lambda i: mine[i]["lr"]) if grid else None
    added = steps[top] if top is not None and top < len(steps) else None
    adam_top = mine[top][f"{name}:adam_by_seed"] if top is not None else {}
    worst = [stats.compare_seeds(adam_top, mine[i][f"{name}:adam_by_seed"])
             for i in grid if i != top]
    same_level = len({mine[i][f"{name}:level"] for i in grid}) == 1
    return {
        f"hsi_sens_{key}_below": bool(gd_adam) and all(
            _words(c, "below", "above") == "below" for c in gd_adam),
        f"hsi_sens_{key}_steps": [_words(c, "smaller", "larger") for c in steps],
        f"hsi_sens_{key}_grid_grows": top is not None and top > 0 and all(
            _words(c, "smaller", "larger") == "larger" for c in steps[:top]),
        f"hsi_sens_{key}_top": _pct(mine[top][f"{name}:gap"]) if top is not None else math.nan,
        f"hsi_sens_{key}_added": _words(added, "smaller", "larger"),
        f"hsi_sens_{key}_added_text": _text(added),
        f"hsi_sens_{key}_adam_worst": bool(worst) and same_level and all(
            _words(c, "below", "above") == "above" for c in worst),
    }


def arm_items(c: Collected) -> dict[str, Any]:
    """The arms of Indian Pines (dtype, centring), and per density (``low``, ``high``) how far
    float32 (``hsi_arm_<key>_f32``) and float32 with the observed-only centring
    (``hsi_arm_<key>_obs``) move GD's gap below Adam from the paper's arm (float64,
    all-entries centring), in percentage points; the largest such move (``hsi_arm_spread``)
    and whether GD is below Adam on every seed of every arm (``hsi_arm_every``). By the rule
    (:func:`compare` of the gaps per seed, in points, paired: the arms share masks and initial
    factors): each move's words (``hsi_arm_<key>_<arm>_words``: ``"lower"``, ``"higher"`` or
    the level words), numbers (``_text``) and whether its paired interval alone excludes zero
    (``_paired``), the largest move of a seed under float32
    (``hsi_arm_<key>_f32_max``, points) and whether GD is resolved below Adam in every arm
    (``hsi_arm_below``)."""
    arms = views.arm_rows(c, "indian_pines")
    values: dict[str, Any] = {"hsi_tab_arms": _table(
        arms, ["density", "dtype", "centring", "level", "gd", "adam", "gap", "wins"],
        headers=_TAB_HEADERS, formats=_TAB_FORMATS)}
    rows = [r for r in arms if r["gap"] is not None]
    densities = sorted({r["density"] for r in rows})
    arms_of = {"f32": ("float32", "all entries"), "obs": ("float32", "observed only")}
    for key in ("low", "high"):
        values |= {f"hsi_arm_{key}_f32_max": math.nan}
        for arm in arms_of:
            values |= {f"hsi_arm_{key}_{arm}": math.nan, f"hsi_arm_{key}_{arm}_words": None,
                       f"hsi_arm_{key}_{arm}_text": "—", f"hsi_arm_{key}_{arm}_paired": False}
    for key, density in zip(("low", "high"), densities, strict=False):
        mine = {(r["dtype"], r["centring"]): r for r in rows if r["density"] == density}
        ref = mine.get(("float64", "all entries"))
        for arm, which in arms_of.items():
            row = mine.get(which)
            if row is None or ref is None:
                continue
            moved = stats.compare_seeds(_points(row["gap_by_seed"]), _points(ref["gap_by_seed"]))
            values |= {f"hsi_arm_{key}_{arm}": 100 * (row["gap"] - ref["gap"]),
                       f"hsi_arm_{key}_{arm}_words": _words(moved, "lower", "higher"),
                       f"hsi_arm_{key}_{arm}_text": _text(moved),
                       f"hsi_arm_{key}_{arm}_paired": _paired_resolved(moved)}
            if arm == "f32":
                per_seed = [abs(v - ref["gap_by_seed"][s]) for s, v in row["gap_by_seed"].items()
                            if s in ref["gap_by_seed"]]
                values[f"hsi_arm_{key}_f32_max"] = 100 * max(per_seed, default=math.nan)
    spreads = [100 * (max(g) - min(g)) for g in (
        [r["gap"] for r in rows if r["density"] == d] for d in densities)]
    below = [stats.compare_seeds(r["gd_by_seed"], r["adam_by_seed"]) for r in rows]
    return values | {"hsi_arm_spread": max(spreads, default=math.nan),
                     "hsi_arm_every": bool(rows) and all(
                         _all_won(r["wins"]) and r["gap"] > 0 for r in rows),
                     "hsi_arm_below": bool(below) and all(
                         _words(c, "below", "above") == "below" for c in below)}


def _gd_edge(rows: Sequence[Mapping[str, Any]], adam: float, seeds: int,
             adam_by_seed: Mapping[int, float] | None = None) -> dict[str, Any]:
    """What :func:`~gaugebook.hyperspectral.hyperspectral_views.gd_rate_rows` shows of GD's
    selected rate (``adam``: Adam's held-out RMSE at the same level, ``adam_by_seed`` per
    seed): the rate (``lr``), whether every seed diverged at the next rate of the grid
    (``edge``), the effective rank there (``erank``) and the largest at the slower rates
    (``slow_erank``), the held-out RMSE range of the slower rates (``slow_lo``, ``slow_hi``),
    whether each mean is below Adam's (``slow_below_adam``) and whether each is resolved below
    it by the rule, paired by seed (``slow_resolved``; ``False`` without values per seed)."""
    chosen = next((i for i, r in enumerate(rows) if r["selected"]), None)
    slower = [r for r in rows[:chosen or 0] if r["rmse"] is not None]
    above = rows[chosen + 1] if chosen is not None and chosen + 1 < len(rows) else None
    sel = rows[chosen] if chosen is not None else {}
    return {
        "lr": sel.get("lr", math.nan),
        "edge": above is not None and above["diverged"] == seeds,
        "erank": sel.get("erank") or math.nan,
        "slow_erank": max((r["erank"] for r in slower), default=math.nan),
        "slow_lo": min((r["rmse"] for r in slower), default=math.nan),
        "slow_hi": max((r["rmse"] for r in slower), default=math.nan),
        "slow_below_adam": bool(slower) and all(r["rmse"] < adam for r in slower),
        "slow_resolved": bool(slower) and all(
            _words(stats.compare_seeds(r.get("rmse_by_seed") or {}, adam_by_seed or {}), "below",
                   "above") == "below" for r in slower),
    }


def _ratio_text(ratio: float, a: Mapping[int, float], b: Mapping[int, float]) -> str:
    """``ratio`` (of the means) to the digits its spread supports: the half-width of the
    interval of :func:`gaugebook.present.stats.compare_ratio` of ``a`` over ``b`` (the rule on
    the logarithms, paired by seed); a dash where that cannot be formed."""
    try:
        c = stats.compare_ratio(a, b)
    except ValueError:
        return "—"
    return stats.fmt_spread(ratio, (c.high - c.low) / 2)


def beyond_items(c: Collected) -> dict[str, Any]:
    """The scenes beyond the paper: the table of selections and headline, Samson's GD rates;
    per scene (``salinas_a``, ``samson``) and density (``low``, ``high``),
    ``hsi_by_<scene>_<key>`` (GD's gap below Adam, percent), ``_rho``, ``_ratio`` (GD's
    held-out RMSE over Adam's, the ratio of the means, and ``_ratio_text``, printed to the
    digits the interval of :func:`gaugebook.present.stats.compare_ratio` supports), ``_won``
    and ``_lost`` (GD below Adam on every seed, on none), and by the rule (:func:`compare`,
    paired by seed) ``_words`` (``"below"``, ``"above"`` or the level words) and ``_text``;
    per Salinas-A density, its gap against Indian Pines' at the same density label
    (``hsi_by_salinas_a_<key>_vs_ip``: resolved larger than in every arm of Indian Pines, its
    scenes' seeds do not pair; ``_vs_ip_text``: the numbers against the paper's arm, in
    points); per Samson density, ``hsi_sam_<key>_<name>`` for the names of :func:`_gd_edge` and
    ``hsi_sam_<key>_adam`` (Adam's held-out RMSE at the same level). NaN, ``False`` or ``None``
    without records."""
    others = [p for p in views.main_parts(c) if p.scene.name not in hs.PAPER_SCENES
              and (p.scene.name, p.density) not in hs.PUBLISHED_HEADLINE]
    values: dict[str, Any] = {}
    for scene in ("salinas_a", "samson"):
        for key in ("low", "high"):
            values |= {f"hsi_by_{scene}_{key}{x}": math.nan for x in ("", "_rho", "_ratio")}
            values |= {f"hsi_by_{scene}_{key}{x}": False for x in ("_won", "_lost", "_vs_ip")}
            values |= {f"hsi_by_{scene}_{key}{x}": "—" for x in ("_text", "_ratio_text",
                                                                  "_vs_ip_text")}
            values[f"hsi_by_{scene}_{key}_words"] = None
    for key in ("low", "high"):
        values |= {f"hsi_sam_{key}_{k}": v
                   for k, v in {**_gd_edge([], math.nan, 0), "adam": math.nan}.items()}
    beyond, gd = [], []
    for p in others:
        s = views.summary(c, p)
        h, comp = s["headline"], s["comparison"]["methods"]
        beyond.append({"setting": f"{p.scene.label}, ρ = {p.density:g}", "level": h["level"],
                       "gap": h["gap"], "wins": views.seeds_won(h),
                       **{m: comp[m]["lr"] for m in hs.METHODS}})
        tag = f"hsi_by_{p.scene.name}_{p.density_label}"
        ratio = h["gd"] / h["adam"] if h["gd"] is not None and h["adam"] else math.nan
        per_seed = views._per_seed(h)
        gd_adam = stats.compare_seeds(per_seed["gd_by_seed"], per_seed["adam_by_seed"])
        values |= {tag: _pct(h["gap"]), f"{tag}_rho": p.density, f"{tag}_ratio": ratio,
                   f"{tag}_ratio_text": _ratio_text(ratio, per_seed["gd_by_seed"],
                                                    per_seed["adam_by_seed"]),
                   f"{tag}_won": _all_won(beyond[-1]["wins"]),
                   f"{tag}_lost": _none_won(beyond[-1]["wins"]),
                   f"{tag}_words": _words(gd_adam, "below", "above"),
                   f"{tag}_text": _text(gd_adam)}
        ip = {q.name: views.summary(c, q)["headline"]["gap_by_seed"]
              for q in views.shown_parts(c)
              if q.scene.name == "indian_pines" and q.density_label == p.density_label}
        if ip:  # another scene: its seeds do not pair with ours, the gaps go in as lists
            mine = _values(_points(per_seed["gap_by_seed"]))
            vs = {name: stats.compare_seeds(mine, _values(_points(g))) for name, g in ip.items()}
            paper_arm = next((vs[n] for n in vs if n.endswith("_paper")), None)
            values |= {f"{tag}_vs_ip": all(_words(v, "smaller", "larger") == "larger"
                                           for v in vs.values()),
                       f"{tag}_vs_ip_text": _text(paper_arm)}
        if p.scene.name == "samson":
            rates = views.gd_rate_rows(c, p)
            gd += [{"density": p.density, **r} for r in rates]
            adam = comp["adam"]["rmse"] or math.nan
            edge = _gd_edge(rates, adam, len(c.config.eval_seeds),
                            comp["adam"].get("rmse_by_seed"))
            values |= {f"hsi_sam_{p.density_label}_{k}": v
                       for k, v in {**edge, "adam": adam}.items()}
    return values | {
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
    }

