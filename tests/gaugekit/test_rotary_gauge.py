"""gaugekit.audit.rotary: the rotations that commute with a rotary position embedding.

Pure math, float64, no ``transformers``: the residual gauge ``SO(2)^{r/2} × O(d − r)`` keeps
every ``M_h(δ) = W_Qᵀ R(δ) W_K``; a reflection of one pair and a Haar rotation of the whole head
do not (the negative controls).
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import BROKEN, EXACT, generator

from gaugekit.audit.rotary import RotaryLayout
from gaugekit.gauge import haar_orthogonal, orthogonality_defect

F64 = torch.float64
D = 8
POSITIONS = torch.arange(0, 40, dtype=F64)


def llama_frequencies(r: int) -> list[float]:
    return [10000.0 ** (-2 * k / r) for k in range(r // 2)]


def rotate_half(x: torch.Tensor) -> torch.Tensor:  # Llama's
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x: torch.Tensor) -> torch.Tensor:  # GPT-J's
    x1, x2 = x[:, :, :, ::2], x[:, :, :, 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


LAYOUTS = {
    "half": RotaryLayout.half_split(D, frequencies=llama_frequencies(D)),
    "interleaved": RotaryLayout.interleaved(D, frequencies=llama_frequencies(D)),
    "partial": RotaryLayout.half_split(D, rotary_dim=4, frequencies=llama_frequencies(4)),
}


def commutator(layout: RotaryLayout, A: torch.Tensor) -> float:
    """``max_m ‖R(m) A − A R(m)‖_F`` over 40 positions."""
    R = layout.rotary_matrix(POSITIONS)
    return (R @ A - A @ R).flatten(1).norm(dim=1).max().item()


def model_rotary(layout_fn, x: torch.Tensor, m: torch.Tensor, freqs: list[float]) -> torch.Tensor:
    """The model's own formula ``x cos + rotate(x) sin`` (Llama: ``cos = [cos θ, cos θ]``)."""
    theta = m[:, None] * torch.tensor(freqs, dtype=F64)
    if layout_fn is rotate_half:
        cos, sin = torch.cat([theta.cos()] * 2, -1), torch.cat([theta.sin()] * 2, -1)
        return x * cos + rotate_half(x) * sin
    cos, sin = theta.cos().repeat_interleave(2, -1), theta.sin().repeat_interleave(2, -1)
    return x * cos + rotate_every_two(x[None, None]).reshape(x.shape) * sin


@pytest.mark.parametrize("fn, name", [(rotate_half, "half"), (rotate_every_two, "interleaved")])
def test_rotary_matrix_is_the_models_formula(fn, name):
    """``R(m) x`` of the layout equals the model's ``x cos + rotate(x) sin``, position by
    position, and the layout read off ``rotate`` is the named one."""
    layout = RotaryLayout.from_rotate(fn, D, frequencies=llama_frequencies(D))
    assert layout == LAYOUTS[name] and layout.style == {"half": "half_split"}.get(name, name)
    x = torch.randn(len(POSITIONS), D, generator=generator(0), dtype=F64)
    ours = (layout.rotary_matrix(POSITIONS) @ x[:, :, None])[..., 0]
    assert torch.allclose(ours, model_rotary(fn, x, POSITIONS, llama_frequencies(D)),
                          atol=EXACT, rtol=0)


def test_from_rotate_refuses_a_map_that_is_no_quarter_turn():
    with pytest.raises(ValueError, match="Invalid rotate: .*J² = −I"):
        RotaryLayout.from_rotate(lambda x: x, D)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_drawn_rotations_commute_with_every_position_and_keep_every_bilinear_form(name):
    """``A ∈ SO(2)^{r/2} × O(d − r)``: ``R(m) A = A R(m)`` for all ``m``, so
    ``W_Qᵀ Aᵀ R(δ) A W_K = W_Qᵀ R(δ) W_K`` for every offset."""
    layout = LAYOUTS[name]
    A = layout.draw(3, generator=generator(1))
    assert orthogonality_defect(A).max() < EXACT
    assert layout.commutant_defect(A).max() < EXACT
    for a in A:
        assert commutator(layout, a) < EXACT
    W_Q, W_K = (torch.randn(D, 5, generator=generator(s), dtype=F64) for s in (2, 3))
    R = layout.rotary_matrix(POSITIONS - 20)
    M = W_Q.T @ R @ W_K
    M_twin = (A[0] @ W_Q).T @ R @ (A[0] @ W_K)
    assert (M - M_twin).abs().max() < EXACT


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_pair_blocks_are_rotations_not_reflections(name):
    """Each pair block of a draw has determinant +1 and is ``cos φ I + sin φ J``."""
    layout = LAYOUTS[name]
    A = layout.draw(4, generator=generator(4))
    for i, j in layout.pairs:
        block = A[:, [i, j]][:, :, [i, j]]
        assert torch.allclose(torch.linalg.det(block), torch.ones(4, dtype=F64), atol=EXACT)
        assert torch.allclose(block[:, 0, 0], block[:, 1, 1], atol=0)
        assert torch.allclose(block[:, 1, 0], -block[:, 0, 1], atol=0)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_a_reflection_of_one_pair_does_not_commute(name):
    """Negative control: ``F = diag(1, −1)`` on a pair is orthogonal and keeps ``R(0) = I``,
    but ``F R(θ) F = R(−θ)``, so at a generic position the logits change."""
    layout = LAYOUTS[name]
    i, j = layout.pairs[0]
    F = torch.eye(D, dtype=F64)
    F[j, j] = -1.0
    assert commutator(layout, torch.eye(D, dtype=F64)) == 0.0
    assert commutator(layout, F) > BROKEN
    assert layout.commutant_defect(F) > BROKEN
    W_Q, W_K = (torch.randn(D, 5, generator=generator(s), dtype=F64) for s in (2, 3))
    R = layout.rotary_matrix(torch.tensor([3.0]))[0]
    assert ((F @ W_Q).T @ R @ (F @ W_K) - W_Q.T @ R @ W_K).abs().max() > BROKEN


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_a_haar_rotation_of_the_head_does_not_commute(name):
    """Negative control: the full ``O(d)`` gauge of attention without RoPE is not a symmetry."""
    layout = LAYOUTS[name]
    A = haar_orthogonal(D, generator=generator(5))
    assert commutator(layout, A) > BROKEN and layout.commutant_defect(A) > BROKEN


def test_the_pass_through_block_is_free():
    """Partial rotary: any orthogonal map of the ``d − r`` unrotated coordinates commutes, and
    the group has dimension ``r/2 + (d − r)(d − r − 1)/2``."""
    layout = LAYOUTS["partial"]
    assert layout.pass_dims == (4, 5, 6, 7) and layout.rotary_dim == 4
    assert layout.group_dimension == 2 + 6
    A = torch.eye(D, dtype=F64)
    A[4:, 4:] = haar_orthogonal(4, generator=generator(6))
    assert commutator(layout, A) < EXACT and layout.commutant_defect(A) < EXACT


def test_equal_frequencies_enlarge_the_commutant():
    """Two pairs with one frequency: a rotation mixing them as complex coordinates
    (``U(2)``) commutes; with distinct frequencies it does not, and the defect says so."""
    same = RotaryLayout.interleaved(4, frequencies=[0.3, 0.3])
    distinct = RotaryLayout.interleaved(4, frequencies=[0.3, 0.7])
    c, s = math.cos(0.4), math.sin(0.4)
    A = torch.tensor([[c, 0, -s, 0], [0, c, 0, -s], [s, 0, c, 0], [0, s, 0, c]], dtype=F64)
    assert commutator(same, A) < EXACT and same.commutant_defect(A) < EXACT
    assert commutator(distinct, A) > BROKEN and distinct.commutant_defect(A) > BROKEN
    P = distinct.commutant_projection(A)
    assert torch.allclose(distinct.commutant_projection(P), P, atol=EXACT)


@pytest.mark.parametrize("kwargs, match", [
    ({"d_head": 8, "pairs": ((0, 1), (1, 2))}, "Invalid pairs"),
    ({"d_head": 4, "pairs": ((0, 9),)}, "Invalid pairs"),
    ({"d_head": 4, "pairs": ((0, 1),), "style": "spiral"}, "Invalid style"),
    ({"d_head": 4, "pairs": ((0, 1),), "frequencies": (1.0, 2.0)}, "Invalid frequencies"),
])
def test_bad_layouts_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RotaryLayout(**kwargs)
    with pytest.raises(ValueError, match="Invalid rotary_dim"):
        RotaryLayout.half_split(8, rotary_dim=3)
