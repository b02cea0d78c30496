"""Progressive diagnosis of a traced run: iteration -> phase -> kernel, plus culprit vs victim.

Levels (all automatic here; run on one window of steps):

* **L1 iteration** on the job series (max over ranks per step, since synchronous steps end at a
  barrier): jitter = a sliding window of ``window`` steps with max/min >= ``jitter_ratio``;
  regression = a mean-shift change point with ratio >= ``regression_ratio``. Each jitter spike
  is attributed to the (rank, phase) with the largest excess over its own median in the spike
  step, and that rank's CPU stacks during the step are searched for compile frames (L5).
* **L2 phase**: for each (phase, parallel group) the ranks' median per-step phase times are
  compared leave-one-out (:func:`levels.robust_excess`); a rank is flagged when
  rel >= ``phase_rel``, z >= ``phase_z`` and its excess m_i - b_i is at least ``phase_impact``
  of the median job iteration time (a phase that is relatively slow but too short to delay the
  step is not a straggler). Where the trace carries the training thread's CPU time per phase
  (CPU runs), a compute phase is flagged only if its CPU time is also ``phase_rel`` above its
  peers'; one that is slower on the wall clock alone is reported as ``off_cpu`` (its thread was
  waiting: not scheduled on an oversubscribed host, on I/O or on a lock), a symptom of the
  host, not a straggler. After an L1 regression, only the steps after the change point are
  used.
* **Culprit vs victim** (the masked-straggler rule): in a synchronous collective the slowest
  rank arrives last, so its collective is *shorter* and its peers' are longer. A rank flagged on
  a compute phase is a compute straggler; a rank flagged on a collective that is not the last to
  arrive is a victim of the late arriver, whose cause (compute, or an earlier slow collective)
  is reported instead; so is a rank whose long collective is not explained by its measured
  wait when a compute straggler of its group arrives last most often (the straggler's late
  completion also delays the transfer itself when the host is oversubscribed). A long
  collective with no late peer and no compute anomaly is a communication fault.
* **L3 kernel**: per kernel holding at least ``kernel_min_share`` of some rank's kernel time,
  each rank's summaries are pooled into a mixture CDF on a shared
  400-point log grid, scored by mean Wasserstein-1 distance to the other ranks (normalised by
  the kernel's median p50) and flagged by an IQR fence or, for a degraded half, the block rule
  (:func:`levels.block_outliers`, on each rank's pooled median). A link degradation is read at
  group level: a communication group smaller than the job, with no compute straggler among its
  members (a straggler elsewhere delays other groups' collectives, not this one's), in which at
  least half the members have flagged (not waiting) kernels of that group's collective, and
  whose members' median collective time is at least ``phase_rel`` above all ranks' median
  (phase channel), is named as a whole. A link cannot be told from one rank's data alone, so a
  two-rank job has no cross-rank link diagnosis.
* **L4 (pipeline)**: with ``pp_recv_grad`` phases, the stage whose compute exceeds the other
  stages' median by ``phase_rel`` while upstream stages wait longer for its gradients (bubbles)
  is reported as the bottleneck stage (assumes balanced stages; a manual step in the paper).

Reference: Zhou et al. (2026), arXiv 2606.20374, section 6 and case studies 1-5.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from causalkit.systems.tracing import levels
from causalkit.systems.tracing.events import COLLECTIVE_PHASES, TraceFileError
from causalkit.systems.tracing.store import MemoryStore, TraceStore

__all__ = ["Finding", "Report", "diagnose", "ROOT_CAUSES"]

#: Finding kinds that name a root cause (others are symptoms: victims, windows).
ROOT_CAUSES = ("compute_straggler", "link_degradation", "communication", "jit_compile",
               "pipeline_bubble")
_LEVEL_ORDER = {"iteration": 0, "phase": 1, "kernel": 2, "pipeline": 3, "stacks": 4}
#: Frames of compiler code (``dir/file.py:function`` labels of the stack channel). Dynamo's
#: eval-frame wrapper is left out: every function decorated with ``torch._disable_dynamo``
#: (optimizers, parts of ``nn.functional``) runs under ``torch/_dynamo/eval_frame.py:_fn`` in
#: plain eager mode, while a compilation adds frames of the modules below.
_COMPILE_FRAME = re.compile(r"torch/_dynamo/(?!eval_frame\.py:)|torch/_inductor/|"
                            r"torch/_functorch/|torch/fx/|torch/_subclasses/")
_NS_PER_MS = 1e6


@dataclass
class Finding:
    """One diagnosis result.

    Attributes
    ----------
    level : str
        ``"iteration"``, ``"phase"``, ``"kernel"``, ``"pipeline"`` or ``"stacks"``.
    kind : str
        ``compute_straggler``, ``link_degradation``, ``communication``, ``jit_compile``,
        ``pipeline_bubble`` (root causes), or ``victim``, ``off_cpu``, ``jitter``,
        ``regression``, ``spike``, ``kernel_outlier`` (symptoms).
    window : (int, int)
        Step range [lo, hi) of the evidence.
    rank : int or None
    phase, kernel : str or None
    category : str
        Fault class: ``compute``, ``communication``, ``host``, ``framework`` or ``symptom``.
    evidence : str
        Human-readable numbers behind the finding.
    confidence : float
        Share of the per-step (or per-kernel) evidence that agrees, in [0, 1].
    details : dict
    """

    level: str
    kind: str
    window: tuple[int, int]
    rank: int | None = None
    phase: str | None = None
    kernel: str | None = None
    category: str = "symptom"
    evidence: str = ""
    confidence: float = 1.0
    details: dict = field(default_factory=dict)

    @property
    def is_root_cause(self) -> bool:
        return self.kind in ROOT_CAUSES


class Report:
    """Ordered findings of :func:`diagnose` with the tables behind them.

    Attributes
    ----------
    findings : list of Finding
        Root causes first (by confidence), then symptoms by level.
    iterations : DataFrame
        step x rank iteration times (ms) of the window.
    phase_table : DataFrame
        One row per (phase, group, rank): median ms, rel, z, vote, flagged.
    kernel_table : DataFrame
        One row per (kernel, stream, rank): normalised mean-W1 score, pooled p50, flagged.
    labels : dict
        L1 label of the job series and of each rank: stable / jitter / regression / both.
    notes : list of str
    """

    def __init__(self, findings, iterations, phase_table, kernel_table, labels, notes, window,
                 phases=None):
        self.findings = sorted(findings, key=lambda f: (not f.is_root_cause,
                                                        _LEVEL_ORDER.get(f.level, 9),
                                                        -f.confidence))
        self.iterations = iterations
        self.phase_table = phase_table
        self.kernel_table = kernel_table
        self.labels = labels
        self.notes = list(notes)
        self.window = window
        self._phases = phases

    def __repr__(self) -> str:
        return (f"Report(window={self.window}, {len(self.findings)} findings, "
                f"root causes={[(f.kind, f.rank) for f in self.culprits]})")

    @property
    def culprits(self) -> list[Finding]:
        """Root-cause findings, most confident first."""
        return [f for f in self.findings if f.is_root_cause]

    def to_frame(self) -> pd.DataFrame:
        """One row per finding."""
        rows = [{**asdict(f), "window_lo": f.window[0], "window_hi": f.window[1]}
                for f in self.findings]
        cols = ["level", "kind", "category", "rank", "phase", "kernel", "window_lo", "window_hi",
                "confidence", "evidence"]
        return pd.DataFrame(rows, columns=cols + ["details", "window"]).loc[:, cols]

    def summary(self) -> str:
        """Plain-text listing of the findings and notes."""
        lines = [f"diagnosis of steps [{self.window[0]}, {self.window[1]}): job series "
                 f"{self.labels.get('job', 'n/a')}"]
        for f in self.findings:
            where = ", ".join(x for x in (f"rank {f.rank}" if f.rank is not None else "",
                                          f.phase or "", f.kernel or "") if x)
            lines.append(f"  [{f.level}] {f.kind} ({f.category}) {where} "
                         f"steps [{f.window[0]}, {f.window[1]}) conf={f.confidence:.2f}: "
                         f"{f.evidence}")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def plot(self, axes=None):
        """Iteration time per rank with flagged windows; per-rank phase heatmap.

        Returns the matplotlib Figure.
        """
        import matplotlib.pyplot as plt

        if axes is None:
            fig, axes = plt.subplots(1, 2, figsize=(11, 3.8),
                                     gridspec_kw={"width_ratios": [1.6, 1]})
        else:
            fig = axes[0].figure
        ax = axes[0]
        for rank in self.iterations.columns:
            ax.plot(self.iterations.index, self.iterations[rank], lw=1, label=f"rank {rank}")
        for f in self.findings:
            if f.level == "iteration":
                ax.axvspan(f.window[0], f.window[1] - 1, color="tab:red", alpha=0.15)
        ax.set_xlabel("step")
        ax.set_ylabel("iteration time (ms)")
        ax.set_title("L1: iteration time, flagged windows shaded")
        ax.legend(fontsize=7, ncol=2)
        ax = axes[1]
        if not self.phase_table.empty:
            heat = self.phase_table.pivot_table(index="phase", columns="rank", values="rel",
                                                aggfunc="max")
            im = ax.imshow(heat.to_numpy(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1)
            ax.set_yticks(range(len(heat.index)), heat.index, fontsize=8)
            ax.set_xticks(range(len(heat.columns)), heat.columns, fontsize=8)
            ax.set_xlabel("rank")
            fig.colorbar(im, ax=ax, label="excess over group (rel)")
        ax.set_title("L2: per-rank phase excess")
        fig.tight_layout()
        return fig


def _open(store):
    if isinstance(store, (TraceStore, MemoryStore)):
        return store
    if isinstance(store, (str, bytes)) or hasattr(store, "__fspath__"):
        return TraceStore(store)
    raise TypeError(f"store must be a TraceStore, MemoryStore or path; got "
                    f"{type(store).__name__}")


def _per_step_phase(phases: pd.DataFrame) -> pd.DataFrame:
    """(phase, grp, rank, step) -> summed duration (ms), first start of the step, and summed
    CPU time of the training thread (``cpu_ms``, NaN where the trace has none)."""
    if "cpu_ns" not in phases:
        phases = phases.assign(cpu_ns=np.nan)
    g = phases.groupby(["phase", "grp", "rank", "step"], sort=True)
    return pd.DataFrame({"ms": g["duration_ns"].sum() / _NS_PER_MS,
                         "start_ns": g["start_ns"].min(),
                         "cpu_ms": g["cpu_ns"].sum(min_count=1) / _NS_PER_MS}).reset_index()


def _l1(it: pd.DataFrame, window: int, jitter_ratio: float, regression_ratio: float):
    job = it.max(axis=1).to_numpy()
    steps = it.index.to_numpy()
    findings, labels = [], {}

    def label(series):
        j = bool(levels.jitter_windows(series, window, jitter_ratio))
        r = levels.change_point(series, ratio=regression_ratio) is not None
        return {(False, False): "stable", (True, False): "jitter", (False, True): "regression",
                (True, True): "both"}[(j, r)]

    labels["job"] = label(job)
    for rank in it.columns:
        labels[int(rank)] = label(it[rank].to_numpy())
    for lo, hi, ratio in levels.jitter_windows(job, window, jitter_ratio):
        spike = lo + int(np.argmax(job[lo:hi]))
        findings.append(Finding("iteration", "jitter", (int(steps[lo]), int(steps[hi - 1]) + 1),
                                evidence=f"max/min iteration time {ratio:.1f}x within "
                                         f"{window} steps; spike at step {int(steps[spike])} "
                                         f"({job[spike]:.1f} ms vs median "
                                         f"{np.median(job):.1f} ms)",
                                confidence=float(min(1.0, ratio / (2 * jitter_ratio))),
                                details={"spike_step": int(steps[spike]), "ratio": ratio}))
    cp = levels.change_point(job, ratio=regression_ratio)
    regression_at = None
    if cp is not None:
        t, ratio = cp
        regression_at = int(steps[t])
        before, after = job[:t], job[t:]
        findings.append(Finding("iteration", "regression", (regression_at, int(steps[-1]) + 1),
                                evidence=f"mean iteration time {before.mean():.1f} -> "
                                         f"{after.mean():.1f} ms ({ratio:.2f}x) from step "
                                         f"{regression_at}",
                                confidence=float(np.mean(after > np.percentile(before, 95))),
                                details={"change_step": regression_at, "ratio": ratio}))
    return findings, labels, regression_at


def _matrix(sub: pd.DataFrame, value: str = "ms"):
    """(ranks, rank x step matrix of ``value``, NaN where missing) of one (phase, group)."""
    ranks, r_idx = np.unique(sub["rank"].to_numpy(), return_inverse=True)
    steps, s_idx = np.unique(sub["step"].to_numpy(), return_inverse=True)
    out = np.full((ranks.size, steps.size), np.nan)
    out[r_idx, s_idx] = sub[value].to_numpy(dtype=float)
    return ranks, out


def _l2(per_step: pd.DataFrame, phase_rel: float, phase_z: float,
        min_excess_ms: float = 0.0) -> pd.DataFrame:
    rows = []
    for (phase, grp), sub in per_step.groupby(["phase", "grp"], sort=True):
        ranks, matrix = _matrix(sub)
        if ranks.size < 2:
            continue
        stats = levels.robust_excess(matrix)
        collective = phase in COLLECTIVE_PHASES
        _, cpu = _matrix(sub, "cpu_ms")
        cpu_rel = np.full(ranks.size, np.nan) if collective or np.isnan(cpu).any() else \
            levels.robust_excess(cpu)["rel"]
        for i, rank in enumerate(ranks):
            slow = bool(stats["rel"][i] >= phase_rel and stats["z"][i] >= phase_z
                        and stats["median"][i] - stats["baseline"][i] >= min_excess_ms)
            # slower on the wall clock but not in CPU time: the excess was spent off the CPU
            off_cpu = slow and bool(cpu_rel[i] < phase_rel)
            rows.append({"phase": phase, "grp": grp, "rank": int(rank),
                         "median_ms": stats["median"][i], "baseline_ms": stats["baseline"][i],
                         "rel": stats["rel"][i], "z": stats["z"][i], "vote": stats["vote"][i],
                         "cv": stats["cv"], "cpu_rel": cpu_rel[i], "collective": collective,
                         "flagged": slow and not off_cpu, "off_cpu": off_cpu})
    cols = ["phase", "grp", "rank", "median_ms", "baseline_ms", "rel", "z", "vote", "cv",
            "cpu_rel", "collective", "flagged", "off_cpu"]
    return pd.DataFrame(rows, columns=cols)


def _waits(per_step: pd.DataFrame) -> pd.DataFrame:
    """Per (collective phase, group, rank): share of steps arriving last, median wait for the
    last peer (ms), that wait as a share of the rank's collective time, and the rank's excess
    collective time over the group's fastest rank (ms)."""
    coll = per_step[per_step["phase"].isin(COLLECTIVE_PHASES)]
    cols = ["phase", "grp", "rank", "last_share", "wait_ms", "wait_share"]
    if coll.empty:
        return pd.DataFrame(columns=cols)
    keys = [coll["phase"], coll["grp"], coll["step"]]
    latest = coll.groupby(keys)["start_ns"].transform("max")
    size = coll.groupby(keys)["start_ns"].transform("size")
    coll = coll.assign(wait=(latest - coll["start_ns"]) / _NS_PER_MS,
                       last=(coll["start_ns"] == latest).astype(float)).loc[size >= 2]
    g = coll.groupby(["phase", "grp", "rank"])
    out = pd.DataFrame({"last_share": g["last"].mean(), "wait_ms": g["wait"].median(),
                        "ms": g["ms"].median()}).reset_index()
    out["wait_share"] = out["wait_ms"] / out["ms"].clip(lower=1e-9)
    out["excess_ms"] = out["ms"] - out.groupby(["phase", "grp"])["ms"].transform("min")
    return out[cols + ["excess_ms"]]


def _l3(summaries, kernel_rel: float, block_factor: float, min_share: float,
        grid_size: int = 400):
    by_kernel: dict[tuple, dict[int, list]] = {}
    busy: dict[int, float] = {}
    for s in summaries:
        for g in s.groups:
            by_kernel.setdefault((g.kernel, g.stream), {}).setdefault(g.rank, []).append(g)
            busy[g.rank] = busy.get(g.rank, 0.0) + sum(c.count * c.p50 for c in g.clusters)
    rows = []
    for (kernel, stream), per_rank in sorted(by_kernel.items()):
        share = max(sum(c.count * c.p50 for g in parts for c in g.clusters) / busy[r]
                    for r, parts in per_rank.items())
        if len(per_rank) < 2 or share < min_share:
            continue
        ranks = sorted(per_rank)
        pooled = [per_rank[r] for r in ranks]
        lo = min(c.log_lo for parts in pooled for g in parts for c in g.clusters)
        hi = max(c.log_hi for parts in pooled for g in parts for c in g.clusters)
        grid = np.exp(np.linspace(lo - 0.05, hi + 0.05, grid_size))
        F = levels.cdf_matrix(pooled, grid)
        p50 = grid[np.argmax(F >= 0.5, axis=1)]     # median of each rank's pooled mixture
        scores = levels.mean_w1_scores(F, grid) / np.median(p50)
        flagged = (levels.fence_outliers(scores) | levels.block_outliers(p50, block_factor)) \
            & (scores >= kernel_rel)
        for i, r in enumerate(ranks):
            rows.append({"kernel": kernel, "stream": stream, "rank": r, "score": scores[i],
                         "p50_ns": p50[i], "flagged": bool(flagged[i])})
    return pd.DataFrame(rows, columns=["kernel", "stream", "rank", "score", "p50_ns", "flagged"])


def _is_comm_kernel(kernel: str, stream: str) -> bool:
    return stream == "comm" or kernel.startswith(("collective:", "gloo:", "c10d::"))


def _stack_evidence(stacks: pd.DataFrame, rank: int, t0: int, t1: int):
    sub = stacks[(stacks["rank"] == rank) & (stacks["timestamp_ns"] >= t0)
                 & (stacks["timestamp_ns"] <= t1)]
    if sub.empty:
        return 0, 0, None
    hits = sub["frames"].str.contains(_COMPILE_FRAME)
    frame = None
    if hits.any():
        frames = sub.loc[hits, "frames"].iloc[0].split(";")
        frame = next(f for f in frames if _COMPILE_FRAME.search(f))
    return int(hits.sum()), len(sub), frame


def _profiled_steps(st: TraceStore, steps, ranks) -> set[int]:
    """Steps during which any rank had a profiler window open (their timing is perturbed)."""
    windows = st.windows(None, ranks)
    if windows.empty:
        return set()
    span = {r: int(m.get("profile_steps", 1)) for r, m in st.meta().items()}
    return {int(s) + k for r, s in zip(windows["rank"], windows["step"], strict=True)
            for k in range(span.get(int(r), 1))}


def diagnose(store, *, steps=None, ranks=None, warmup_steps: int = 2, window: int = 8,
             jitter_ratio: float = 2.0, regression_ratio: float = 1.5, phase_rel: float = 0.15,
             phase_z: float = 2.0, phase_impact: float = 0.02, kernel_rel: float = 0.1,
             block_factor: float = 3.0, kernel_min_share: float = 0.01) -> Report:
    """Diagnose a traced run (levels L1-L3, culprit vs victim, pipeline bubbles, stacks).

    Parameters
    ----------
    store : TraceStore, MemoryStore or path
        The run's trace store.
    steps : (int, int), optional
        Step window [lo, hi) to diagnose (default: all steps after ``warmup_steps``).
    ranks : sequence of int, optional
        Restrict to these ranks (they must exist in the store).
    warmup_steps : int
        Leading steps ignored when ``steps`` is None (allocator and connection warm-up).
    window, jitter_ratio, regression_ratio
        L1 constants (sliding window length, max/min ratio, change-point mean ratio).
    phase_rel, phase_z
        L2: minimum relative excess and z-score of a flagged rank.
    phase_impact
        L2: minimum excess of a flagged rank's phase over its group's baseline, as a share of
        the median job iteration time of the L2 steps.
    kernel_rel, block_factor, kernel_min_share
        L3: minimum normalised mean-W1 score; block-rule p50 factor; kernels below this share
        of a rank's kernel time (count x p50) on every rank are not compared.

    Returns
    -------
    Report

    Raises
    ------
    ValueError
        For an empty window, unknown ranks or bad thresholds.
    TraceFileError
        For a corrupt or truncated store.
    """
    st = _open(store)
    if steps is not None:
        if len(steps) != 2 or int(steps[0]) >= int(steps[1]):
            raise ValueError(f"steps must be a (lo, hi) pair with lo < hi; got {steps!r}")
        steps = (int(steps[0]), int(steps[1]))
    for name, value in (("jitter_ratio", jitter_ratio), ("regression_ratio", regression_ratio)):
        if not value > 1:
            raise ValueError(f"{name} must be > 1; got {value!r}")
    iters = st.iterations(steps, ranks)
    if iters.empty:
        raise ValueError(f"no iterations recorded in steps {steps} (an empty window)")
    if steps is None:
        first = int(iters["step"].min()) + int(warmup_steps)
        steps = (first, int(iters["step"].max()) + 1)
        iters = iters[iters["step"] >= first]
        if iters.empty:
            raise ValueError(f"no iterations after the {warmup_steps} warm-up steps")
    notes = []
    profiled = _profiled_steps(st, steps, ranks)
    if profiled:
        iters = iters[~iters["step"].isin(profiled)]
        notes.append(f"{len(profiled)} steps carrying profiler windows excluded from L1/L2")
    it = iters.pivot_table(index="step", columns="rank", values="duration_ns") / _NS_PER_MS
    if it.isna().any().any():
        notes.append("some ranks miss some steps (dropped records or early exit)")
        it = it.dropna()
    findings, labels, regression_at = _l1(it, window, jitter_ratio, regression_ratio)
    phases = st.phases(steps, ranks)
    if phases.empty:
        notes.append("no phase records: L2 skipped")
        return Report(findings, it, _l2(pd.DataFrame(columns=["phase", "grp", "rank", "step",
                                                               "ms", "start_ns"]), 1, 1),
                      pd.DataFrame(), labels, notes, steps)
    per_step = _per_step_phase(phases[~phases["step"].isin(profiled)])
    l2_steps = per_step if regression_at is None else per_step[per_step["step"] >= regression_at]
    job_ms = it.max(axis=1)
    if regression_at is not None:
        job_ms = job_ms[job_ms.index >= regression_at]
    min_excess_ms = phase_impact * float(job_ms.median()) if len(job_ms) else 0.0
    table = _l2(l2_steps, phase_rel, phase_z, min_excess_ms)
    root_window = (regression_at or steps[0], steps[1])
    try:
        summaries = st.kernel_summaries((root_window[0], root_window[1]), ranks)
    except TraceFileError as exc:
        notes.append(f"kernel summaries unreadable, L3 skipped: {exc}")
        summaries = []
    ktable = _l3(summaries, kernel_rel, block_factor, kernel_min_share) if summaries else \
        pd.DataFrame(columns=["kernel", "stream", "rank", "score", "p50_ns", "flagged"])
    findings += _compose(table, ktable, l2_steps, root_window, notes, phase_rel)
    findings += _spikes(findings, per_step, it, st, ranks)
    findings += _pipeline(per_step, root_window, phase_rel)
    return Report(findings, it, table, ktable, labels, notes, steps, phases=per_step)


def _kernel_phase(kernel: str) -> str | None:
    """The collective phase a communication kernel belongs to (None if unknown)."""
    if kernel.startswith("collective:"):
        return kernel.split(":", 1)[1]
    name = kernel.split(":", 1)[-1].replace("_", "")
    return next((p for p in COLLECTIVE_PHASES if name.startswith(p)), None)


def _compose(table: pd.DataFrame, ktable: pd.DataFrame, per_step: pd.DataFrame, window,
             notes: list, phase_rel: float, wait_share: float = 0.5) -> list[Finding]:
    """L2 + L3 findings with the culprit-vs-victim rule."""
    out: list[Finding] = []
    waits = _waits(per_step).set_index(["phase", "rank"])
    # waiting: most of the collective, or most of its excess over the group's fastest rank, is
    # spent waiting for later peers
    waiting = {(p, r) for (p, r), w in waits.iterrows()
               if w["wait_share"] >= wait_share
               or (w["excess_ms"] > 0 and w["wait_ms"] >= wait_share * w["excess_ms"])}
    # for a link, only ranks whose collective is mostly waiting are discounted: members of one
    # slow group all share its transfer time, so their differences are always waits
    mostly_waiting = {(p, r) for (p, r), w in waits.iterrows() if w["wait_share"] >= wait_share}
    compute = table[table["flagged"] & ~table["collective"]]
    culprits = set(compute["rank"])
    kflag = ktable[ktable["flagged"]] if not ktable.empty else ktable
    for rank, sub in compute.groupby("rank"):
        top = sub.sort_values("rel", ascending=False).iloc[0]
        mine = kflag[kflag["rank"] == rank] if len(kflag) else kflag
        masked = []
        for _, c in table[table["collective"] & (table["rank"] == rank)].iterrows():
            sub_c = per_step[(per_step["phase"] == c["phase"]) & (per_step["grp"] == c["grp"])]
            wide = sub_c.pivot_table(index="step", columns="rank", values="ms",
                                     aggfunc="sum").dropna()
            if wide.shape[1] < 2 or rank not in wide.columns:
                continue
            gap = float(np.median(wide[rank] - wide.drop(columns=rank).min(axis=1)))
            if gap < 0:
                late = waits["last_share"].get((c["phase"], rank), np.nan)
                masked.append(f"its {c['phase']} is shorter than every peer's by a median "
                              f"{-gap:.2f} ms per step and it arrives last in {late:.0%} of "
                              "steps")
        evidence = (f"{top['phase']} median {top['median_ms']:.2f} ms vs "
                    f"{top['baseline_ms']:.2f} ms in {top['grp']} (+{top['rel']:.0%}, "
                    f"z={top['z']:.1f}); flagged compute phases: "
                    f"{', '.join(sorted(sub['phase']))}")
        if len(mine):
            evidence += f"; {len(mine)} kernels diverge (L3), e.g. " + ", ".join(
                mine.sort_values("score", ascending=False)["kernel"].head(3))
        if masked:
            evidence += "; masked: " + "; ".join(masked) + " -> peers wait for it (compute, "\
                        "not network)"
        out.append(Finding("phase", "compute_straggler", window, rank=int(rank),
                           phase=str(top["phase"]), category="compute", evidence=evidence,
                           confidence=float(top["vote"]),
                           details={"masked": bool(masked), "rel": float(top["rel"]),
                                    "z": float(top["z"]), "n_kernels_flagged": len(mine)}))
    for _, c in table[table["off_cpu"]].iterrows():
        out.append(Finding("phase", "off_cpu", window, rank=int(c["rank"]), phase=str(c["phase"]),
                           category="host",
                           evidence=f"{c['phase']} median {c['median_ms']:.2f} ms vs "
                                    f"{c['baseline_ms']:.2f} ms in {c['grp']} "
                                    f"(+{c['rel']:.0%}) on the wall clock, but its CPU time is "
                                    f"{c['cpu_rel']:+.0%} against its peers': the extra time "
                                    "was spent off the CPU (waiting to be scheduled on a busy "
                                    "host, on I/O or on a lock), not computing",
                           confidence=float(c["vote"]), details={"cpu_rel": float(c["cpu_rel"])}))
    victims = set()
    for _, c in table[table["flagged"] & table["collective"]].iterrows():
        rank = int(c["rank"])
        if rank in culprits:
            continue
        peers = waits[(waits.index.get_level_values("phase") == c["phase"])
                      & (waits["grp"] == c["grp"])]
        late = int(peers["last_share"].droplevel("phase").idxmax()) if len(peers) else None
        if (c["phase"], rank) in waiting or (late in culprits and late != rank):
            victims.add(rank)
            w = waits.loc[(c["phase"], rank)]
            out.append(Finding("phase", "victim", window, rank=rank, phase=str(c["phase"]),
                               evidence=f"{c['phase']} {c['median_ms']:.2f} ms vs "
                                        f"{c['baseline_ms']:.2f} ms, of which "
                                        f"{w['wait_ms']:.2f} ms waiting for later peers (rank "
                                        f"{int(late)} arrives last most often)",
                               confidence=float(min(1.0, w["wait_share"])),
                               details={"waits_for": int(late)}))
        else:
            out.append(Finding("phase", "communication", window, rank=rank,
                               phase=str(c["phase"]), category="communication",
                               evidence=f"{c['phase']} {c['median_ms']:.2f} ms vs "
                                        f"{c['baseline_ms']:.2f} ms with normal compute, not "
                                        "explained by waiting for peers",
                               confidence=float(c["vote"])))
    link = pd.DataFrame(columns=ktable.columns)
    if len(kflag):
        is_comm = np.array([_is_comm_kernel(k, s) for k, s in
                            zip(kflag["kernel"], kflag["stream"], strict=True)], dtype=bool)
        comm = kflag.loc[is_comm]
        phase_med = per_step.groupby(["phase", "rank"])["ms"].median()
        members = per_step.groupby(["phase", "grp"])["rank"].unique()
        n_ranks = per_step["rank"].nunique()
        cand = comm.assign(phase=[_kernel_phase(k) for k in comm["kernel"]])
        cand = cand.loc[np.array([p is not None and (p, int(r)) not in mostly_waiting
                                  for p, r in zip(cand["phase"], cand["rank"], strict=True)],
                                 dtype=bool)]
        keep = []
        for (phase, _grp), ranks in members.items():
            ranks = set(int(r) for r in ranks)
            if phase not in set(cand["phase"]) or len(ranks) >= n_ranks or ranks & culprits:
                continue    # a link shows as a group, with normal compute, against other groups
            hit = set(cand.loc[cand["phase"] == phase, "rank"]) & ranks
            med = phase_med.loc[phase]
            slow = np.median(med[sorted(ranks)]) >= (1 + phase_rel) * med.median()
            if 2 * len(hit) >= len(ranks) and slow:
                top = cand[(cand["phase"] == phase) & cand["rank"].isin(hit)]
                top = top.sort_values("score", ascending=False).iloc[0]
                keep += [dict(top, rank=r) for r in sorted(ranks)]
        link = pd.DataFrame(keep, columns=list(cand.columns))
        for rank, sub in link.groupby("rank"):
            top = sub.sort_values("score", ascending=False).iloc[0]
            peers = ktable[(ktable["kernel"] == top["kernel"]) & (ktable["rank"] != rank)]
            out.append(Finding("kernel", "link_degradation", window, rank=int(rank),
                               kernel=str(top["kernel"]), category="communication",
                               evidence=f"{top['kernel']} p50 {top['p50_ns'] / 1e3:.0f} us vs "
                                        f"other ranks' {peers['p50_ns'].median() / 1e3:.0f} us "
                                        f"(normalised W1 {top['score']:.2f}), not explained by "
                                        "waiting; compute normal",
                               confidence=float(max(0.0, 1 - peers["score"].median()
                                                    / top["score"]))))
        if not link.empty:
            notes.append(f"ranks {sorted(set(link['rank']))} share degraded communication "
                         "kernels")
    explained = culprits | set(link["rank"]) | victims
    for (rank, kernel), row in (kflag.groupby(["rank", "kernel"]) if len(kflag) else []):
        if int(rank) not in explained:
            row = row.iloc[0]
            out.append(Finding("kernel", "kernel_outlier", window, rank=int(rank),
                               kernel=str(kernel),
                               evidence=f"normalised W1 {row['score']:.2f}, p50 "
                                        f"{row['p50_ns'] / 1e3:.0f} us", confidence=0.5))
    return out


def _spikes(findings, per_step, it, st: TraceStore, ranks) -> list[Finding]:
    """Attribute L1 jitter spikes to (rank, phase); search that rank's stacks (L5)."""
    out = []
    jitter = [f for f in findings if f.kind == "jitter"]
    if not jitter:
        return out
    compute = per_step[~per_step["phase"].isin(COLLECTIVE_PHASES)]
    typical = compute.groupby(["phase", "rank"])["ms"].median().rename("typ")
    try:
        stacks = st.stacks(ranks)
    except TraceFileError:
        stacks = pd.DataFrame()
    starts = st.iterations(None, ranks).set_index(["rank", "step"])
    for f in jitter:
        s = f.details["spike_step"]
        at = compute[compute["step"] == s].join(typical, on=["phase", "rank"])
        if at.empty:
            continue
        at = at.assign(excess=at["ms"] - at["typ"])
        top = at.sort_values("excess", ascending=False).iloc[0]
        rank = int(top["rank"])
        spike = Finding("phase", "spike", (s, s + 1), rank=rank, phase=str(top["phase"]),
                        evidence=f"{top['phase']} took {top['ms']:.1f} ms at step {s} vs "
                                 f"median {top['typ']:.1f} ms",
                        confidence=float(top["excess"] / max(at["excess"].clip(0).sum(), 1e-9)))
        out.append(spike)
        if stacks.empty or (rank, s) not in starts.index:
            continue
        t0 = int(starts.loc[(rank, s), "start_ns"])
        t1 = t0 + int(starts.loc[(rank, s), "duration_ns"])
        hits, total, frame = _stack_evidence(stacks, rank, t0, t1)
        if hits:
            out.append(Finding("stacks", "jit_compile", (s, s + 1), rank=rank,
                               phase=str(top["phase"]), category="framework",
                               evidence=f"{hits} of {total} stack samples of rank {rank} during "
                                        f"step {s} are in compiler code ({frame}); "
                                        + spike.evidence,
                               confidence=float(hits / total)))
        elif total:
            spike.evidence += f"; no compiler frames in its {total} stack samples"
    return out


def _pipeline(per_step: pd.DataFrame, window, phase_rel: float) -> list[Finding]:
    """L4 proxy for balanced pipelines: the bottleneck stage has the longest compute, and the
    stages upstream of it wait longer for gradients (their bubbles grow)."""
    if "pp_recv_grad" not in set(per_step["phase"]):
        return []
    by_rank = per_step.groupby(["phase", "rank"])["ms"].median().unstack("phase")
    compute_cols = [c for c in by_rank.columns if c not in COLLECTIVE_PHASES]
    comp = by_rank[compute_cols].sum(axis=1)
    if len(comp) < 2:
        return []
    grad_wait = by_rank["pp_recv_grad"].fillna(0.0)
    stage = int(comp.idxmax())
    others = comp.drop(stage)
    rel = comp[stage] / others.median() - 1
    upstream = grad_wait[grad_wait.index < stage]
    if rel < phase_rel or upstream.empty or grad_wait[stage] > upstream.min():
        return []
    return [Finding("pipeline", "pipeline_bubble", window, rank=stage, phase="stage_backward",
                    category="compute",
                    evidence=f"stage {stage} compute {comp[stage]:.1f} ms per step vs other "
                             f"stages' {others.median():.1f} ms (+{rel:.0%}); upstream stages "
                             f"wait {upstream.median():.1f} ms for gradients vs "
                             f"{grad_wait[stage]:.1f} ms on stage {stage} (bubbles)",
                    confidence=float(1 - grad_wait[stage] / max(upstream.min(), 1e-9)))]
