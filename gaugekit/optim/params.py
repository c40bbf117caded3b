"""Routing parameters between matrix rules and elementwise rules: by shape
(:func:`split_matrix_params`) or by module (:func:`muon_param_groups`, for
:class:`~gaugekit.optim.MuonAdam`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from torch import Tensor, nn

from gaugekit.optim.orthogonalize import RowBlocks

#: the names (last component) of a module that is the output head (:func:`muon_param_groups`).
HEAD_NAMES: frozenset[str] = frozenset({"lm_head", "head", "classifier"})


def split_matrix_params(
    model_or_params: nn.Module | Iterable[Tensor], *, batch_dims: int = 0
) -> tuple[list[Tensor], list[Tensor]]:
    """Split parameters into ``(matrices, others)``.

    A matrix has exactly ``batch_dims + 2`` dimensions (the shape Muon, Shampoo, ScaledGD and
    GramPreconditioned accept); everything else (biases, norms' scales, convolution kernels)
    goes to ``others``. Only parameters with ``requires_grad`` are kept; order is preserved::

        matrices, others = split_matrix_params(model)
        opt_matrix = Muon(matrices, lr=3e-2)
        opt_other = Adam(others, lr=1e-3)

    It sees shapes only: an embedding table and the output head are matrices too. For Muon
    with Adam on those, :func:`muon_param_groups` routes by module.
    """
    if isinstance(model_or_params, nn.Module):
        params: Iterable[Tensor] = model_or_params.parameters()
    else:
        params = model_or_params
    matrices: list[Tensor] = []
    others: list[Tensor] = []
    for p in params:
        if not p.requires_grad:
            continue
        (matrices if p.ndim == batch_dims + 2 else others).append(p)
    return matrices, others


def _head_params(model: nn.Module, head: Any) -> list[Tensor]:
    """The parameters of ``head``: a module, a parameter, a name in ``model``, or a sequence."""
    if head is None:
        return []
    if isinstance(head, (str, nn.Module, Tensor)):
        head = [head]
    out: list[Tensor] = []
    for item in head:
        if isinstance(item, str):
            modules, params = dict(model.named_modules()), dict(model.named_parameters())
            if item in modules:
                item = modules[item]
            elif item in params:
                item = params[item]
            else:
                raise ValueError(f"Invalid head: {item!r}; expected a module or parameter name "
                                 "of the model, a module or a parameter")
        if isinstance(item, nn.Module):
            out.extend(item.parameters())
        elif isinstance(item, Tensor):
            out.append(item)
        else:
            raise ValueError(f"Invalid head: {item!r}; expected a module or parameter name of "
                             "the model, a module or a parameter")
    return out


def muon_param_groups(
    model: nn.Module, *, head: nn.Module | Tensor | str | Sequence[Any] | None = None,
    split_qkv: bool | str = False, flatten_conv: bool = True, **group_options: Any,
) -> list[dict[str, Any]]:
    """Param groups for :class:`~gaugekit.optim.MuonAdam` that route by module, as Muon's
    authors advise (hidden matrices to Muon; embeddings, the output head and gains to AdamW),
    and orient every matrix by the module that holds it.

    To Adam (``use_muon=False``):

    * the weights of ``nn.Embedding`` and ``nn.EmbeddingBag`` (a lookup table, not a map);
    * the output head: the ``head`` argument (a module, a parameter, a name in ``model``, or a
      sequence of them), every ``nn.Linear`` whose weight *is* an embedding's weight (tied,
      found by identity: ``linear.weight is embedding.weight``) and every ``nn.Linear`` named
      ``lm_head``, ``head`` or ``classifier`` (``HEAD_NAMES``, the last name component);
    * every parameter of fewer than 2 dimensions (biases, norm gains, scalars);
    * convolution kernels (3-D and more) when ``flatten_conv=False``.

    To Muon (``use_muon=True``): every other parameter of 2 or more dimensions, as the matrix
    ``out × in`` whichever way its layer stores it: ``nn.Linear`` and convolutions store
    ``(out, in, ...)``; transformers' ``Conv1D`` (GPT-2) stores ``(in, out)`` and transposed
    convolutions ``(in, out, ...)``, which go to a group with ``transposed=True`` (so the shape
    factor ``ρ`` and the row blocks are the ``nn.Linear`` layer's: the same network written
    either way takes the same steps). A kernel ``(out, in, kh, kw)`` is the matrix
    ``out × in·kh·kw``.

    ``split_qkv``: the fused query/key/value projections are orthogonalized by block
    (``True`` or ``"blocks"``: ``W_Q``, ``W_K``, ``W_V`` each alone, as separate projections
    would be) or by head (``"heads"``: every head's query, key and value rows alone), in a
    group of their own with ``split_rows`` (:mod:`gaugekit.optim.orthogonalize`). The layouts:
    ``nn.MultiheadAttention``'s ``in_proj_weight`` and those the twin audit knows
    (:func:`~gaugekit.audit.heads.find_qk_sites`: GPT-2's ``c_attn``, the per-head
    ``query_key_value`` of GPT-NeoX, Bloom and Falcon, the packed rows of Phi-3, MPT,
    GPTBigCode and multi-query Falcon, Falcon's grouped rows). Off (``False``, the default),
    a fused projection is one matrix.

    Parameters without ``requires_grad`` are left out; a tied parameter appears once. The
    groups come in the order Muon, Muon transposed, Muon with row blocks (one group per
    layout), Adam (empty ones omitted), in the model's parameter order; ``group_options``
    (e.g. ``weight_decay=0.01``) go into every group::

        opt = MuonAdam(muon_param_groups(model), lr=0.02)
    """
    if split_qkv not in (False, True, "blocks", "heads"):
        raise ValueError(f"Invalid split_qkv: {split_qkv!r}; expected False, True, 'blocks' or "
                         "'heads'")
    embeddings = [m.weight for m in model.modules()
                  if isinstance(m, (nn.Embedding, nn.EmbeddingBag))]
    to_adam = {id(p) for p in embeddings} | {id(p) for p in _head_params(model, head)}
    transposed: set[int] = set()
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and (
            name.rsplit(".", 1)[-1] in HEAD_NAMES
            or any(module.weight is e for e in embeddings)
        ):
            to_adam.update(id(p) for p in module.parameters())
        if _stores_in_out(module):
            transposed.add(id(module.weight))
    splits = fused_qkv_blocks(model, "blocks" if split_qkv is True else split_qkv) \
        if split_qkv else {}
    muon, flipped, adam = [], [], []
    split_groups: dict[tuple, list[Tensor]] = {}
    for p in model.parameters():
        if not p.requires_grad:
            continue
        if id(p) in to_adam or p.ndim < 2 or (p.ndim > 2 and not flatten_conv):
            adam.append(p)
        elif id(p) in splits:
            split_groups.setdefault((splits[id(p)], id(p) in transposed), []).append(p)
        else:
            (flipped if id(p) in transposed else muon).append(p)
    groups = [{"params": muon, "use_muon": True},
              {"params": flipped, "use_muon": True, "transposed": True}]
    for (rows, flip), params in split_groups.items():
        group = {"params": params, "use_muon": True, "split_rows": rows}
        groups.append({**group, "transposed": True} if flip else group)
    groups.append({"params": adam, "use_muon": False})
    return [{**group_options, **g} for g in groups if g["params"]]


def _stores_in_out(module: nn.Module) -> bool:
    """Whether ``module``'s weight is stored ``(in, out, ...)``: transformers' ``Conv1D``
    (recognised by its class name and ``nf``, without importing transformers) and transposed
    convolutions."""
    if isinstance(module, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
        return True
    weight = getattr(module, "weight", None)
    return (type(module).__name__ == "Conv1D" and isinstance(weight, Tensor)
            and weight.ndim == 2 and getattr(module, "nf", None) == weight.shape[1])


def fused_qkv_blocks(model: nn.Module, by: str = "blocks") -> dict[int, RowBlocks]:
    """``id(weight) → split_rows`` for every fused query/key/value projection of ``model``
    whose layout is known (:func:`muon_param_groups`), its rows as Muon orients them
    (``out``): by ``"blocks"`` (query, key, value) or by ``"heads"`` (every head's query, key
    and value rows)."""
    from gaugekit.audit.site_reading import _transformers_site

    out: dict[int, RowBlocks] = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.MultiheadAttention):
            if module.in_proj_weight is not None:
                out[id(module.in_proj_weight)] = 3 if by == "blocks" else 3 * module.num_heads
            continue
        try:
            site = _transformers_site(model, name, module)
        except ValueError:  # a layout the audit refuses: left whole
            continue
        # a layout its code does not name (candidates the twin audit would probe): left whole
        if site is None or site.candidates or site.kind not in _FUSED_KINDS:
            continue
        fused = dict(model.named_modules())[site.modules[-1]].weight
        out[id(fused)] = _site_blocks(site, fused, by)
    return out


#: the twin audit's kinds of fused q/k/v sites (gaugekit.audit.sites)
_FUSED_KINDS = ("conv1d", "conv1d_cross", "fused_heads", "packed_rows", "grouped_rows")


def _site_blocks(site: Any, weight: Tensor, by: str) -> RowBlocks:
    """The row blocks of a fused projection of a twin-audit site (rows as ``out``)."""
    d, heads, kv = site.d_head, site.num_heads, site.kv_heads
    rows = weight.shape[1] if site.kind.startswith("conv1d") else weight.shape[0]
    if by == "heads":
        return rows // d
    if site.kind == "conv1d":
        return 3
    if site.kind == "conv1d_cross":
        return 2  # [k | v]; the query is q_attn, a matrix of its own
    if site.kind == "packed_rows":
        return (heads * d, kv * d, kv * d)
    if site.kind == "fused_heads":  # [q_h | k_h | v_h] per head
        return tuple(tuple(h * 3 * d + part * d + i for h in range(heads) for i in range(d))
                     for part in range(3))
    per_group = heads // kv  # grouped_rows: [q_{g,1..H/G} | k_g | v_g] per key-value group
    span = (per_group + 2) * d
    return (tuple(g * span + i for g in range(kv) for i in range(per_group * d)),
            tuple(g * span + per_group * d + i for g in range(kv) for i in range(d)),
            tuple(g * span + (per_group + 1) * d + i for g in range(kv) for i in range(d)))
