"""Tracing benchmarks: overhead of the channels on step time, compression speed and ratio,
diagnosis time vs number of (simulated) ranks.

Run: .venv/bin/python benchmarks/tracing.py [--quick]
Prints tables; timings depend on the host's load (say so when quoting them).
"""

import argparse
import inspect
import time

import numpy as np
import pandas as pd

from causalkit.systems.tracing import SyntheticCluster, Tracer, cupti_scale_window
from causalkit.systems.tracing.compression import cluster_durations
from causalkit.systems.tracing.overhead import channel_costs, measure_overhead, summarize_overhead


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seconds-scale version")
    args = parser.parse_args(argv)
    pairs = 30 if args.quick else 800
    with pd.option_context("display.width", 140, "display.max_columns", 12):
        print("== overhead on step time (single process, 1 thread, paired single steps) ==")
        table = summarize_overhead(measure_overhead(pairs=pairs))
        print(table.round(2).to_string())
        aa, on = table.loc["off"], table.loc["always_on"]
        covers = aa["wall_ci_lo"] <= 0 <= aa["wall_ci_hi"]
        print(f"A/A control (untraced vs untraced), wall: {aa['wall_pct']:+.2f}% (95% CI "
              f"{aa['wall_ci_lo']:+.2f}..{aa['wall_ci_hi']:+.2f}%) -> covers 0: {covers}")
        for label, what in (("wall", "wall time"), ("thread_cpu", "training-thread CPU"),
                            ("total_cpu", "all CPU, tracer threads included")):
            lo, hi = on[f"{label}_ci_lo"], on[f"{label}_ci_hi"]
            verdict = "holds" if hi <= 2 else ("fails" if lo > 2 else "not resolved")
            print(f"always-on channels, {what}: median paired ratio {on[f'{label}_pct']:+.2f}% "
                  f"(95% CI {lo:+.2f}..{hi:+.2f}%, {int(on['pairs'])} pairs) -> <= 2% {verdict}")
        cost = channel_costs()
        records = 12                       # phases + iteration sample per step of this loop
        step_thread = table.loc["always_on", "mean_thread_ms"] * 1e3
        interval_ms = 1e3 * inspect.signature(Tracer).parameters["stack_interval_s"].default
        stacks = table.loc["always_on", "traced_ms"] / interval_ms   # snapshots per step
        inline = records * cost["inline_us"] / step_thread * 100
        total = (records * cost["record_us"] + stacks * cost["stack_us"]) / step_thread * 100
        print(f"cost model: {cost['inline_us']:.2f} us in-line ({cost['record_us']:.2f} us with "
              f"the processor) per phase record, {cost['stack_us']:.2f} us per stack snapshot "
              f"-> in-line {inline:.2f}%, all threads {total:.2f}% of the "
              f"{step_thread / 1e3:.1f} ms thread-CPU step (thread wake-ups not included)")
        for config in ("duty_cycled", "profiler_always"):
            row = table.loc[config]
            print(f"{config} (kernel channel, reported separately): wall "
                  f"{row['wall_pct']:+.1f}% (CI {row['wall_ci_lo']:+.1f}..{row['wall_ci_hi']:+.1f}"
                  f"%), all CPU {row['total_cpu_pct']:+.1f}% (CI "
                  f"{row['total_cpu_ci_lo']:+.1f}..{row['total_cpu_ci_hi']:+.1f}%)")

        print("\n== compression: KDE clustering speed (per kernel group) ==")
        rng = np.random.default_rng(0)
        for n in (100, 10_000, 1_000_000):
            d = np.concatenate([rng.lognormal(8, 0.1, n // 2), rng.lognormal(11, 0.2, n // 2)])
            t0 = time.perf_counter()
            clusters = cluster_durations(d)
            dt = time.perf_counter() - t0
            print(f"n={n:>9,}: {1e3 * dt:8.2f} ms, {len(clusters)} clusters, "
                  f"{n / dt / 1e6:6.2f} M events/s")

        print("\n== compression ratio, SIMULATED CUPTI-scale rank-step (fixed kernel modes: the "
              "ratio is proportional to the event count chosen, not a measured ratio) ==")
        for n in ((10_000,) if args.quick else (10_000, 100_000)):
            r = cupti_scale_window(n)
            print(f"{n:>7,} events: raw {r['raw_bytes'] / 1e6:.2f} MB -> {r['summary_bytes']} B, "
                  f"ratio {r['ratio']:,.0f}x ({r['n_clusters']} clusters)")

        print("\n== diagnosis time vs ranks (SIMULATED traces) ==")
        for n in ((64, 256) if args.quick else (64, 256, 1024, 4096)):
            row = SyntheticCluster(n, fault="compute_straggler", seed=0).run().iloc[0]
            print(f"{n:>6} ranks: generate {row['generate_s']:6.2f} s, diagnose "
                  f"{row['diagnose_s']:6.2f} s ({1e3 * row['diagnose_s'] / n:.2f} ms/rank), "
                  f"recall {row['recall']:.0f}")


if __name__ == "__main__":
    main()
