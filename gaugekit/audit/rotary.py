r"""The residual gauge of rotary position embeddings: the rotations that commute with RoPE.

Rotary embeddings
-----------------
A rotary position embedding (RoPE) turns the query of head ``h`` at position ``m`` into
``R(m) q_h`` and the key at position ``n`` into ``R(n) k_h`` before the logit. In the head's
coordinates the ``r = rotary_dim`` leading coordinates are grouped into ``r/2`` *pairs* (planes)
``(i_k, j_k)``, and on pair ``k`` the map is the 2-D rotation by the angle ``m ω_k``:

    ``R(m) = ⊕_k (cos(m ω_k) I₂ + sin(m ω_k) J₂) ⊕ I_{d−r}``,  ``J₂ = [[0, −1], [1, 0]]``,

with frequencies ``ω_k`` (``b^{−2k/r}`` with base ``b = 10000`` in the original RoPE) and the
``d − r`` trailing coordinates passed through (partial rotary: GPT-NeoX, GPT-J, Phi). Writing
``J`` for the ``d × d`` matrix that is ``J₂`` on every pair and 0 on the pass-through block,
``R(m) = P_pass + Σ_k (cos(m ω_k) P_k + sin(m ω_k) J P_k)`` with ``P_k`` the projection on pair
``k``. Which coordinates form a pair is the model's *layout*:

* half-split (Llama, Mistral, Qwen, GPT-NeoX: ``rotate_half(x) = [−x₂, x₁]``): pair ``k`` is
  ``(k, k + r/2)``;
* interleaved (GPT-J, CodeGen: ``rotate_every_two``): pair ``k`` is ``(2k, 2k + 1)``.

The bilinear form is no longer one matrix
-----------------------------------------
With homogeneous ``x̃`` as in :mod:`gaugekit.audit.heads`, the logit between positions ``m``
and ``n`` is

    ``(R(m) W̃_{Q,h} x̃)ᵀ (R(n) W̃_{K,h} x̃') = x̃ᵀ W̃_{Q,h}ᵀ R(m)ᵀ R(n) W̃_{K,h} x̃'
    = x̃ᵀ W̃_{Q,h}ᵀ R(n − m) W̃_{K,h} x̃'``

(``R(m)ᵀ R(n) = R(n − m)``: rotations by angles on the same planes compose by adding the
angles). The paper's invariant ``M_h = W_{Q,h}ᵀ W_{K,h}`` becomes a family
``M_h(δ) = W_{Q,h}ᵀ R(δ) W_{K,h}`` indexed by the offset ``δ = n − m``.

Which rotations survive
-----------------------
The twin ``(A W_{Q,h}, A W_{K,h})`` with ``A ∈ O(d)`` has ``M_h'(δ) = W_{Q,h}ᵀ Aᵀ R(δ) A
W_{K,h}``, equal to ``M_h(δ)`` for every weight and every offset iff ``Aᵀ R(δ) A = R(δ)``, i.e.
``R(δ) A = A R(δ)`` for all ``δ``: ``A`` must lie in the commutant of the rotary maps.

* For integer offsets ``δ`` and distinct frequencies ``ω_k ∈ (0, π)`` (RoPE's lie in
  ``(0, 1]``), the characters ``δ ↦ e^{±i δ ω_k}`` and the constant are distinct, so the
  functions ``δ ↦ cos(δ ω_k), sin(δ ω_k)`` and the constant are linearly independent, and the
  span of ``{R(δ)}`` contains every ``P_k``, every ``J P_k`` and ``P_pass`` separately. ``A``
  commutes with all ``P_k`` and ``P_pass`` iff it is block-diagonal on the pairs and the
  pass-through block; on pair ``k`` the block ``B_k`` must also commute with ``J₂``, i.e.
  ``B_k = α I₂ + β J₂``; orthogonal means ``α² + β² = 1``, so ``B_k ∈ SO(2)``.
* Reflections do not survive: a reflection ``F`` of a plane reverses the angle,
  ``F R(θ) F = R(−θ) ≠ R(θ)`` unless ``sin θ = 0``. ``det B_k = +1`` on every pair.
* The pass-through block sees ``R = I``, so any ``C ∈ O(d − r)`` commutes there.

So the residual gauge of one head (or of one key-value group under grouped-query attention) is

    ``G_rot = SO(2)^{r/2} × O(d − r)``  (``SO(2)^{d/2}`` for full rotary),

an abelian torus of dimension ``r/2`` on the rotary part, against ``d(d − 1)/2`` for ``O(d)``
without RoPE. It is laid out in the model's own pairs (:class:`RotaryLayout`). Every ``A`` of it
keeps every ``M_h(δ)`` exactly, so the gauge twin drawn from it is the same function; a general
``A ∈ O(d)`` is not (the negative control). When two pairs share a frequency (or one is 0), the
commutant is larger (``U(k)`` on ``k`` pairs of equal frequency); ``G_rot`` is then still a
subgroup of it, so its twins are still exact, and :meth:`RotaryLayout.commutant_defect` measures
against the larger commutant when the frequencies are known.

Since ``A`` commutes with each ``R(m)`` separately (not only with ``R(m)ᵀ R(n)``), the twin's
logits agree even when the model's ``cos``/``sin`` tables are rounded (``c² + s² ≠ 1``) or scaled
(YaRN's attention factor): ``R(m) = c I + s J`` on a pair commutes with ``α I + β J`` for any
``c, s``.

An optimizer that is equivariant under ``W → A W`` for every ``A ∈ O(d)`` (SGD, shared-scale
Adam) is equivariant under the subgroup, so it keeps the residual gauge; coordinate-wise Adam
breaks it: its denominator ``√v̂`` is taken per coordinate, and a rotation by ``φ`` in a pair
mixes the two coordinates of the pair.
"""

from __future__ import annotations

import inspect
import math
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gaugekit.gauge import haar_orthogonal

__all__ = ["RotaryLayout"]

#: layouts with a name; anything else (read from a model's rotate function) is ``"custom"``
_STYLES = ("half_split", "interleaved", "custom")


@dataclass(frozen=True)
class RotaryLayout:
    r"""Where a rotary embedding's planes lie in one head's ``d_head`` coordinates.

    Pair ``k = (i, j)`` is the plane rotated by ``m ω_k`` at position ``m``, oriented so that
    ``J e_i = e_j`` and ``J e_j = −e_i`` (the model's ``rotate`` function is ``x ↦ J x``); the
    coordinates in no pair are passed through. The residual gauge is ``SO(2)`` on each pair
    times ``O`` of the pass-through block (module doc).

    Attributes:
        d_head: the head width ``d``.
        pairs: the planes ``(i, j)``, one per frequency.
        style: ``"half_split"`` (``(k, k + r/2)``), ``"interleaved"`` (``(2k, 2k + 1)``) or
            ``"custom"``.
        frequencies: ``ω_k`` of each pair when known (``None``: assumed distinct and nonzero).
    """

    d_head: int
    pairs: tuple[tuple[int, int], ...]
    style: str = "custom"
    frequencies: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        d = self.d_head
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"Invalid d_head: {d!r}; expected an integer >= 1")
        flat = [i for p in self.pairs for i in p]
        if (any(len(p) != 2 for p in self.pairs) or len(set(flat)) != len(flat)
                or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < d
                       for i in flat)):
            raise ValueError(
                f"Invalid pairs: {self.pairs!r}; expected disjoint (i, j) pairs of coordinates "
                f"in [0, {d})"
            )
        if self.style not in _STYLES:
            raise ValueError(f"Invalid style: {self.style!r}; expected one of {_STYLES}")
        if self.frequencies is not None and len(self.frequencies) != len(self.pairs):
            raise ValueError(
                f"Invalid frequencies: {len(self.frequencies)} values; expected one per pair "
                f"({len(self.pairs)})"
            )

    @classmethod
    def half_split(cls, d_head: int, rotary_dim: int | None = None,
                   frequencies: Sequence[float] | None = None) -> RotaryLayout:
        """Llama's ``rotate_half`` layout on the leading ``rotary_dim`` (default all)
        coordinates: pair ``k`` is ``(k, k + rotary_dim/2)``."""
        r = _rotary_dim(d_head, rotary_dim)
        return cls(d_head, tuple((k, k + r // 2) for k in range(r // 2)), "half_split",
                   None if frequencies is None else tuple(float(w) for w in frequencies))

    @classmethod
    def interleaved(cls, d_head: int, rotary_dim: int | None = None,
                    frequencies: Sequence[float] | None = None) -> RotaryLayout:
        """GPT-J's ``rotate_every_two`` layout on the leading ``rotary_dim`` (default all)
        coordinates: pair ``k`` is ``(2k, 2k + 1)``."""
        r = _rotary_dim(d_head, rotary_dim)
        return cls(d_head, tuple((2 * k, 2 * k + 1) for k in range(r // 2)), "interleaved",
                   None if frequencies is None else tuple(float(w) for w in frequencies))

    @classmethod
    def from_rotate(cls, rotate: Callable[[Tensor], Tensor], d_head: int,
                    rotary_dim: int | None = None,
                    frequencies: Sequence[float] | None = None) -> RotaryLayout:
        """Read the pairs off a model's rotate function ``x ↦ J x`` (``rotate_half``,
        ``rotate_every_two``, …) applied to the basis of the leading ``rotary_dim`` coordinates.

        ``J`` must be a signed permutation with ``J² = −I`` (a complex structure: each basis
        vector goes to ``±`` another, and back with the other sign); the pairs are its 2-cycles.

        Raises:
            ValueError: when ``rotate`` is not such a map.
        """
        r = _rotary_dim(d_head, rotary_dim)
        eye = torch.eye(r, dtype=torch.float64).reshape(1, 1, r, r)
        J = rotate(eye).reshape(r, r).mT  # column i = rotate(e_i)
        ok = bool(torch.equal(J.abs().sum(0), torch.ones(r, dtype=J.dtype))
                  and torch.equal(J @ J, -torch.eye(r, dtype=J.dtype)))
        if not ok:
            raise ValueError(
                f"Invalid rotate: {getattr(rotate, '__name__', rotate)!r} is not a signed "
                f"permutation J with J² = −I on {r} coordinates; expected a rotary map's "
                f"quarter turn on each pair"
            )
        pairs = tuple((i, int(J[:, i].abs().argmax())) for i in range(r)
                      if J[int(J[:, i].abs().argmax()), i] > 0)
        pairs = tuple(sorted(pairs, key=lambda p: min(p)))
        half = tuple((k, k + r // 2) for k in range(r // 2))
        inter = tuple((2 * k, 2 * k + 1) for k in range(r // 2))
        style = "half_split" if pairs == half else "interleaved" if pairs == inter else "custom"
        return cls(d_head, pairs, style,
                   None if frequencies is None else tuple(float(w) for w in frequencies))

    @property
    def rotary_dim(self) -> int:
        """``r``: the coordinates in a pair."""
        return 2 * len(self.pairs)

    @property
    def pass_dims(self) -> tuple[int, ...]:
        """The coordinates in no pair (passed through unrotated)."""
        used = {i for p in self.pairs for i in p}
        return tuple(i for i in range(self.d_head) if i not in used)

    @property
    def group_dimension(self) -> int:
        """``dim G_rot = r/2 + (d − r)(d − r − 1)/2`` (``d(d − 1)/2`` for ``O(d)``)."""
        p = len(self.pass_dims)
        return len(self.pairs) + p * (p - 1) // 2

    def quarter_turn(self, dtype: torch.dtype = torch.float64) -> Tensor:
        """``J``: ``J e_i = e_j``, ``J e_j = −e_i`` on every pair ``(i, j)``, 0 elsewhere."""
        J = torch.zeros(self.d_head, self.d_head, dtype=dtype)
        for i, j in self.pairs:
            J[j, i], J[i, j] = 1.0, -1.0
        return J

    def rotary_matrix(self, positions: Tensor | Sequence[float],
                      dtype: torch.dtype = torch.float64) -> Tensor:
        """``R(m)`` for every position ``m``, shape ``(len(positions), d, d)`` (needs
        ``frequencies``)."""
        if self.frequencies is None:
            raise ValueError("Invalid layout: frequencies=None; expected the ω_k of each pair")
        m = torch.as_tensor(positions, dtype=dtype).reshape(-1)
        R = torch.eye(self.d_head, dtype=dtype).repeat(m.numel(), 1, 1)
        for (i, j), w in zip(self.pairs, self.frequencies, strict=True):
            c, s = torch.cos(m * w), torch.sin(m * w)
            R[:, i, i], R[:, j, j], R[:, j, i], R[:, i, j] = c, c, s, -s
        return R

    def _classes(self) -> list[list[int]]:
        """Pairs grouped by frequency (each its own class when frequencies are unknown), the
        pairs of frequency 0 left out (they join the pass-through block)."""
        if self.frequencies is None:
            return [[k] for k in range(len(self.pairs))]
        classes: dict[float, list[int]] = {}
        for k, w in enumerate(self.frequencies):
            if abs(w) > 0:
                classes.setdefault(abs(w), []).append(k)
        return list(classes.values())

    def commutant_projection(self, A: Tensor) -> Tensor:
        r"""The orthogonal (Frobenius) projection of ``A`` (``(…, d, d)``) on the matrices that
        commute with every ``R(m)``: ``Σ_c (P_c A P_c − J_c A J_c)/2 + P₀ A P₀`` over the
        frequency classes ``c`` (``J_c = J P_c``) and the fixed block ``P₀`` (pass-through and
        frequency-0 pairs)."""
        J = self.quarter_turn(A.dtype).to(A.device)
        out = torch.zeros_like(A)
        fixed = torch.ones(self.d_head, dtype=torch.bool, device=A.device)
        for cls in self._classes():
            idx = torch.tensor([i for k in cls for i in self.pairs[k]], device=A.device)
            fixed[idx] = False
            P = torch.zeros(self.d_head, self.d_head, dtype=A.dtype, device=A.device)
            P[idx, idx] = 1.0
            Jc = J @ P
            out = out + (P @ A @ P - Jc @ A @ Jc) / 2
        P0 = torch.diag(fixed.to(A.dtype))
        return out + P0 @ A @ P0

    def commutant_defect(self, A: Tensor) -> Tensor:
        """``‖A − Π(A)‖_F`` (:meth:`commutant_projection`), one value per matrix of the stack:
        0 exactly when ``A`` commutes with the rotary map at every position."""
        return torch.linalg.matrix_norm(A - self.commutant_projection(A))

    def draw(self, num: int, *, generator: torch.Generator,
             dtype: torch.dtype = torch.float64) -> Tensor:
        r"""``num`` independent Haar elements of ``G_rot = SO(2)^{r/2} × O(d − r)``, shape
        ``(num, d, d)``: an angle ``φ_k`` uniform on ``[0, 2π)`` per pair (``cos φ_k I +
        sin φ_k J`` on it) and :func:`gaugekit.gauge.haar_orthogonal` on the pass-through
        block, drawn from ``generator``, group by group."""
        if isinstance(num, bool) or not isinstance(num, int) or num < 1:
            raise ValueError(f"Invalid num: {num!r}; expected an integer >= 1")
        out = torch.zeros(num, self.d_head, self.d_head, dtype=torch.float64)
        rest = list(self.pass_dims)
        for g in range(num):
            phi = 2 * math.pi * torch.rand(len(self.pairs), generator=generator,
                                           dtype=torch.float64, device=generator.device).cpu()
            for (i, j), a in zip(self.pairs, phi.tolist(), strict=True):
                c, s = math.cos(a), math.sin(a)
                out[g, i, i], out[g, j, j], out[g, j, i], out[g, i, j] = c, c, s, -s
            if rest:
                C = haar_orthogonal(len(rest), generator=generator, dtype=torch.float64).cpu()
                idx = torch.tensor(rest)
                out[g, idx[:, None], idx[None, :]] = C
        return out.to(dtype)


def _rotary_dim(d_head: int, rotary_dim: int | None) -> int:
    r = d_head if rotary_dim is None else rotary_dim
    if isinstance(r, bool) or not isinstance(r, int) or r < 2 or r % 2 or r > d_head:
        raise ValueError(
            f"Invalid rotary_dim: {rotary_dim!r}; expected an even integer in [2, d_head = "
            f"{d_head}]"
        )
    return r


# --------------------------------------------------------------------------------------------
# reading the layout off a transformers attention module (transformers is never imported)
# --------------------------------------------------------------------------------------------


def _code_names(fn: object, depth: int = 2) -> set[str]:
    """The global and attribute names a callable's code uses: nested functions included, and
    the functions it closes over (a decorator that wraps a function in a module, as the
    ``kernels`` hub does to ``apply_rotary_pos_emb``, keeps the function in a closure)."""
    if not callable(fn):
        return set()
    fn = inspect.unwrap(fn)
    if not hasattr(fn, "__code__"):
        fn = getattr(type(fn), "forward", None) or type(fn).__call__
    names: set[str] = set()
    code = getattr(fn, "__code__", None)
    stack = [code] if code is not None else []
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    if depth > 0:
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                inner = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if inspect.isfunction(inner):
                names |= _code_names(inner, depth - 1)
    return names


def uses_rotary(attention: nn.Module) -> bool:
    """Whether an attention module's ``forward`` refers to a rotary embedding by name
    (``apply_rotary_pos_emb``, ``rotary_emb``, ``rotary_dim``, …)."""
    names = _code_names(type(attention).forward)
    return any("rotary" in n.lower() or n.lower().startswith("rope") for n in names)


def _inv_freqs(model: nn.Module) -> list[Tensor]:
    return [b for n, b in model.named_buffers() if n.rsplit(".", 1)[-1] == "inv_freq"]


def detect_rotary_layout(model: nn.Module, attention: nn.Module, d_head: int,
                         where: str) -> tuple[RotaryLayout, ...]:
    """The rotary layout of a ``transformers`` attention module that :func:`uses_rotary`:
    its pairs from the rotate function its ``apply_rotary_pos_emb`` calls, the rotary width from
    ``rotary_ndims`` / ``rotary_dim`` or the model's ``inv_freq`` buffer (``2·len``), the
    frequencies from that buffer.

    Returns one layout when the rotate function is found by name; otherwise the candidates,
    half-split and interleaved pairs of that width, for the site finder to tell apart by
    probing the model (:func:`gaugekit.audit.sites.find_qk_sites`).

    Raises:
        ValueError: naming ``where``, when the width cannot be found or the rotate function
            found is not a quarter turn on pairs.
    """
    module = sys.modules.get(type(attention).__module__)
    fwd_names = _code_names(type(attention).forward)
    apply_fns = [getattr(module, n) for n in sorted(fwd_names)
                 if "rotary" in n.lower() and callable(getattr(module, n, None))]
    rotate_names = sorted({n for f in apply_fns for n in _code_names(f)
                           if n.startswith("rotate") and callable(getattr(module, n, None))})
    if not rotate_names and module is not None:  # the apply function hidden from inspection
        rotate_names = sorted(n for n, f in vars(module).items() if n.startswith("rotate")
                              and inspect.isfunction(f) and f.__module__ == module.__name__)
    freqs = _inv_freqs(model)
    lengths = {int(f.numel()) for f in freqs}
    r: int | None = None
    for attr in ("rotary_ndims", "rotary_dim", "rotary_emb_dim"):
        value = getattr(attention, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            r = value
            break
    if r is None:
        if len(lengths) > 1:
            raise ValueError(
                f"Invalid model: {where!r} ({type(attention).__name__}) applies a rotary "
                f"embedding and the model holds inv_freq buffers of lengths {sorted(lengths)}; "
                f"expected one rotary width (pass a QKSite with rotary=RotaryLayout...)"
            )
        r = 2 * next(iter(lengths)) if lengths else d_head
    frequencies = None
    if freqs and len(lengths) == 1 and 2 * next(iter(lengths)) == r and all(
            torch.equal(f, freqs[0]) for f in freqs):
        frequencies = tuple(float(w) for w in freqs[0].double().tolist())
    if len(rotate_names) != 1:  # to be told apart numerically
        return (RotaryLayout.half_split(d_head, r, frequencies),
                RotaryLayout.interleaved(d_head, r, frequencies))
    rotate = getattr(module, rotate_names[0])
    try:
        return (RotaryLayout.from_rotate(rotate, d_head, r, frequencies),)
    except ValueError as err:
        raise ValueError(
            f"Invalid model: {where!r} ({type(attention).__name__}): {err}"
        ) from err
