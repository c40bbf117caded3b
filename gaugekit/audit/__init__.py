"""The audits: does an optimizer keep the gauge?

``factors``  the factor audit: any ``torch.optim`` optimizer on ``(U₀, V₀)`` and ``(U₀Q, V₀Q)``
             (:func:`audit_equivariance`, Proposition 4.2 of the paper); its results and
             their verdict in words ``factor_results`` (the rule shared with ``heads``)
``heads``    the twin audit of a model's attention heads: gauge, ``A = I`` and noise twins of
             every ``W_Q, W_K`` pair (:func:`audit_twins`); its parts ``sites`` (where the
             gauge acts) and ``twin_parts`` (the twins, invariants ``M_h`` and drifts, traces
             and verdicts)
``lora``     the twin audit of a LoRA model (peft's or any with ``lora_A``/``lora_B`` layers):
             gauge twins ``(R⁻¹A, B R)`` of every pair under ``O(r)`` and ``GL(r)`` and a noise
             twin (:func:`audit_lora_twins`), and its parts (pairs, gauges, products, drift)
``function_check``  is a twin the same function as its base? Against a twin rounded in its
             last bits, in the model's dtype and in float64 (:func:`same_function`), the check
             both twin audits run before training

All need torch and numpy only (``pip install gaugekit``).
"""

from gaugekit.audit.factor_results import *  # noqa: F403
from gaugekit.audit.factor_results import __all__ as _result_names
from gaugekit.audit.factors import *  # noqa: F403
from gaugekit.audit.factors import __all__ as _factor_names
from gaugekit.audit.function_check import *  # noqa: F403
from gaugekit.audit.function_check import __all__ as _check_names
from gaugekit.audit.heads import *  # noqa: F403
from gaugekit.audit.heads import __all__ as _head_names
from gaugekit.audit.lora import *  # noqa: F403
from gaugekit.audit.lora import __all__ as _lora_names

__all__ = sorted(set(_factor_names) | set(_result_names) | set(_head_names) | set(_lora_names)
                 | set(_check_names))
