#!/usr/bin/env python3
"""foxhunt's C++ forward against the same networks in PyTorch eager: same weights, same inputs,
same process run, outputs compared.

  .venv/bin/python bench/compare_python.py [--build DIR] [--threads N] [--min-time S]
                                           [--out FILE] [--models dqn,ppo,...] [--check-only]

1. `DIR/models_bench --export TMP` writes each model's weights (default options, seed 0, eval
   mode), the example inputs the C++ forward benchmarks time (example_batch, seed 1) and the C++
   outputs for them, at batch 1 and 64.
2. bench/torch_models.py builds each network in PyTorch eager from those weights; its forward on
   the same inputs (under torch.inference_mode) must match every C++ output: for each output,
   max over elements of |py - cpp| / max(1, |cpp|) <= 1e-5 (the max absolute difference is
   reported too). A mismatch makes the exit code 1.
3. (not with --check-only) per model, alternating to spread machine drift over both sides:
   C++ first (`models_bench --benchmark_filter='^forward/<model>/'` with FOXHUNT_THREADS=N),
   then Python (torch.set_num_threads(N)), both batches each.

Timing, the same statistic on both sides: R = 5 timed blocks of at least min-time / R seconds
each; a block's figure is its mean wall time per forward call; the reported figure is the MEDIAN
of the R block means, in microseconds.
  C++:    Google Benchmark --benchmark_repetitions=5 --benchmark_min_time=<min-time/5>: each
          repetition's real_time per iteration is one block (BM_Forward warms up with 3 calls).
  Python: warm-up (at least 3 calls and min-time/10 s), then 5 blocks of k calls, k sized from
          the warm-up so a block lasts about min-time/5 s; the garbage collector is off during a
          block (as timeit does).
The C++ figure is Model::forward of the registry adapter (which also checks its inputs); the
Python figure is the bare nn.Module call.

The table: model, batch, foxhunt us, eager us, ratio (foxhunt / eager: below 1 is foxhunt
faster), max abs diff, verdict ("<= 1.0x" or "SLOWER"). A report, not a gate: the exit code is 0
unless an output check fails or a program fails (1); bad usage exits 2.

The JSON (--out, default BUILD/compare-python.json in the --build directory, which git ignores;
with --check-only only when --out is given) is written atomically and holds every figure (the block means too), the thread count, torch
version, CPU model, timestamp and the output checks.

With --check-only (what CI runs): export and output check only, no timing. There, FOXHUNT_NO_PYTHON=1
skips the check (exit 77, the ctest SKIP_RETURN_CODE), as it skips the C++ suite's Python checks.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no bench/__pycache__ in the source tree (ctest runs this there)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

REPEATS = 5        # timed blocks per side and case
TOLERANCE = 1e-5   # on max |py - cpp| / max(1, |cpp|)
BATCHES = (1, 64)  # what models_bench --export writes and forward/<model>/<batch> times
SKIP_CODE = 77


def log(msg: str) -> None:
    print(f"[compare_python] {msg}", file=sys.stderr, flush=True)


class Failure(Exception):
    """A program failed (exit 1)."""


def add_common_args(p, default_out):
    """The options compare_python.py and compare_onnxruntime.py share."""
    p.add_argument("--build", default="build", metavar="DIR",
                   help="build directory holding models_bench (default: build)")
    p.add_argument("--threads", default="1", metavar="N",
                   help="intra-op threads on both sides (FOXHUNT_THREADS and the other side's "
                        "intra-op setting; default 1)")
    p.add_argument("--min-time", default="0.5", metavar="S",
                   help="seconds of timed calls per model and batch on each side (default 0.5)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help=f"JSON report (default BUILD/{default_out}, in the --build directory; "
                        "with --check-only none unless given)")
    p.add_argument("--models", default=None, metavar="LIST",
                   help="comma-separated subset of the models (default: all that models_bench "
                        "exports)")
    p.add_argument("--check-only", action="store_true",
                   help="export and compare the outputs only, no timing (fast; what CI runs)")


def check_common_args(a, p, default_out):
    """Validates and converts the shared options in place (p.error exits 2)."""
    try:
        a.threads = int(a.threads)
        if a.threads < 1:
            raise ValueError
    except ValueError:
        p.error(f"--threads: expected a positive integer, got '{a.threads}'")
    try:
        a.min_time = float(a.min_time)
        if not (a.min_time > 0 and math.isfinite(a.min_time)):
            raise ValueError
    except ValueError:
        p.error(f"--min-time: expected a positive number of seconds (e.g. 0.5), got "
                f"'{a.min_time}'")
    if a.models is not None:
        a.models = [m.strip() for m in a.models.split(",") if m.strip()]
        if not a.models:
            p.error("--models: empty list")
        if len(set(a.models)) != len(a.models):
            p.error(f"--models: duplicates in {a.models}")
    if not os.path.isdir(a.build):
        p.error(f"--build: no directory '{a.build}'")
    if a.out is None and not a.check_only:
        a.out = os.path.join(a.build, default_out)  # beside models_bench: no result in the tree
    if a.out is not None and not os.path.isdir(os.path.dirname(os.path.abspath(a.out))):
        p.error(f"--out: no directory for '{a.out}'")
    a.parser = p
    return a


def new_parser(prog, peer, default_out):
    """The argument parser of a comparison against `peer` ("PyTorch eager", ...), common options
    added."""
    p = argparse.ArgumentParser(
        prog=prog,
        description=f"Time foxhunt's C++ forward (models_bench) against the same networks with the "
                    f"same weights in {peer}, and check that the outputs match.",
        epilog="Exit codes: 0 ok (a slower foxhunt is reported, not failed), 1 an output check or "
               "a program failed, 2 bad usage, 77 skipped (--check-only with FOXHUNT_NO_PYTHON=1).")
    add_common_args(p, default_out)
    return p


def parse_args(argv):
    p = new_parser("compare_python.py", "PyTorch eager", "compare-python.json")
    return check_common_args(p.parse_args(argv), p, "compare-python.json")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def file_stamp(path):
    st = os.stat(path)
    return (datetime.datetime.fromtimestamp(st.st_mtime, datetime.timezone.utc)
            .isoformat(timespec="seconds"), st.st_size, st.st_mtime_ns)


def run_program(cmd, env=None, what="models_bench"):
    try:
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise Failure(f"{what}: cannot run {cmd[0]}: {e}")
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-10:])
        raise Failure(f"{what} exited with {r.returncode}: {' '.join(cmd)}\n{tail}")
    return r


# ---- output check ------------------------------------------------------------------------------

def compare_outputs(torch, module, examples):
    """{batch: {"max_abs_diff", "max_rel_diff", "outputs": [...]}} of the Python forward against
    the C++ outputs; rel = max |py - cpp| / max(1, |cpp|) over the elements."""
    result = {}
    with torch.inference_mode():
        for batch, (ins, outs) in sorted(examples.items()):
            got = module(*ins)
            if len(got) != len(outs):
                raise Failure(f"batch {batch}: Python gives {len(got)} outputs, C++ {len(outs)}")
            per_output = []
            for i, (g, w) in enumerate(zip(got, outs)):
                if tuple(g.shape) != tuple(w.shape):
                    raise Failure(f"batch {batch} output {i}: Python shape {tuple(g.shape)} vs "
                                  f"C++ {tuple(w.shape)}")
                g64, w64 = g.double(), w.double()
                d = (g64 - w64).abs()
                finite = bool(torch.isfinite(g64).all() and torch.isfinite(w64).all())
                if g.numel() == 0:
                    abs_d = rel_d = 0.0
                else:
                    abs_d = d.max().item()
                    rel_d = (d / w64.abs().clamp(min=1.0)).max().item()
                if not finite:
                    abs_d = rel_d = float("inf")
                per_output.append({"shape": list(g.shape), "max_abs_diff": abs_d,
                                   "max_rel_diff": rel_d})
            result[batch] = {"max_abs_diff": max(o["max_abs_diff"] for o in per_output),
                             "max_rel_diff": max(o["max_rel_diff"] for o in per_output),
                             "outputs": per_output}
    return result


# ---- timing ------------------------------------------------------------------------------------

def time_cpp(binary, model, threads, min_time):
    """{batch: {"us": median, "blocks_us": [...], "iterations": [...]}} from models_bench."""
    env = dict(os.environ, FOXHUNT_THREADS=str(threads))
    block = min_time / REPEATS
    with tempfile.TemporaryDirectory(prefix="foxhunt-cmp-") as d:
        out = os.path.join(d, "bench.json")
        # The JSON goes to a file, not stdout, so that nothing else the program prints can
        # corrupt it. This Google Benchmark wants a plain number of seconds ("0.1", not "0.1s").
        run_program([binary, f"--benchmark_filter=^forward/{model}/",
                     f"--benchmark_min_time={block:.6g}", f"--benchmark_repetitions={REPEATS}",
                     "--benchmark_format=console", f"--benchmark_out={out}",
                     "--benchmark_out_format=json"], env=env)
        with open(out) as f:
            data = json.load(f)
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
    runs = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        batch = int(b["name"].split("/")[2])
        runs.setdefault(batch, []).append(
            (b["real_time"] * scale[b.get("time_unit", "ns")], int(b["iterations"])))
    result = {}
    for batch in BATCHES:
        if batch not in runs:
            raise Failure(f"models_bench gave no forward/{model}/{batch} result")
        blocks = [t for t, _ in runs[batch]]
        result[batch] = {"us": statistics.median(blocks), "blocks_us": blocks,
                         "iterations": [n for _, n in runs[batch]]}
    return result, data.get("context", {})


def time_python(torch, module, inputs, min_time):
    """{"us": median block mean, "blocks_us": [...], "calls_per_block": k, "warmup_calls": n}."""
    block = min_time / REPEATS
    with torch.inference_mode():
        # warm-up: allocator, BLAS packing, first-call dispatch
        n, t0 = 0, time.perf_counter()
        while n < 3 or time.perf_counter() - t0 < min_time / 10:
            module(*inputs)
            n += 1
        per_call = (time.perf_counter() - t0) / n
        k = max(1, int(math.ceil(block / per_call)))
        blocks = []
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            for _ in range(REPEATS):
                t0 = time.perf_counter()
                for _ in range(k):
                    module(*inputs)
                blocks.append((time.perf_counter() - t0) / k * 1e6)
        finally:
            if was_enabled:
                gc.enable()
    return {"us": statistics.median(blocks), "blocks_us": blocks, "calls_per_block": k,
            "warmup_calls": n}


# ---- report ------------------------------------------------------------------------------------

def verdict(ratio):
    return "<= 1.0x" if ratio <= 1.0 else "SLOWER"


def print_table(rows, timed, peer="eager", extra=None):
    """The per-case table; `peer` names the other side's column (its row key is
    `<peer lowercased>_us`), `extra` = (heading, row key) adds one more microsecond column."""
    key = peer.lower() + "_us"
    if timed:
        head = (f"{'model':8s} {'batch':>5s} {'foxhunt us':>11s} {peer + ' us':>11s} "
                f"{'ratio':>8s}" + (f" {extra[0]:>10s}" if extra else "") +
                f" {'max diff':>9s}  verdict")
    else:
        head = f"{'model':8s} {'batch':>5s} {'max diff':>9s} {'max rel':>9s}  check"
    print(head)
    print("-" * len(head))
    for r in rows:
        check = "ok" if r["check_ok"] else "MISMATCH"
        if timed:
            v = verdict(r["ratio"]) + ("" if r["check_ok"] else "  (outputs MISMATCH)")
            print(f"{r['model']:8s} {r['batch']:>5d} {r['foxhunt_us']:>11.2f} "
                  f"{r[key]:>11.2f} {r['ratio']:>7.3f}x" +
                  (f" {r[extra[1]]:>10.2f}" if extra else "") +
                  f" {r['max_abs_diff']:>9.1e}  {v}")
        else:
            print(f"{r['model']:8s} {r['batch']:>5d} {r['max_abs_diff']:>9.1e} "
                  f"{r['max_rel_diff']:>9.1e}  {check}")


def write_json_atomic(path, obj):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def prepare(a):
    """The start both comparisons share: the skip, models_bench, torch, and the exported models.
    Returns an exit code, or (torch, binary, binary_stamp, models, loaded, started) with
    loaded[m] = (options, eager module, examples)."""
    if a.check_only and os.environ.get("FOXHUNT_NO_PYTHON") == "1":
        log("skipped: FOXHUNT_NO_PYTHON=1")
        return SKIP_CODE
    binary = os.path.join(a.build, "models_bench")
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        log(f"{binary} is not built (scripts/run.sh build)")
        return 1

    import torch
    import torch_models

    if a.models is not None:
        unknown = [m for m in a.models if m not in torch_models.MODEL_NAMES]
        if unknown:
            a.parser.error(f"--models: unknown {unknown}; known: "
                           f"{','.join(torch_models.MODEL_NAMES)}")
    torch.set_num_threads(a.threads)
    started = time.time()
    binary_stamp = file_stamp(binary)

    with tempfile.TemporaryDirectory(prefix="foxhunt-export-") as tmp:
        run_program([binary, "--export", tmp], what="models_bench --export")
        exported = [n for n in torch_models.MODEL_NAMES
                    if os.path.exists(os.path.join(tmp, f"{n}.safetensors"))]
        models = a.models if a.models is not None else exported
        missing = [m for m in models if m not in exported]
        if missing:
            raise Failure(f"models_bench --export wrote no weights for {missing} "
                          f"(it wrote {exported})")
        loaded = {}
        for m in models:
            name, options, module, examples = torch_models.load(os.path.join(tmp,
                                                                             f"{m}.safetensors"))
            if name != m:
                raise Failure(f"{m}.safetensors holds model '{name}'")
            if sorted(examples) != list(BATCHES):
                raise Failure(f"{m}: example batches {sorted(examples)}, expected {list(BATCHES)}")
            loaded[m] = (options, module, examples)
    return torch, binary, binary_stamp, models, loaded, started


def finish(a, rows, side, peer, check_s, torch, binary, binary_stamp, rebuilt, cpp_context,
           started, loaded, models, method, extra):
    """The closing lines both comparisons print (outputs verdict, the slower cases) and their
    JSON report (common fields, then `extra`). Returns the rows whose outputs did not match."""
    bad = [f"{r['model']}/{r['batch']}" for r in rows if not r["check_ok"]]
    worst = max(r["max_rel_diff"] for r in rows)
    print(f"outputs: {'MISMATCH in ' + ', '.join(bad) if bad else 'all match'} "
          f"(worst max |{side} - cpp| / max(1, |cpp|) = {worst:.1e}, tolerance {TOLERANCE:g}); "
          f"export + check {check_s:.2f} s")
    if not a.check_only:
        slower = [f"{r['model']}/{r['batch']}" for r in rows if r["ratio"] > 1.0]
        print(f"foxhunt slower than {peer}: {', '.join(slower) if slower else 'none'}")
    if a.out is None:
        return bad
    report = {
        "schema": 1,
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "threads": a.threads,
        "min_time_s": None if a.check_only else a.min_time,
        "check_only": a.check_only,
        "method": None if a.check_only else method,
        "tolerance": TOLERANCE,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "cpu_model": cpu_model(),
        "num_cpus": os.cpu_count(),
        "build": os.path.abspath(a.build),
        "models_bench": {"path": os.path.abspath(binary), "mtime": binary_stamp[0],
                         "size": binary_stamp[1], "changed_during_run": rebuilt},
        "cpp_context": cpp_context,
        "duration_s": round(time.time() - started, 3),
        "ok": not bad,
        "results": {f"{r['model']}/{r['batch']}": {k: v for k, v in r.items()
                                                  if k not in ("model", "batch")}
                    for r in rows},
        "options": {m: loaded[m][0] for m in models},
    }
    report.update(extra)
    write_json_atomic(a.out, report)
    print(f"[{os.path.splitext(os.path.basename(sys.argv[0]))[0]}] -> {a.out}", file=sys.stderr)
    return bad


def main(argv) -> int:
    a = parse_args(argv)
    t0 = time.perf_counter()
    setup = prepare(a)
    if isinstance(setup, int):
        return setup
    torch, binary, binary_stamp, models, loaded, started = setup

    checks = {}
    for m in models:
        options, module, examples = loaded[m]
        try:
            checks[m] = compare_outputs(torch, module, examples)
        except Failure as e:
            raise Failure(f"[{m}] {e}")
    check_s = time.perf_counter() - t0

    timings = {}
    cpp_context = None
    if not a.check_only:
        for m in models:
            _, module, examples = loaded[m]
            log(f"{m}: C++")
            cpp, ctx = time_cpp(binary, m, a.threads, a.min_time)
            cpp_context = cpp_context or ctx
            log(f"{m}: PyTorch eager")
            py = {b: time_python(torch, module, examples[b][0], a.min_time) for b in BATCHES}
            timings[m] = (cpp, py)

    rebuilt = file_stamp(binary) != binary_stamp
    if rebuilt:
        log(f"WARNING: {binary} changed during the run (rebuilt?): the figures may mix two builds")

    rows = []
    for m in models:
        for b in BATCHES:
            c = checks[m][b]
            ok = c["max_rel_diff"] <= TOLERANCE
            row = {"model": m, "batch": b, "check_ok": ok, "max_abs_diff": c["max_abs_diff"],
                   "max_rel_diff": c["max_rel_diff"], "outputs": c["outputs"]}
            if m in timings:
                cpp, py = timings[m][0][b], timings[m][1][b]
                row.update({"foxhunt_us": cpp["us"], "eager_us": py["us"],
                            "ratio": cpp["us"] / py["us"], "foxhunt": cpp, "eager": py})
                row["verdict"] = verdict(row["ratio"])
            rows.append(row)

    print(f"threads {a.threads}, torch {torch.__version__}, {cpu_model()}"
          + ("" if a.check_only else f", min-time {a.min_time:g} s per side and case, "
             f"median of {REPEATS} block means"))
    print_table(rows, not a.check_only)
    method = (f"median of {REPEATS} block means per call (us); C++: Google Benchmark "
              f"repetitions of min_time/{REPEATS} s, real_time; Python: blocks of "
              f"calls_per_block calls after warm-up, gc off")
    bad = finish(a, rows, "py", "eager", check_s, torch, binary, binary_stamp, rebuilt, cpp_context,
                 started, loaded, models, method, {})
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Failure as e:
        log(f"FAILED: {e}")
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
