"""Routing parameters between matrix rules and elementwise rules: by shape
(:func:`split_matrix_params`) or by module (:func:`muon_param_groups`, for
:class:`~gaugekit.optim.MuonAdam`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from torch import Tensor, nn

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
    split_qkv: bool = False, flatten_conv: bool = True, **group_options: Any,
) -> list[dict[str, Any]]:
    """Param groups for :class:`~gaugekit.optim.MuonAdam` that route by module, as Muon's
    authors advise (hidden matrices to Muon; embeddings, the output head and gains to AdamW).

    To Adam (``use_muon=False``):

    * the weights of ``nn.Embedding`` and ``nn.EmbeddingBag`` (a lookup table, not a map);
    * the output head: the ``head`` argument (a module, a parameter, a name in ``model``, or a
      sequence of them), every ``nn.Linear`` whose weight *is* an embedding's weight (tied,
      found by identity: ``linear.weight is embedding.weight``) and every ``nn.Linear`` named
      ``lm_head``, ``head`` or ``classifier`` (``HEAD_NAMES``, the last name component);
    * every parameter of fewer than 2 dimensions (biases, norm gains, scalars);
    * convolution kernels (3-D and more) when ``flatten_conv=False``.

    To Muon (``use_muon=True``): every other parameter of 2 or more dimensions; a kernel
    ``(out, in, kh, kw)`` is orthogonalized as the matrix ``out × in·kh·kw``. With
    ``split_qkv=True`` the fused ``in_proj_weight`` of each ``nn.MultiheadAttention``
    (``[W_Q; W_K; W_V]``) goes to a group with ``split_rows=3``: Muon orthogonalizes the query,
    key and value blocks separately, as for separate projections.

    Parameters without ``requires_grad`` are left out; a tied parameter appears once. The
    groups come in the order Muon, Muon with split rows, Adam (empty ones omitted), in the
    model's parameter order; ``group_options`` (e.g. ``weight_decay=0.01``) go into every group.

        opt = MuonAdam(muon_param_groups(model), lr=0.02)
    """
    embeddings = [m.weight for m in model.modules()
                  if isinstance(m, (nn.Embedding, nn.EmbeddingBag))]
    to_adam = {id(p) for p in embeddings} | {id(p) for p in _head_params(model, head)}
    fused: set[int] = set()
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and (
            name.rsplit(".", 1)[-1] in HEAD_NAMES
            or any(module.weight is e for e in embeddings)
        ):
            to_adam.update(id(p) for p in module.parameters())
        if split_qkv and isinstance(module, nn.MultiheadAttention):
            if module.in_proj_weight is not None:
                fused.add(id(module.in_proj_weight))
    muon, split, adam = [], [], []
    for p in model.parameters():
        if not p.requires_grad:
            continue
        if id(p) in to_adam or p.ndim < 2 or (p.ndim > 2 and not flatten_conv):
            adam.append(p)
        elif id(p) in fused:
            split.append(p)
        else:
            muon.append(p)
    groups = [
        {"params": muon, "use_muon": True},
        {"params": split, "use_muon": True, "split_rows": 3},
        {"params": adam, "use_muon": False},
    ]
    return [{**group_options, **g} for g in groups if g["params"]]
