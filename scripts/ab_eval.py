#!/usr/bin/env python3
"""Alternated A/B timing of kernels on one contract's cases: the way speed claims in docs/ are measured.

    scripts/ab_eval.py CONTRACT ROUNDS KERNEL.so [KERNEL.so ...] [--cake build/src/cli/cake] [--set standard]

Runs `cake eval CONTRACT --kernel K --threads 1 --no-baseline --json` for every kernel in turn, ROUNDS
times (so a drift of the machine hits all of them alike), takes each case's median time per kernel, and
prints every case's time ratio against the first kernel, then the geometric mean of the ratios. A case
that fails its gate for some kernel is marked and left out of the mean.
"""
import argparse
import json
import math
import statistics
import subprocess
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("contract")
    ap.add_argument("rounds", type=int)
    ap.add_argument("kernels", nargs="+")
    ap.add_argument("--cake", default="build/src/cli/cake")
    ap.add_argument("--set", default="standard")
    a = ap.parse_args()
    times = [dict() for _ in a.kernels]  # per kernel: describe -> [seconds]
    passed = [dict() for _ in a.kernels]
    for r in range(a.rounds):
        for i, k in enumerate(a.kernels):
            cmd = [a.cake, "eval", a.contract, "--kernel", k, "--threads", "1", "--no-baseline", "--json",
                   "--set", a.set]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if not out.stdout.strip():
                print(f"cake eval failed for {k}: {out.stderr.strip()}", file=sys.stderr)
                return 1
            for c in json.loads(out.stdout)["cases"]:
                d = c["describe"]
                passed[i][d] = passed[i].get(d, True) and c["verdict"] == "pass"
                if c.get("t_cand_s"):
                    times[i].setdefault(d, []).append(c["t_cand_s"])
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    logs = [[] for _ in a.kernels]
    print("case | " + " | ".join(f"k{i}" for i in range(len(a.kernels))))
    for d, t0 in times[0].items():
        base = statistics.median(t0)
        cells = [f"{base * 1e6:.2f} us"]
        for i in range(1, len(a.kernels)):
            if d not in times[i] or not passed[i].get(d, False):
                cells.append("FAIL")
                continue
            ratio = statistics.median(times[i][d]) / base
            logs[i].append(math.log(ratio))
            cells.append(f"{ratio:.3f}")
        print(f"{d} | " + " | ".join(cells))
    for i in range(1, len(a.kernels)):
        if logs[i]:
            print(f"k{i}/k0 geomean {math.exp(sum(logs[i]) / len(logs[i])):.3f} over {len(logs[i])} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
