r"""The one training loop of every factor experiment: many runs of ``W = U Vᵀ``, stacked.

Every factor experiment of the book (matrix sensing, spectral tails, hyperspectral completion)
trains its runs here, as one stack (:mod:`gaugebook.engine.factor_stack`); the loop, its stops and
its records share the stack's per-row state, hence one module of a little over 500 lines. A run
is a semantic config (a :class:`~gaugebook.engine.spec.RunSpec`)::

    {"kind": "factored", "problem": {...}, "method": str, "hparams": {..., "lr": float},
     "schedule": str, "budget": {...}, "seed": int, "dtype": "float32" | "float64"}

The caller hands the loop the *problem family* of its runs (``family``,
:mod:`gaugebook.engine.factor_families`; each experiment passes the one of its problem), whose
batch of the stack's rows is all the loop knows of the problem. ``config["problem"]["kind"]``
names it in the records (absent: ``"sensing"``, so the records of the sensing experiment keep
their run ids), and a family that has a ``kind`` must match it.

Protocol of a run. At step ``t = 1, 2, …`` the loss is evaluated first (the *pre-update* loss);
a non-finite loss or one above ``budget["diverge_above"]`` ends the run as *diverged* at step
``t``. With ``budget["record_at"]`` (thresholds, descending), the first time a run's pre-update
loss is below a threshold its full metrics are taken there, before the update, and kept in
``metrics["at_loss"]`` (the matched-loss protocol); with ``budget["stop_at_last_threshold"]`` the
run ends when it reaches the deepest one. Otherwise the gradients are taken, the learning rate is
``lr · lr_factor(schedule, t, num_steps)`` and the optimizer steps. Every ``check_every`` steps a
run whose pre-update loss was below ``tol`` has *interpolated* and stops; that loss is the
record's ``train_loss``. The final metrics are taken at the factors after the last update.
With ``budget["count_grad_norm_above"] = c`` a record's ``grad_norm_above`` counts the steps up
to its stop whose pre-update gradient norm ``√(‖G_U‖²_F + ‖G_V‖²_F)`` exceeded ``c``.

Host synchronisation. Reading a device value on the host (``bool(mask.any())``) waits for the
device; on a GPU that stalls the queue of kernels once per read. The divergence test is
therefore kept on the device: each row's first diverged step and its loss there are stored as
tensors, and the host reads them every ``sync_every`` steps (and at step 1, at every
``check_every`` step, at the last step and before recording a failed optimizer). The record of
a diverged run (its step, its loss) is the same for any ``sync_every``; until the host reads
it, the diverged row stays in the stack and is stepped like the others (the zoo's rules carry
a non-finite value along as NaN, without raising), which can change the other rows' numbers
only in the last bits, through the BLAS blocking of a product with more columns. The default
is ``sync_every = 1`` on the CPU, where the read costs nothing and the committed records were
made, and ``check_every`` on any other device. With ``record_at`` thresholds and
``sync_every > 1`` the first crossings stay on the device too: the factors, loss and step of each
row at its first crossing of each threshold are kept (one copy of the stack per threshold), and
their metrics are taken from those copies when the host reads; a run that stops at the deepest
threshold is recorded from its copy there, whatever it did after. The steps, statuses and
crossing steps are then the same as with a read every step, the values equal to round-off
(tested). On the CPU the copies cost more than the reads they save, one more reason for the
CPU default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from gaugebook.engine.factor_families import FactorProblemFamily
from gaugebook.engine.factor_stack import (
    CURVE_DIGITS,
    CURVE_POINTS,
    PER_MATRIX_RULES,
    Curves,
    FactorStack,
    Member,
    member_key,
)
from gaugebook.engine.spec import RunResult, RunSpec
from gaugekit.optim.registry import make_optimizer

__all__ = [
    "CURVE_DIGITS",
    "CURVE_POINTS",
    "PER_MATRIX_RULES",
    "OptimizerMetrics",
    "torch_dtype",
    "train_factored_batch",
]

#: ``optimizer_metrics(optimizer)`` → per-run values ``(runs of the optimizer,)`` to copy into the
#: records of the runs that stop well (read after their last update).
OptimizerMetrics = Callable[[torch.optim.Optimizer], Mapping[str, Tensor]]


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype called ``name`` (``"float32"`` → ``torch.float32``)."""
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"Invalid dtype: {name!r}; expected a torch dtype name")
    return dtype


# --------------------------------------------------------------------------------------------
# the stacked training
# --------------------------------------------------------------------------------------------


class _StackedTraining:
    """The runs of one batch as one stack; see :func:`train_factored_batch`."""

    def __init__(self, specs: Sequence[RunSpec], device: torch.device,
                 sync_every: int | None,
                 family: FactorProblemFamily,
                 make: Callable[..., torch.optim.Optimizer] | None = None,
                 optimizer_metrics: OptimizerMetrics | None = None) -> None:
        first = specs[0].config
        for spec in specs:
            c = spec.config
            if c["kind"] != "factored" or (c["problem"], c["budget"], c["dtype"]) != (
                first["problem"], first["budget"], first["dtype"]
            ):
                raise ValueError(
                    "Invalid specs: a batch must share kind, problem, budget and dtype")
        dtype = torch_dtype(first["dtype"])
        b = first["budget"]
        self.num_steps, self.tol = b["num_steps"], b["tol"]
        self.check_every, self.diverge_above = b["check_every"], b["diverge_above"]
        self.thresholds = [float(x) for x in b.get("record_at", ())]
        if self.thresholds != sorted(self.thresholds, reverse=True):
            raise ValueError(
                f"Invalid record_at: {b['record_at']!r}; expected thresholds in descending order")
        self.stop_at_last = bool(b.get("stop_at_last_threshold", False))
        self.norm_above = b.get("count_grad_norm_above")
        self.optimizer_metrics = optimizer_metrics
        if self.stop_at_last and not self.thresholds:
            raise ValueError("Invalid stop_at_last_threshold: True; expected record_at thresholds")
        if sync_every is None:
            sync_every = 1 if device.type == "cpu" else self.check_every
        if isinstance(sync_every, bool) or not isinstance(sync_every, int) or sync_every < 1:
            raise ValueError(f"Invalid sync_every: {sync_every!r}; expected an integer >= 1")
        self.sync_every = sync_every
        self.deferred = bool(self.thresholds) and sync_every > 1

        seeds = sorted({s.config["seed"] for s in specs})
        index = {s: i for i, s in enumerate(seeds)}
        kind = str(first["problem"].get("kind", "sensing"))
        if getattr(family, "kind", kind) != kind:
            raise ValueError(f"Invalid family: one of kind {family.kind!r} for problems of kind "
                             f"{kind!r}")
        instances = family.instances(first["problem"], seeds, dtype, device)

        groups: dict[tuple[str, str, str], list[int]] = {}
        for i, spec in enumerate(specs):
            groups.setdefault(member_key(spec.config), []).append(i)
        self.results: list[RunResult | None] = [None] * len(specs)
        self.at_loss: list[list[dict[str, Any]]] = [[] for _ in specs]
        self.rows = [i for idx in groups.values() for i in idx]  # spec index of each row
        inits = [instances.init(i) for i in range(len(seeds))]
        row_seed = [index[specs[i].config["seed"]] for i in self.rows]
        self.stack = FactorStack(torch.stack([inits[s][0] for s in row_seed]),
                                 torch.stack([inits[s][1] for s in row_seed]))
        self.batch = instances.batch(row_seed)
        self.curves = Curves(len(specs), self.batch.curve_names)
        self.reached = torch.zeros(len(self.rows), len(self.thresholds), dtype=torch.bool,
                                   device=device)
        # per row, on the device: the first step whose pre-update loss diverged (0: none yet)
        # and that loss, read by the host every ``sync_every`` steps
        self.bad_step = torch.zeros(len(self.rows), dtype=torch.int64, device=device)
        self.bad_loss = torch.zeros(len(self.rows), dtype=dtype, device=device)
        self.above = torch.zeros(len(self.rows), dtype=torch.int64, device=device)
        if self.deferred:
            # per threshold and row, on the device: the factors, loss and step at the first
            # crossing; ``reported``: crossings already turned into ``at_loss`` entries;
            # ``stopped``: rows past the deepest threshold (with stop_at_last), to be recorded
            T, B = len(self.thresholds), len(self.rows)
            self.snap_U = self.stack.U.unsqueeze(0).repeat(T, *([1] * self.stack.U.ndim))
            self.snap_V = self.stack.V.unsqueeze(0).repeat(T, *([1] * self.stack.V.ndim))
            self.snap_loss = torch.zeros(T, B, dtype=dtype, device=device)
            self.snap_step = torch.zeros(T, B, dtype=torch.int64, device=device)
            self.reported = torch.zeros(B, T, dtype=torch.bool, device=device)
        self.stopped = torch.zeros(len(self.rows), dtype=torch.bool, device=device)
        self._thr = torch.tensor(self.thresholds, dtype=torch.float64, device=device)

        self.members: list[Member] = []
        start = 0
        for (method, schedule, _), idx in groups.items():
            hp = {k: tuple(v) if isinstance(v, list) else v
                  for k, v in specs[idx[0]].config["hparams"].items() if k != "lr"}
            lrs = torch.tensor([specs[i].config["hparams"]["lr"] for i in idx], dtype=dtype,
                               device=device)
            mem = Member(method, schedule, hp, lrs, make or make_optimizer,
                         square=self.stack.square)
            self.members.append(mem)
            try:
                mem.build(self.stack, start)
            except Exception as err:  # noqa: BLE001 - recorded per run
                self._fail(mem, f"{type(err).__name__}: {err}")
                mem.place(self.stack, start)
                mem.optimizer = None
            start += mem.size

    def _fail(self, mem: Member, message: str) -> None:
        for run in self.rows[mem.start:mem.stop]:
            if self.results[run] is None:
                self.results[run] = RunResult("error", message=message)

    def _curve_values(self) -> dict[str, Tensor]:
        return self.batch.metrics(self.stack.U, self.stack.V, spectral=False)

    def _record_thresholds(self, loss: Tensor, step: int) -> Tensor | None:
        """Take the metrics of runs whose pre-update loss first fell below a threshold; returns
        the mask of rows that reached the deepest threshold (or ``None``)."""
        below = loss.double()[:, None] < self._thr[None, :]
        new = below & ~self.reached
        if not bool(new.any()):
            return None
        rows = torch.nonzero(new.any(dim=1)).flatten()
        U, V = self.stack.rows(rows)
        m = self.batch.select(rows.tolist()).metrics(U, V)
        cols = {k: v.tolist() for k, v in m.items()}
        losses = loss.index_select(0, rows).double().tolist()
        new_rows = new.index_select(0, rows).tolist()
        for j, row in enumerate(rows.tolist()):
            run = self.rows[row]
            for t_index, is_new in enumerate(new_rows[j]):
                if is_new:
                    entry = {"threshold": self.thresholds[t_index], "step": step,
                             "train_loss": losses[j]}
                    entry.update({k: cols[k][j] for k in cols if k != "train_loss"})
                    self.at_loss[run].append(entry)
        self.reached |= below
        return self.reached[:, -1] if self.stop_at_last else None

    def finish(self, mask: Tensor, step: int | Tensor, loss: Tensor, status: str,
               factors: tuple[Tensor, Tensor] | None = None) -> None:
        """Record the runs of ``mask`` (over the current rows) and drop them from the stack;
        ``step`` is one step for all, or a per-row tensor; ``factors``: the ``(U, V)`` of every
        current row to take the metrics from (default: the stack's)."""
        sel = torch.nonzero(mask).flatten()
        if sel.numel() == 0:
            return
        sel_list = sel.tolist()
        runs = [self.rows[i] for i in sel_list]
        losses = loss.index_select(0, sel).double().tolist()
        steps = (step.index_select(0, sel).tolist() if isinstance(step, Tensor)
                 else [step] * len(sel_list))
        names = self.batch.metric_names
        cols: dict[str, list[float]] = {}
        extra = self._optimizer_values(sel) if status == "ok" else []
        above = self.above.index_select(0, sel).tolist() if self.norm_above is not None else []
        if status == "ok":
            if factors is None:
                U, V = self.stack.rows(sel)
            else:
                U, V = factors[0].index_select(0, sel), factors[1].index_select(0, sel)
            m = self.batch.select(sel_list).metrics(U, V)
            self.curves.add(runs, steps, m)
            cols = {k: v.tolist() for k, v in m.items()}
        for j, run in enumerate(runs):
            if self.results[run] is not None:  # already an error
                continue
            metrics: dict[str, Any] = {
                "steps": steps[j],
                "interpolated": bool(status == "ok" and losses[j] < self.tol),
                "train_loss": losses[j],
            }
            if status == "ok":
                metrics["final_loss"] = cols["train_loss"][j]
                metrics.update({k: cols[k][j] for k in names})
                metrics.update(extra[j] if extra else {})
            else:
                metrics["final_loss"] = None
                metrics.update(dict.fromkeys(names))
            if self.norm_above is not None:
                metrics["grad_norm_above"] = above[j]
            if self.thresholds:
                metrics["at_loss"] = self.at_loss[run]
            self.results[run] = RunResult(status, metrics, self.curves.finish(run))
        self._compact(torch.nonzero(~mask).flatten())

    def _optimizer_values(self, sel: Tensor) -> list[dict[str, Any]]:
        """``optimizer_metrics`` of each row of ``sel`` (ascending), read from its member's
        optimizer (``{}`` where none was built); ``[]`` without ``optimizer_metrics``."""
        out: list[dict[str, Any]] = []
        for mem in self.members if self.optimizer_metrics is not None else ():
            local = sel[(sel >= mem.start) & (sel < mem.stop)] - mem.start
            if mem.optimizer is None or not local.numel():
                out += [{}] * local.numel()
                continue
            values = {k: v.index_select(0, local.to(v.device)).tolist()
                      for k, v in self.optimizer_metrics(mem.optimizer).items()}
            out += [{k: col[i] for k, col in values.items()} for i in range(local.numel())]
        return out

    def _compact(self, keep: Tensor) -> None:
        keep_list = keep.tolist()
        self.stack.take(keep)
        self.rows = [self.rows[i] for i in keep_list]
        # the per-row tensors: rows first, or (the snapshots) thresholds first
        deferred = ("reported",) if self.deferred else ()
        for name in ("reached", "bad_step", "bad_loss", "above", "stopped", *deferred):
            setattr(self, name, getattr(self, name).index_select(0, keep))
        for name in ("snap_U", "snap_V", "snap_loss", "snap_step") if self.deferred else ():
            setattr(self, name, getattr(self, name).index_select(1, keep))
        if keep_list:
            self.batch = self.batch.select(keep_list)
        members, start = [], 0
        for mem in self.members:
            local = keep[(keep >= mem.start) & (keep < mem.stop)] - mem.start
            if local.numel():
                mem.keep(self.stack, start, local)
                members.append(mem)
                start += mem.size
        self.members = members

    def _note_divergence(self, loss: Tensor, t: int) -> None:
        """Mark, on the device, the rows whose pre-update loss at step ``t`` diverged first."""
        new = ~(loss <= self.diverge_above) & (self.bad_step == 0) & ~self.stopped
        self.bad_step = torch.where(new, t, self.bad_step)
        self.bad_loss = torch.where(new, loss, self.bad_loss)

    def _finish_diverged(self) -> Tensor | None:
        """Record and drop the rows marked diverged (a host read); returns the kept rows'
        indices (over the rows before), or ``None`` when none diverged."""
        bad = self.bad_step > 0
        if not bool(bad.any()):
            return None
        self.finish(bad, self.bad_step, self.bad_loss, "diverged")
        return torch.nonzero(~bad).flatten()

    def _snapshot_thresholds(self, loss: Tensor, step: int) -> None:
        """Deferred matched-loss protocol, on the device: keep the factors, loss and ``step`` of
        rows whose pre-update loss first fell below a threshold (rows not diverged or stopped)."""
        alive = (self.bad_step == 0) & ~self.stopped
        below = (loss.double()[:, None] < self._thr[None, :]) & alive[:, None]
        new = below & ~self.reached
        U, V = self.stack.U, self.stack.V
        for j in range(len(self.thresholds)):
            hit = new[:, j]
            self.snap_U[j] = torch.where(hit.view(-1, *([1] * (U.ndim - 1))), U, self.snap_U[j])
            self.snap_V[j] = torch.where(hit.view(-1, *([1] * (V.ndim - 1))), V, self.snap_V[j])
            self.snap_loss[j] = torch.where(hit, loss, self.snap_loss[j])
            self.snap_step[j] = torch.where(hit, step, self.snap_step[j])
        self.reached |= below
        if self.stop_at_last:
            self.stopped |= self.reached[:, -1]

    def _flush_thresholds(self) -> Tensor | None:
        """Turn the kept first crossings into ``at_loss`` entries and record the rows stopped
        at the deepest threshold (a host read); returns the kept rows' indices, or ``None``."""
        pending = self.reached & ~self.reported
        if not bool(pending.any()):
            return None
        rows = torch.nonzero(pending.any(dim=1)).flatten()
        row_list, flags = rows.tolist(), pending.index_select(0, rows).tolist()
        batch = self.batch.select(row_list)
        entries: dict[int, list[dict[str, Any]]] = {row: [] for row in row_list}
        for j, threshold in enumerate(self.thresholds):
            if not any(f[j] for f in flags):
                continue
            m = batch.metrics(self.snap_U[j].index_select(0, rows),
                              self.snap_V[j].index_select(0, rows))
            cols = {k: v.tolist() for k, v in m.items()}
            steps = self.snap_step[j].index_select(0, rows).tolist()
            losses = self.snap_loss[j].index_select(0, rows).double().tolist()
            for i, row in enumerate(row_list):
                if flags[i][j]:
                    entry = {"threshold": threshold, "step": steps[i], "train_loss": losses[i]}
                    entry.update({k: cols[k][i] for k in cols if k != "train_loss"})
                    entries[row].append(entry)
        for row in row_list:
            self.at_loss[self.rows[row]].extend(entries[row])
        self.reported |= pending
        if not (self.stop_at_last and bool(self.stopped.any())):
            return None
        done = self.stopped.clone()
        self.finish(done, self.snap_step[-1], self.snap_loss[-1], "ok",
                    factors=(self.snap_U[-1], self.snap_V[-1]))
        return torch.nonzero(~done).flatten()

    def _before_update(self, t: int, sync: bool, loss: Tensor, G_U: Tensor,
                       G_V: Tensor) -> tuple[Tensor, Tensor, Tensor] | None:
        """Record what ends before step ``t``'s update: the diverged rows (when ``sync``), the
        curves' step-0 point (``t = 1``), the matched-loss thresholds. Returns ``(loss, G_U,
        G_V)`` of the rows that go on to the update, or ``None`` when no row is left."""
        current = (loss, G_U, G_V)

        def keep_rows(keep: Tensor | None) -> bool:
            nonlocal current
            if keep is not None and self.rows:
                current = tuple(x[keep] for x in current)
            return bool(self.rows)

        if sync and not keep_rows(self._finish_diverged()):
            return None
        if t == 1:
            self.curves.add(self.rows, 0, self._curve_values())
        if self.deferred:
            self._snapshot_thresholds(current[0], t - 1)
            if sync and not keep_rows(self._flush_thresholds()):
                return None
        elif self.thresholds:
            done = self._record_thresholds(current[0], t - 1)
            if done is not None and bool(done.any()):
                self.finish(done, t - 1, current[0], "ok")
                if not keep_rows(torch.nonzero(~done).flatten()):
                    return None
        return current

    def run(self, progress: bool) -> list[RunResult]:
        from tqdm import tqdm

        bar = tqdm(total=self.num_steps, desc="steps", leave=False, disable=not progress)
        for t in range(1, self.num_steps + 1):
            if not self.rows:
                break
            loss, G_U, G_V = self.batch.loss_and_grads(self.stack.U, self.stack.V)
            self._note_divergence(loss, t)
            if self.norm_above is not None:
                norm = (G_U.square().sum((1, 2)) + G_V.square().sum((1, 2))).sqrt()
                self.above += norm > self.norm_above
            sync = t == 1 or t % self.sync_every == 0 or t % self.check_every == 0 or (
                t == self.num_steps)
            going_on = self._before_update(t, sync, loss, G_U, G_V)
            if going_on is None:
                break
            loss, G_U, G_V = going_on
            G = self.stack.grads(G_U, G_V)
            failed = []
            for mem in self.members:
                if mem.optimizer is None:
                    failed.append((mem, "optimizer could not be built"))
                    continue
                mem.set_grads(G_U, G_V, G)
                try:
                    mem.step(t, self.num_steps)
                except Exception as err:  # noqa: BLE001 - recorded per run
                    failed.append((mem, f"{type(err).__name__}: {err}"))
            if failed:
                # a diverged or stopped row is recorded as such, not as an error
                for flush in ((self._flush_thresholds,) if self.deferred else ()) + (
                        self._finish_diverged,):
                    keep = flush()
                    if keep is not None:
                        loss = loss[keep]
                if not self.rows:
                    break
                alive = set(id(mem) for mem in self.members)
                failed = [(mem, msg) for mem, msg in failed if id(mem) in alive]
                mask = torch.zeros(len(self.rows), dtype=torch.bool, device=loss.device)
                for mem, message in failed:
                    mask[mem.start:mem.stop] = True
                    self._fail(mem, message)
                self.finish(mask, t, loss, "error")
                loss = loss[torch.nonzero(~mask).flatten()]
            if t % self.check_every == 0 and self.rows:
                self.curves.add(self.rows, t, self._curve_values())
            if t % self.check_every == 0 or t == self.num_steps:
                last = t == self.num_steps
                done = torch.ones_like(loss, dtype=torch.bool) if last else loss < self.tol
                if bool(done.any()):
                    self.finish(done, t, loss, "ok")
            if t % self.check_every == 0:
                bar.update(self.check_every)
        bar.close()
        return [r if r is not None else RunResult("error", message="run was not finished")
                for r in self.results]


def train_factored_batch(
    specs: Sequence[RunSpec], family: FactorProblemFamily, *, device: torch.device | str = "cpu",
    progress: bool = False, sync_every: int | None = None,
    make_optimizer: Callable[..., torch.optim.Optimizer] | None = None,
    optimizer_metrics: OptimizerMetrics | None = None,
) -> list[RunResult]:
    """Train the factored runs ``specs`` (same problem, budget and dtype) as one stack.

    Returns one :class:`~gaugebook.engine.spec.RunResult` per spec, in order. An optimizer
    that fails to build or to step marks its own runs ``error`` (the others go on).
    ``sync_every``: how often the host reads the device-side divergence test (see the module
    docstring); default 1 on the CPU, ``budget["check_every"]`` elsewhere. ``family``: the
    problem family of the runs (its ``kind``, if it has one, must be the problem config's).
    ``make_optimizer(method, params, batch_dims=…, lr=…, **hparams)`` builds each optimizer
    (default: the zoo's registry); ``optimizer_metrics`` adds values read from the optimizers
    to the records (:data:`OptimizerMetrics`).
    """
    if not specs:
        return []
    return _StackedTraining(specs, torch.device(device), sync_every, family, make_optimizer,
                            optimizer_metrics).run(progress)
