"""Every public optimizer's docstring opens with a short usage example (after the one-line
summary, as torch's and optax's do), and the example runs: it is executed as a doctest, in a
fresh namespace, and must build the class it documents."""

from __future__ import annotations

import doctest
import inspect
import pydoc
import textwrap

import pytest
import torch

import gaugekit.optim
from gaugekit.optim import ZooOptimizer

OPTIMIZERS = sorted(
    name for name in gaugekit.optim.__all__
    if inspect.isclass(cls := getattr(gaugekit.optim, name))
    and issubclass(cls, torch.optim.Optimizer) and cls is not ZooOptimizer
)


def example_of(doc: str | None) -> str:
    """The ``Example:`` section that follows the docstring's summary paragraph, dedented;
    ``ValueError`` when the second paragraph is not one."""
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    if len(paragraphs) < 2 or not paragraphs[1].startswith("Example:\n"):
        raise ValueError("no 'Example:' section right after the summary")
    return textwrap.dedent(paragraphs[1].removeprefix("Example:\n"))


def run_example(example: str, name: str) -> tuple[doctest.TestResults, str]:
    """Run ``example`` as a doctest in an empty namespace (torch's global generator restored
    after it); the results and the runner's report."""
    test = doctest.DocTestParser().get_doctest(example, {}, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report: list[str] = []
    with torch.random.fork_rng():
        results = runner.run(test, out=report.append, clear_globs=True)
    return results, "".join(report)


def test_the_public_optimizers_are_found():
    assert {"Adam", "SharedScaleAdam", "Muon", "EigenAdam", "FlowAdam", "ScaledGD"} <= set(
        OPTIMIZERS)
    assert "ZooOptimizer" not in OPTIMIZERS


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_every_public_optimizer_opens_with_an_example_that_runs(name):
    cls = getattr(gaugekit.optim, name)
    example = example_of(cls.__doc__)
    results, report = run_example(example, name)
    assert results.failed == 0, report
    assert 3 <= results.attempted <= 8, example  # short
    assert f"optimizer = {name}(" in example and "optimizer.step()" in example
    # help() shows it at the top, before the math and the arguments
    top = pydoc.render_doc(cls, renderer=pydoc.plaintext).splitlines()[:16]
    assert any(">>> optimizer.step()" in line for line in top), "\n".join(top)


# --------------------------------------------------------------------------------------------
# negative controls: the checks see a broken example and a missing one
# --------------------------------------------------------------------------------------------


def test_a_broken_example_is_detected():
    broken = example_of('''Summary.

    Example:
        >>> import torch
        >>> from gaugekit.optim import GD
        >>> optimizer = GD([torch.zeros(2, requires_grad=True)], lr=-1.0)
        >>> optimizer.step()
    ''')
    results, report = run_example(broken, "broken")
    assert results.failed == 2 and "ValueError: Invalid lr: -1.0" in report  # and its step
    wrong_output = example_of('Summary.\n\n    Example:\n        >>> 1 + 1\n        3\n')
    assert run_example(wrong_output, "wrong")[0].failed == 1


@pytest.mark.parametrize("doc", [
    None,
    "Summary only.",
    "Summary.\n\n    .. math:: x\n\n    Example:\n        >>> 1\n        1\n",  # not at the top
    "Summary.\n\n    Examples are below.\n",
])
def test_a_missing_or_late_example_is_detected(doc):
    with pytest.raises(ValueError, match="no 'Example:' section right after the summary"):
        example_of(doc)
