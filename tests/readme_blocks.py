"""The python blocks of the README's "Use the library" section, and what each must achieve.

Shared by tests/test_readme.py (run here, in the checkout) and tests/test_wheel_install.py (run
in a clean virtual environment holding only the built wheel, torch and numpy).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Use the library"

#: (text that identifies a block, assertions run after it in its namespace); first match wins
CHECKS: tuple[tuple[str, str], ...] = (
    ("audit_lora_twins(", "assert lora.steps == 10 and not lora.diverged\n"
                          "assert not lora.keeps('orthogonal') and not lora.keeps('general')\n"
                          "assert lora.drift('orthogonal') > 1e3 * lora.drift('noise')\n"),
    ("audit_twins(", "gauge = result.trace('gauge').final\n"
                     "assert result.steps == 20 and not result.diverged\n"
                     "assert gauge.mean_head_drift > 1e-3, gauge\n"
                     "assert result.trace('identity').final.mean_head_drift == 0.0\n"),
    ("audit_equivariance(", "assert sgd.equivariant and sgd.residual < 1e-8, sgd\n"
                            "assert not adamw.equivariant and adamw.residual > 1e-3, adamw\n"),
    ("losses.append(", "assert len(losses) == 200 and losses[-1] < 0.9 * losses[0], losses\n"),
    ('nonfinite="skip"', "assert not opt.state and len(caught) == 1\n"
                         "assert \"param_groups[0]['params'][0] (shape (8, 4))\" in "
                         "str(caught[0].message)\n"),
)


def section_blocks(readme: Path = README) -> list[str]:
    """The fenced ```python blocks between the section's heading and the next ``## `` heading."""
    text = readme.read_text(encoding="utf-8")
    start = text.index(SECTION + "\n")
    end = text.find("\n## ", start + len(SECTION))
    body = text[start : end if end >= 0 else len(text)]
    return re.findall(r"^```python\n(.*?)^```$", body, flags=re.DOTALL | re.MULTILINE)


def check_for(block: str) -> str:
    """The assertions that follow ``block``; every block of the section has some."""
    for marker, check in CHECKS:
        if marker in block:
            return check
    raise AssertionError(f"no check in tests/readme_blocks.py for the README block:\n{block}")


def skip_reason(block: str) -> str | None:
    """Why ``block`` cannot run here: it imports ``peft`` where peft is not installed (the
    wheel's clean environment), or it passes ``weight_decay`` to a ``gaugekit.optim`` class
    whose signature has none; ``None`` when it can run."""
    if "from peft import" in block:
        import importlib.util

        if importlib.util.find_spec("peft") is None:
            return "needs peft (the peft extra), not installed here"
    if "weight_decay" not in block:
        return None
    import gaugekit.optim

    for name in re.findall(r"gaugekit\.optim\.(\w+)\(", block):
        cls = getattr(gaugekit.optim, name)
        if inspect.isclass(cls) and "weight_decay" not in inspect.signature(cls).parameters:
            return f"needs weight decay from branch optim (gaugekit.optim.{name} has none yet)"
    return None


def script(block: str) -> str:
    """The block followed by its assertions, as one program."""
    return block + "\n# --- the test's assertions ---\n" + check_for(block)
