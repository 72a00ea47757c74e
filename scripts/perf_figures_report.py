#!/usr/bin/env python3
"""The tables of scripts/perf-figures.sh from the raw outputs of its steps.

  python3 scripts/perf_figures_report.py RAW_DIR OUT_DIR

Reads RAW_DIR (the steps' outputs: Google Benchmark JSONs, the foxhunt commands' JSON, the
comparisons' JSON, NAME.step with each step's exit code and seconds) and the peak figures of
$FOXHUNT_PEAK_JSON (peak_bench's), and writes OUT_DIR/perf-figures.json and OUT_DIR/perf-figures.md
atomically; prints the Markdown. Missing figures read "n/a". Exit 1 when a file it needs is
unreadable JSON (a step's failure is the shell script's to report).
"""

from __future__ import annotations

import glob
import json
import os
import re
import statistics
import sys
import tempfile

UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def load_lines(path):
    """The last JSON object of a file (a step's stdout), or None."""
    try:
        with open(path) as f:
            text = f.read().strip()
    except FileNotFoundError:
        return None
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(text.splitlines()[-1])


def gbench(raw, name):
    """{benchmark name: row} of RAW/NAME.json: the median aggregate where there are repetitions,
    else the one run; rows with "error": the benchmark skipped itself (its message)."""
    data = load(os.path.join(raw, name + ".json"))
    if not data:
        return {}
    rows, medians = {}, {}
    for b in data.get("benchmarks", []):
        key = b.get("run_name", b["name"])
        if b.get("error_occurred"):
            rows[key] = {"error": b.get("error_message", "error")}
            continue
        scale = UNIT_US.get(b.get("time_unit", "ns"), 1e-3)
        row = dict(b, real_us=b["real_time"] * scale, cpu_us=b["cpu_time"] * scale)
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[key] = row
        elif key not in rows:
            rows[key] = row
    rows.update(medians)
    return rows


def fmt_time(us):
    if us is None:
        return "n/a"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} us" if us >= 10 else f"{us:.2f} us"


def fmt(x, spec, none="n/a"):
    return none if x is None else format(x, spec)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def forwards(raw, peak):
    """Rows of table (a)."""
    models, quant = gbench(raw, "models"), gbench(raw, "quant")
    fp32 = peak.get("fp32_gflops_per_core") or 0
    rows = []
    flops_b1 = {}
    for m in ("dqn", "ppo", "mamba2", "tft"):
        for batch in (1, 64):
            b = models.get(f"forward/{m}/{batch}")
            row = {"model": m, "precision": "fp32", "batch": batch, "source": "models_bench"}
            if b and "error" not in b:
                flops = b.get("flops")
                threads = max(1, int(b.get("threads", 1)))
                gflops = b.get("gflops")
                if gflops is None and flops:
                    gflops = flops / (b["cpu_us"] * 1e3)
                frac = b.get("peak_fraction")
                if frac is None and gflops and fp32:
                    frac = gflops / (fp32 * threads)
                row.update(real_us=b["real_us"], cpu_us=b["cpu_us"], flops=flops, gflops=gflops,
                           peak="fp32", peak_gflops=fp32 * threads or None, fraction=frac)
                if batch == 1 and flops:
                    flops_b1[m] = flops
            else:
                row["note"] = (b or {}).get("error", "not measured")
            rows.append(row)

    def reduced(m, precision, batch, name, ref_name, peak_key, absent):
        row = {"model": m, "precision": precision, "batch": batch, "source": "quant_bench"}
        b, ref = quant.get(name), quant.get(ref_name)
        if not b or "error" in b:
            row["note"] = (b or {}).get("error", absent)
            return row
        flops = flops_b1[m] * batch if m in flops_b1 else None
        per_core = peak.get(peak_key) or 0
        gflops = flops / (b["cpu_us"] * 1e3) if flops else None
        row.update(real_us=b["real_us"], cpu_us=b["cpu_us"], flops=flops, gflops=gflops,
                   peak=peak_key.split("_")[0], peak_gflops=per_core or None,
                   fraction=gflops / per_core if gflops and per_core else None)
        if ref and "error" not in ref:
            row.update(fp32_real_us=ref["real_us"], vs_fp32=b["real_us"] / ref["real_us"])
        return row

    for batch in (1, 64):
        rows.append(reduced("tft", "int8", batch, f"BM_TftForward/int8:1/batch:{batch}",
                            f"BM_TftForward/int8:0/batch:{batch}", "int8_gops_per_core",
                            "not measured"))
    rows.append({"model": "mamba2", "precision": "int8", "batch": "1, 64",
                 "note": "no INT8 form: the precision registry has the TFT's only"})
    for m in ("tft", "mamba2"):
        for batch in (1, 64):
            names = [k for k in quant if re.fullmatch(
                rf"BM_Bf16Forward/{m}/(?:\d+/)?bf16:1/batch:{batch}", k)]
            refs = [k for k in quant if re.fullmatch(
                rf"BM_Bf16Forward/{m}/(?:\d+/)?bf16:0/batch:{batch}", k)]
            rows.append(reduced(m, "bf16", batch, names[0] if names else "",
                                refs[0] if refs else "", "bf16_gflops_per_core",
                                "not measured"))
    return rows


def target(name, measured, value, bound, kind="<="):
    met = None if value is None else (value <= bound if kind == "<=" else value >= bound)
    return {"target": name, "measured": measured, "value": value, "bound": bound, "kind": kind,
            "met": met}


def targets(raw, fwd):
    out = []
    by = {(r["model"], r["precision"], r["batch"]): r for r in fwd}

    def ratio_row(label, key, bound):
        r = by.get(key, {})
        v = r.get("vs_fp32")
        m = (f"{fmt_time(r.get('real_us'))} vs FP32 {fmt_time(r.get('fp32_real_us'))}: "
             f"{v:.2f}x" if v is not None else r.get("note", "n/a"))
        out.append(target(label, m, v, bound))

    ratio_row("TFT BF16 batch 64 <= 0.6x FP32's time", ("tft", "bf16", 64), 0.6)
    ratio_row("TFT BF16 batch 1 <= 1.0x FP32's time", ("tft", "bf16", 1), 1.0)
    acc = load_lines(os.path.join(raw, "bf16acc.out"))
    if acc:
        d = acc.get("loss_delta_pct")
        out.append(target("TFT BF16 test pinball loss within 0.5% of FP32",
                          f"{acc.get('fp32_test_loss', 0):.6f} -> "
                          f"{acc.get('int8_test_loss', 0):.6f} ({d:+.3f}%; TFT trained on the "
                          f"S&P 500 closes)", abs(d) if d is not None else None, 0.5))
    else:
        out.append(target("TFT BF16 test pinball loss within 0.5% of FP32", "n/a", None, 0.5))
    ratio_row("INT8 TFT batch 64 <= 0.8x FP32's time", ("tft", "int8", 64), 0.8)

    tape = gbench(raw, "tape")
    p = tape.get("BM_ParseTape", {})
    mbs = p.get("bytes_per_second", 0) / 1e6 if "bytes_per_second" in p else None
    out.append(target("Tape CSV parse >= 150 MB/s (one core)",
                      f"{mbs:,.0f} MB/s ({p.get('items_per_second', 0) / 1e6:.1f} M prints/s)"
                      if mbs else "n/a", mbs, 150, ">="))
    bars = {k.split("/", 1)[1]: v["items_per_second"] / 1e6 for k, v in tape.items()
            if k.startswith("BM_BuildBars/") and "items_per_second" in v}
    worst = min(bars.values()) if bars else None
    out.append(target("Bar building >= 10 M prints/s (one core, slowest bar type)",
                      ", ".join(f"{k} {v:.1f}" for k, v in sorted(bars.items())) + " M prints/s"
                      if bars else "n/a", worst, 10, ">="))

    pred = [load_lines(f) for f in sorted(glob.glob(os.path.join(raw, "predict_*.out")))]
    order = ("time", "tick", "volume", "dollar")  # the script's order of bar types
    pred = sorted((x for x in pred if x), key=lambda x: (
        order.index(x["spec"].split(":")[0]) if x["spec"].split(":")[0] in order else 9, x["spec"]))
    if pred:
        w = min(pred, key=lambda x: x["prints_per_s"])
        m = "; ".join(f"{x['spec']} {x['prints_per_s'] / 1e6:.2f} M/s (steady "
                      f"{x['steady_prints_per_s'] / 1e6:.2f})" for x in pred)
        out.append(target("predict --ticks, E-mini tape, four models >= 1 M prints/s end to end "
                          "(slowest bar type; steady = less a 1,000-print run)", m,
                          w["prints_per_s"] / 1e6, 1.0, ">="))
    else:
        out.append(target("predict --ticks, E-mini tape, four models >= 1 M prints/s end to end",
                          "n/a", None, 1.0, ">="))

    stress = [load_lines(f) for f in sorted(glob.glob(os.path.join(raw, "stress_*.out")))]
    conc = [s["scenarios"]["concurrent"] for s in stress if s and "scenarios" in s]
    n = f" (median of {len(conc)} runs)" if len(conc) > 1 else ""
    p50 = median(c["latency_us"]["p50"] for c in conc)
    p99 = median(c["latency_us"]["p99"] for c in conc)
    sp = median(c.get("speedup_vs_serial") for c in conc)
    thr = median(c.get("throughput_per_s") for c in conc)
    out.append(target("One bar through four models p50 <= 150 us (stress concurrent)",
                      f"{p50:.0f} us{n}" if conc else "n/a", p50, 150))
    out.append(target("One bar p99 <= 250 us", f"{p99:.0f} us{n}" if conc else "n/a", p99, 250))
    out.append(target("Concurrent >= 1.3x serial", f"{fmt(sp, '.2f')}x "
                      f"({fmt(thr, ',.0f')} inferences/s){n}" if conc else "n/a", sp, 1.3, ">="))

    desk = [load_lines(f) for f in sorted(glob.glob(os.path.join(raw, "desk_*.out")))]
    dc = [s["scenarios"]["concurrent"] for s in desk if s and "scenarios" in s]
    gain = median(c.get("batching_gain") for c in dc)
    ibs = median(c.get("instrument_bars_per_s") for c in dc)
    one = median(c.get("single_instrument_bars_per_s") for c in dc)
    n = f" (median of {len(dc)} runs)" if len(dc) > 1 else ""
    out.append(target("64 instruments >= 5x one instrument's bar rate",
                      f"{fmt(gain, '.2f')}x: {fmt(ibs, ',.0f')} instrument-bars/s vs one "
                      f"instrument {fmt(one, ',.0f')} bars/s{n}" if dc else "n/a", gain, 5, ">="))

    bud, step = load_lines(os.path.join(raw, "budget.out")), load(os.path.join(raw, "budget.step"))
    if bud and step:
        d = bud.get("desk") or {}
        secs = step["seconds"]
        out.append(target("budget --instruments 500 <= 30 s", f"{secs:.1f} s: 500 fit "
                          f"{'yes' if d.get('asked_fits') else 'no'}, max "
                          f"{d.get('max_instruments', 0):,} instruments ({d.get('method')}), "
                          f"fit error {fmt(d.get('predicted_error_pct'), '.1f')}% against the "
                          f"verification", secs, 30))
    else:
        out.append(target("budget --instruments 500 <= 30 s", "n/a", None, 30))

    ort = (load(os.path.join(raw, "ort.json")) or {}).get("results", {})
    for key, bound in (("dqn/64", 0.8), ("ppo/64", 0.9), ("dqn/1", 0.5), ("ppo/1", 0.5)):
        r = ort.get(key, {})
        v = r.get("ratio")
        m = (f"{r['foxhunt_us']:.2f} us vs ORT {r['ort_us']:.2f} us: {v:.2f}x" if v is not None
             else "n/a")
        out.append(target(f"{key.replace('/', ' batch ').upper().replace('BATCH', 'batch')} "
                          f"<= {bound}x ONNX Runtime", m, v, bound))

    sb3 = (load(os.path.join(raw, "sb3.json")) or {}).get("results", {})
    for algo in ("dqn", "ppo"):
        r = sb3.get(algo, {})
        v = r.get("ratio")
        m = (f"{r['foxhunt_s']:.1f} s (trainer {r['foxhunt_train_s']:.1f} s) vs SB3 "
             f"{r['sb3_s']:.1f} s, {r['steps']:,} steps: {v:.2f}x" if v is not None else "n/a")
        out.append(target(f"CartPole {algo.upper()} training <= 0.25x Stable-Baselines3's time",
                          m, v, 0.25))
    return out, pred


def markdown(run, peak, fwd, tgts, pred, steps):
    lines = []
    mode = " (--quick: a smoke test; its figures are not the targets')" if run.get("quick") else ""
    lines.append(f"# Performance figures{mode}")
    lines.append("")
    lines.append(f"Commit {run.get('commit')}, {run.get('started')}, CPU {peak.get('cpu', '?')}, "
                 f"{os.cpu_count()} cores, load average at the start {run.get('load_start')}. "
                 f"Peak per core (peak_bench): FP32 {fmt(peak.get('fp32_gflops_per_core'), '.0f')}"
                 f" GFLOP/s, BF16 {fmt(peak.get('bf16_gflops_per_core'), '.0f')} GFLOP/s, INT8 "
                 f"{fmt(peak.get('int8_gops_per_core'), '.0f')} GOP/s; read L2 "
                 f"{fmt(peak.get('l2_gbs'), '.0f')} GB/s, DRAM {fmt(peak.get('dram_gbs'), '.0f')}"
                 " GB/s.")
    busy = [r for r in fwd if r.get("cpu_us") and r["cpu_us"] < 0.8 * r["real_us"]]
    if len(busy) > len(fwd) // 3:
        lines.append("")
        lines.append(f"**The machine was busy**: {len(busy)} forwards ran at under 0.8 CPU "
                     "seconds per wall second; wall times and ratios are inflated.")
    lines += ["", "## (a) Every forward (one intra-op thread)", "",
              "| model | precision | batch | wall time | CPU time | GFLOP/s | fraction of peak | "
              "vs FP32 |", "|---|---|---|---|---|---|---|---|"]
    for r in fwd:
        if "real_us" not in r:
            lines.append(f"| {r['model']} | {r['precision']} | {r['batch']} | n/a ({r.get('note')})"
                         " | | | | |")
            continue
        frac = (f"{100 * r['fraction']:.1f}% of {r['peak'].upper()}" if r.get("fraction")
                else "n/a")
        vs = f"{r['vs_fp32']:.2f}x" if r.get("vs_fp32") is not None else ""
        lines.append(f"| {r['model']} | {r['precision']} | {r['batch']} | {fmt_time(r['real_us'])}"
                     f" | {fmt_time(r['cpu_us'])} | {fmt(r.get('gflops'), '.1f')} | {frac} | "
                     f"{vs} |")
    lines += ["", "FLOPs per call: bench/forward_flops.h (multiply-adds x 2; the INT8 and BF16 "
              "forms counted as their FP32 model); GFLOP/s over CPU time; fraction of the peak "
              "of the row's precision per core; \"vs FP32\": wall time against the FP32 model in "
              "the same quant_bench run.", "",
              "## (b) The targets of issue 48", "", "| target | measured | met |", "|---|---|---|"]
    for t in tgts:
        met = "n/a" if t["met"] is None else ("yes" if t["met"] else "no")
        lines.append(f"| {t['target']} | {t['measured']} | {met} |")
    if pred:
        lines += ["", "## (c) predict --ticks per bar type (E-mini tape, four models)", "",
                  "| bar | prints | bars | whole command | prints/s | fixed cost | steady prints/s "
                  "| print-to-decision p50 | p99 |", "|---|---|---|---|---|---|---|---|---|"]
        for x in pred:
            lines.append(f"| {x['spec']} | {x['prints']:,} | {x['bars']:,} | {x['whole_s']:.2f} s "
                         f"| {x['prints_per_s']:,.0f} | {x['fixed_s']:.2f} s | "
                         f"{x['steady_prints_per_s']:,.0f} | {x['p50_us']:.1f} us | "
                         f"{x['p99_us']:.1f} us |")
    failed = [k for k, v in steps.items() if v.get("rc")]
    met = sum(1 for t in tgts if t["met"])
    lines += ["", f"{met} of {len(tgts)} targets met; "
              f"{sum(1 for t in tgts if t['met'] is None)} not measured"
              + (f"; failed steps: {', '.join(failed)}" if failed else "") + "; steps took "
              f"{sum(v.get('seconds', 0) for v in steps.values()):.0f} s."]
    return "\n".join(lines) + "\n"


def write_atomic(path, text):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    raw, out = argv
    run = load(os.path.join(raw, "run.json")) or {}
    peak_path = os.environ.get("FOXHUNT_PEAK_JSON", "")
    peak = (load(peak_path) if peak_path else None) or {}
    steps = {os.path.basename(f)[:-5]: load(f) for f in sorted(glob.glob(os.path.join(raw,
                                                                                "*.step")))}
    fwd = forwards(raw, peak)
    tgts, pred = targets(raw, fwd)
    md = markdown(run, peak, fwd, tgts, pred, steps)
    result = {"run": run, "peak": peak, "steps": steps, "forwards": fwd, "targets": tgts,
              "predict": pred, "targets_met": sum(1 for t in tgts if t["met"]),
              "targets_total": len(tgts)}
    write_atomic(os.path.join(out, "perf-figures.json"), json.dumps(result, indent=2) + "\n")
    write_atomic(os.path.join(out, "perf-figures.md"), md)
    print(md, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
