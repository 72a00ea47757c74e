#!/usr/bin/env python3
"""Multi-seed evaluation of the RL policies, as the reliable-RL-evaluation literature asks
(Agarwal et al., "Deep RL at the edge of the statistical precipice", 2021): K >= 5 seeds per
setting, the interquartile mean (IQM: the mean of the middle 50% of runs) and a 95% bootstrap
interval of it over the seeds, next to the plain mean and the worst and best run.

Settings: DQN and PPO on CartPole (the greedy policy's mean episode return, the known-answer
check) and on the trading environment of a bars CSV (the greedy policy's mean log return over
sequential windows of the validation split, held out from training).

    .venv/bin/python bench/rl_seeds.py --build build --seeds 5 --data ~/.cache/foxhunt/sp500_close.csv

Each run is `foxhunt train MODEL ... --seed S --json`; the figures come from its summary's eval.
Prints a table and, with --json FILE, writes every run and the statistics.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile


def iqm(values):
    """Mean of the middle 50%: sorted, drop the lowest and highest quarter (fractionally)."""
    v = sorted(values)
    n = len(v)
    lo, hi = 0.25 * n, 0.75 * n
    total, weight = 0.0, 0.0
    for i, x in enumerate(v):
        # Share of [i, i + 1) inside [lo, hi).
        w = max(0.0, min(i + 1, hi) - max(i, lo))
        total += w * x
        weight += w
    return total / weight


def bootstrap_interval(values, stat, resamples=2000, seed=7):
    """95% percentile interval of `stat` over resamples of the runs (with replacement)."""
    rng = random.Random(seed)
    n = len(values)
    draws = sorted(stat([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    return draws[int(0.025 * resamples)], draws[int(0.975 * resamples) - 1]


def run(build, model, env, steps, seed, data, out):
    cmd = [os.path.join(build, "foxhunt"), "train", model, "--env", env, "--seed", str(seed),
           "--out", out, "--progress", "off", "--json"]
    if steps > 0:
        cmd += ["--steps", str(steps)]
    if env == "trading":
        cmd += ["--data", data]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"rl_seeds: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
    s = json.loads(r.stdout)
    return s["eval"]["mean_return"], s["seconds"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default="build", help="build directory holding foxhunt")
    ap.add_argument("--seeds", type=int, default=5, help="seeds per setting (>= 5 recommended)")
    ap.add_argument("--data", default=os.path.expanduser("~/.cache/foxhunt/sp500_close.csv"),
                    help="bars CSV of the trading environment")
    ap.add_argument("--cartpole-steps", type=int, default=50000)
    ap.add_argument("--trading-steps", type=int, default=0, help="0: the trainer's default")
    ap.add_argument("--only", default="", help="comma list of settings, e.g. dqn/cartpole")
    ap.add_argument("--json", default="", help="write every run and the statistics here")
    a = ap.parse_args()
    if a.seeds < 2:
        sys.exit("rl_seeds: --seeds: expected at least 2")
    settings = [("dqn", "cartpole"), ("ppo", "cartpole"), ("dqn", "trading"), ("ppo", "trading")]
    if a.only:
        keep = set(a.only.split(","))
        settings = [s for s in settings if f"{s[0]}/{s[1]}" in keep]
    report = {"seeds": a.seeds, "settings": {}}
    print(f"{'setting':<14} {'IQM':>10} {'95% interval (IQM)':>24} {'mean':>10} {'min':>10} "
          f"{'max':>10} {'s/run':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for model, env in settings:
            steps = a.cartpole_steps if env == "cartpole" else a.trading_steps
            results = []
            for seed in range(1, a.seeds + 1):
                out = os.path.join(tmp, f"{model}-{env}-{seed}")
                results.append(run(a.build, model, env, steps, seed, a.data, out))
            returns = [r for r, _ in results]
            lo, hi = bootstrap_interval(returns, iqm)
            row = {"returns": returns, "iqm": iqm(returns), "iqm_lo": lo, "iqm_hi": hi,
                   "mean": sum(returns) / len(returns), "min": min(returns), "max": max(returns),
                   "seconds": [s for _, s in results], "steps": steps,
                   "metric": "greedy mean episode return" if env == "cartpole"
                   else "greedy mean log return over validation windows"}
            report["settings"][f"{model}/{env}"] = row
            print(f"{model + '/' + env:<14} {row['iqm']:>10.4g} "
                  f"{'[' + format(lo, '.4g') + ', ' + format(hi, '.4g') + ']':>24} "
                  f"{row['mean']:>10.4g} {row['min']:>10.4g} {row['max']:>10.4g} "
                  f"{sum(row['seconds']) / len(results):>7.1f}", flush=True)
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(report, f, indent=2)
        os.replace(a.json + ".tmp", a.json)


if __name__ == "__main__":
    main()
