"""Non-finite gradients: one policy for every rule (``nonfinite``).

A rule that reduces a statistic over several entries (a shared scale, a block's or a matrix's
statistic, Newton–Schulz's normalisation, an eigenbasis) lets one NaN or inf reach everything
the statistic touches, without a word. Every rule of :mod:`gaugekit.optim` takes ``nonfinite``:

* ``"skip"``: a step whose gradients (the statistic the rule is made of, where it has one: the
  shared scale's sums of squares, Adam-mini's block means; else the sums of squares of the
  gradients) are not finite changes nothing — no parameter, no state, no step count — and warns
  (``RuntimeWarning``) naming the parameters whose gradient is not finite;
* ``"raise"``: the same check, then ``RuntimeError`` (nothing changed either);
* ``"propagate"``: no check; the NaN spreads as the rule's statistics carry it (torch.optim's
  behaviour), and never into another run of a stack.

``None`` (the default everywhere) is ``"skip"`` for one run (``batch_dims = 0``) except for the
rules whose statistics are per coordinate (GD, Momentum, Adam, RMSprop, Lion, Signum), which
keep torch's behaviour (``"propagate"``: the NaN stays in its entry); and ``"propagate"`` for
stacked runs (a diverged run stays the sweep's to see; skipping would freeze the healthy runs
with it). MuonAdam checks both of its sides before either steps.

The check reads one value per step on the host (a synchronisation off the CPU;
``"propagate"`` avoids it); under FSDP2 the sums are all-reduced first (one ``all_reduce``), so
every rank takes the same decision. Half-precision gradients are summed in float32.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from gaugekit.optim._validation import choice_check

#: the policies of ``nonfinite`` (module doc); ``None`` picks the rule's default.
NONFINITE_POLICIES: tuple[str | None, ...] = (None, "skip", "raise", "propagate")
#: the check of a ``nonfinite`` argument.
NONFINITE = choice_check(*NONFINITE_POLICIES)


def finite_or_skip(opt: Any, sums: Sequence[Tensor], params: Sequence[Tensor]) -> bool:
    """Whether ``opt``'s step may go on under its policy: ``sums[i]`` is the statistic of
    ``params[i]``'s gradient. With ``"skip"`` or ``"raise"`` their total is read once per
    device; when it is not finite the offenders are named in a ``RuntimeWarning`` (and
    ``False`` is returned) or a ``RuntimeError``. Meta tensors have nothing to read."""
    policy = opt._nonfinite_policy()
    if policy == "propagate" or not sums or any(s.is_meta for s in sums):
        return True
    totals: dict[torch.device, list[Tensor]] = {}
    for s in sums:
        totals.setdefault(s.device, []).append(s.float() if s.ndim == 0 else s.float().sum())
    if all(bool(torch.isfinite(torch.stack(t).sum())) for t in totals.values()):
        return True
    bad = [opt._param_label(p) for p, s in zip(params, sums, strict=True)
           if not bool(torch.isfinite(s).all())]
    message = (f"{type(opt).__name__}: non-finite gradient (or a sum of its squares that "
               f"overflows) in {', '.join(bad)}")
    if policy == "raise":
        raise RuntimeError(f"{message}. Nothing was changed (nonfinite='raise')")
    warnings.warn(f"{message}. The step was skipped: no parameter, state or step count "
                  "changed (nonfinite='skip')", RuntimeWarning, stacklevel=5)
    return False
