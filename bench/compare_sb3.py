#!/usr/bin/env python3
"""foxhunt's RL training on CartPole against Stable-Baselines3's, same hyperparameters, same
steps, one thread each, timed alternately.

  .venv/bin/python bench/compare_sb3.py [--build DIR] [--algos dqn,ppo] [--dqn-steps N]
                                        [--ppo-steps N] [--repeats R] [--seed S] [--out FILE]

Stable-Baselines3 is the library a user would train these policies with instead
(`scripts/setup.sh --bench` installs stable-baselines3 and gymnasium into .venv; without them
this script exits 77, skipped).

Both sides train with the hyperparameters of foxhunt's trainers (include/foxhunt/train/
dqn_trainer.h, ppo_trainer.h: RL Zoo's tuned CartPole-v1 values):
  DQN: 50,000 steps, lr 1e-3, batch 64, buffer 1e5, learning_starts 1000, gamma 0.99, target
       update every 10 steps (hard), train_freq 256 with 128 gradient steps, epsilon 1.0 -> 0.04
       over 16% of the steps, grad-norm clip 10, Huber loss, Q-net [256, 256] ReLU. SB3's DQN is
       not Double DQN, so foxhunt's runs with `"double_dqn": false` here (the same algorithm;
       foxhunt's default, Double DQN, adds one forward of the online net on s' per update).
  PPO: 100,000 steps, 8 envs x 32 steps, batch 256, 20 epochs, gamma 0.98, lambda 0.8, lr 1e-3
       and clip 0.2 both decayed linearly to 0, ent_coef 0, vf_coef 0.5, max_grad_norm 0.5,
       Adam eps 1e-5, separate policy and value nets [64, 64] tanh, orthogonal init.
Neither side evaluates during training (foxhunt: `--options '{"eval_interval":0}'
--eval-episodes 0`; SB3's learn() has no evaluation).

Timing, per algorithm and repeat, alternating (foxhunt first, then SB3):
  foxhunt: the wall time of the whole `foxhunt train ALGO --env cartpole ...` command (process
           start, LibTorch load and the checkpoint write included: ~0.4 s of fixed cost), and the
           trainer's own `seconds` from its --json summary;
  SB3:     the wall time of making the env and the model and of learn() in this process, with
           torch.set_num_threads(1) (the imports excluded).
The ratio is foxhunt's whole command / SB3 (below 1: foxhunt faster); `ratio_train` uses the
trainer's own seconds. With --repeats > 1 each figure is the median of the repeats. A report, not
a gate: exit 0 unless a program fails (1); bad usage exits 2. The JSON (--out, default
BUILD/compare-sb3.json) is written atomically and printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compare_python as cp  # noqa: E402  (cpu_model, write_json_atomic; no torch import)

SKIP_CODE = 77
SB3_PIN, GYMNASIUM_PIN = "2.9.2", "1.4.0"


def log(msg: str) -> None:
    print(f"[compare_sb3] {msg}", file=sys.stderr, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="compare_sb3.py",
                                description="foxhunt vs Stable-Baselines3 on CartPole-v1")
    p.add_argument("--build", default="build", help="build directory with foxhunt (default build)")
    p.add_argument("--algos", default="dqn,ppo", help="comma-separated: dqn, ppo (default both)")
    p.add_argument("--dqn-steps", type=int, default=50000, help="DQN steps (default 50000)")
    p.add_argument("--ppo-steps", type=int, default=100000, help="PPO steps (default 100000)")
    p.add_argument("--repeats", type=int, default=1, help="alternating repeats (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of both sides (default 0)")
    p.add_argument("--out", default=None, help="JSON output (default BUILD/compare-sb3.json)")
    a = p.parse_args(argv)
    a.algos = [s for s in a.algos.split(",") if s]
    bad = [s for s in a.algos if s not in ("dqn", "ppo")]
    if bad or not a.algos:
        p.error(f"--algos: expected a comma-separated list of dqn, ppo; got '{','.join(bad)}'")
    for name in ("dqn_steps", "ppo_steps", "repeats"):
        if getattr(a, name) <= 0:
            p.error(f"--{name.replace('_', '-')}: expected a positive integer, "
                    f"got {getattr(a, name)}")
    a.binary = os.path.join(a.build, "foxhunt")
    if not os.access(a.binary, os.X_OK):
        p.error(f"--build: expected the foxhunt binary at '{a.binary}' (scripts/run.sh build)")
    a.out = a.out or os.path.join(a.build, "compare-sb3.json")
    return a


def time_foxhunt(binary, algo, steps, seed):
    with tempfile.TemporaryDirectory(prefix="foxhunt-sb3-") as tmp:
        options = {"eval_interval": 0}
        if algo == "dqn":
            options["double_dqn"] = False  # SB3's DQN: the same algorithm on both sides
        cmd = [binary, "train", algo, "--env", "cartpole", "--steps", str(steps), "--seed",
               str(seed), "--threads", "1", "--eval-episodes", "0", "--options",
               json.dumps(options), "--progress", "off", "--out", tmp, "--json"]
        t = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-500:]}")
    summary = json.loads(p.stdout)
    m = summary.get("metrics", {})
    return {"wall_s": wall, "train_s": summary.get("seconds"), "steps": summary.get("steps"),
            "return_mean": m.get("return_mean")}


def linear(start):
    return lambda progress_remaining: progress_remaining * start  # SB3's schedule convention


def time_sb3(sb3, gym, algo, steps, seed):
    t = time.perf_counter()
    if algo == "dqn":
        env = gym.make("CartPole-v1")
        model = sb3.DQN("MlpPolicy", env, learning_rate=1e-3, batch_size=64, buffer_size=100000,
                        learning_starts=1000, gamma=0.99, target_update_interval=10, tau=1.0,
                        train_freq=256, gradient_steps=128, exploration_fraction=0.16,
                        exploration_initial_eps=1.0, exploration_final_eps=0.04,
                        max_grad_norm=10, policy_kwargs={"net_arch": [256, 256]}, seed=seed,
                        device="cpu", verbose=0)
    else:
        from stable_baselines3.common.env_util import make_vec_env
        env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
        model = sb3.PPO("MlpPolicy", env, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98,
                        gae_lambda=0.8, learning_rate=linear(1e-3), clip_range=linear(0.2),
                        ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5, normalize_advantage=True,
                        seed=seed, device="cpu", verbose=0)
    model.learn(total_timesteps=steps, progress_bar=False)
    wall = time.perf_counter() - t
    ep = [e["r"] for e in model.ep_info_buffer] if model.ep_info_buffer else []
    env.close()
    return {"wall_s": wall, "steps": int(model.num_timesteps),
            "return_mean": sum(ep) / len(ep) if ep else None}


def main(argv) -> int:
    a = parse_args(argv)
    try:
        import gymnasium as gym
        import stable_baselines3 as sb3
        import torch
    except ImportError as e:
        log(f"skipped: {e} (scripts/setup.sh --bench installs stable-baselines3=={SB3_PIN} "
            f"and gymnasium=={GYMNASIUM_PIN})")
        return SKIP_CODE
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    steps = {"dqn": a.dqn_steps, "ppo": a.ppo_steps}
    runs = {algo: {"foxhunt": [], "sb3": []} for algo in a.algos}
    try:
        for r in range(a.repeats):
            for algo in a.algos:
                f = time_foxhunt(a.binary, algo, steps[algo], a.seed)
                runs[algo]["foxhunt"].append(f)
                log(f"{algo} repeat {r + 1}: foxhunt {f['wall_s']:.2f} s (trainer "
                    f"{f['train_s']:.2f} s)")
                s = time_sb3(sb3, gym, algo, steps[algo], a.seed)
                runs[algo]["sb3"].append(s)
                log(f"{algo} repeat {r + 1}: SB3 {s['wall_s']:.2f} s")
    except Exception as e:  # noqa: BLE001  (a failed side is reported, exit 1)
        log(f"FAILED: {e}")
        return 1

    results = {}
    for algo in a.algos:
        fx, sb = runs[algo]["foxhunt"], runs[algo]["sb3"]
        f_wall = statistics.median(x["wall_s"] for x in fx)
        f_train = statistics.median(x["train_s"] for x in fx)
        s_wall = statistics.median(x["wall_s"] for x in sb)
        results[algo] = {"steps": steps[algo], "foxhunt_s": f_wall, "foxhunt_train_s": f_train,
                         "sb3_s": s_wall, "ratio": f_wall / s_wall,
                         "ratio_train": f_train / s_wall, "runs": runs[algo]}
    out = {"kind": "compare_sb3", "cpu": cp.cpu_model(), "threads": 1, "seed": a.seed,
           "repeats": a.repeats, "stable_baselines3_version": sb3.__version__,
           "gymnasium_version": gym.__version__, "torch_version": torch.__version__,
           "binary": os.path.abspath(a.binary),
           "statistic": "median of the repeats' wall times; foxhunt: whole command; SB3: env + "
                        "model + learn() in process",
           "results": results}
    cp.write_json_atomic(a.out, out)
    print(f"{'algo':5s} {'steps':>7s} {'foxhunt s':>10s} {'(trainer)':>10s} {'SB3 s':>8s} "
          f"{'ratio':>7s}", file=sys.stderr)
    for algo, r in results.items():
        print(f"{algo:5s} {r['steps']:>7d} {r['foxhunt_s']:>10.2f} {r['foxhunt_train_s']:>10.2f} "
              f"{r['sb3_s']:>8.2f} {r['ratio']:>6.3f}x", file=sys.stderr)
    print(json.dumps({k: v for k, v in out.items() if k != "results"} |
                     {"results": {k: {x: y for x, y in v.items() if x != "runs"}
                                  for k, v in results.items()}}, indent=2))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
