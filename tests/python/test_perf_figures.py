"""scripts/perf_figures_report.py (the tables of scripts/perf-figures.sh) on a made-up raw
directory: which benchmark row it reads, the fraction of peak, each target's verdict, "n/a" for a
step that did not run; and the shell script's argument checks."""
import importlib.util
import json
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("perf_figures_report",
                                              ROOT / "scripts" / "perf_figures_report.py")
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)

PEAK = {"fp32_gflops_per_core": 250.0, "bf16_gflops_per_core": 500.0,
        "int8_gops_per_core": 1000.0, "cpu": "test CPU"}


def bench_row(name, real, cpu, unit="us", aggregate=None, **counters):
    row = {"name": name if aggregate is None else f"{name}_{aggregate}", "run_name": name,
           "run_type": "iteration" if aggregate is None else "aggregate", "real_time": real,
           "cpu_time": cpu, "time_unit": unit}
    if aggregate:
        row["aggregate_name"] = aggregate
    row.update(counters)
    return row


def write(raw, name, obj):
    (raw / name).write_text(json.dumps(obj))


def make_raw(tmp_path, concurrent_speedup=1.35, with_sb3=True):
    raw = tmp_path / "raw"
    raw.mkdir()
    write(raw, "run.json", {"quick": 0, "commit": "abc", "started": "t", "load_start": "0 0 0"})
    models = []
    for m, flops1 in (("dqn", 1e5), ("ppo", 2e5), ("mamba2", 4e6), ("tft", 3e7)):
        for b in (1, 64):
            # One repetition far off and the median aggregate: the median is what counts.
            models.append(bench_row(f"forward/{m}/{b}", 999.0, 999.0, flops=flops1 * b,
                                    threads=1))
            models.append(bench_row(f"forward/{m}/{b}", 10.0 * b, 10.0 * b, aggregate="median",
                                    flops=flops1 * b, gflops=flops1 / 1e4, threads=1,
                                    peak_fraction=flops1 / 1e4 / 250.0))
    write(raw, "models.json", {"benchmarks": models})
    quant = [
        bench_row("BM_TftForward/int8:0/batch:64", 40.0, 40.0, unit="ms"),
        bench_row("BM_TftForward/int8:1/batch:64", 30.0, 30.0, unit="ms"),  # 0.75x: met
        bench_row("BM_TftForward/int8:0/batch:1", 1.0, 1.0, unit="ms"),
        bench_row("BM_TftForward/int8:1/batch:1", 0.9, 0.9, unit="ms"),
        bench_row("BM_Bf16Forward/tft/0/bf16:0/batch:64", 40.0, 40.0, unit="ms"),
        bench_row("BM_Bf16Forward/tft/0/bf16:1/batch:64", 26.0, 26.0, unit="ms"),  # 0.65x: not
        {"name": "BM_Bf16Forward/mamba2/1/bf16:1/batch:1", "run_name":
         "BM_Bf16Forward/mamba2/1/bf16:1/batch:1", "run_type": "iteration",
         "error_occurred": True, "error_message": "this CPU has no avx512_bf16 or amx_bf16"},
    ]
    write(raw, "quant.json", {"benchmarks": quant})
    write(raw, "tape.json", {"benchmarks": [
        bench_row("BM_ParseTape", 30, 30, unit="ms", bytes_per_second=160e6,
                  items_per_second=5e6),
        bench_row("BM_BuildBars/time_60s", 10, 10, unit="ms", items_per_second=12e6),
        bench_row("BM_BuildBars/tick_500", 10, 10, unit="ms", items_per_second=9e6)]})
    for i, (p50, sp) in enumerate(((140.0, concurrent_speedup), (160.0, 1.0),
                                   (145.0, concurrent_speedup)), 1):
        write(raw, f"stress_{i}.out", {"scenarios": {"concurrent": {
            "latency_us": {"p50": p50, "p99": 240.0}, "speedup_vs_serial": sp,
            "throughput_per_s": 1e4}}})
    write(raw, "desk_1.out", {"scenarios": {"concurrent": {
        "batching_gain": 5.2, "instrument_bars_per_s": 1e4,
        "single_instrument_bars_per_s": 2e3}}})
    write(raw, "budget.out", {"desk": {"asked_fits": True, "max_instruments": 100,
                                       "method": "fit", "predicted_error_pct": 3.0}})
    write(raw, "budget.step", {"rc": 0, "seconds": 31.0})
    write(raw, "ort.json", {"results": {
        "dqn/64": {"ratio": 0.79, "foxhunt_us": 79.0, "ort_us": 100.0},
        "ppo/64": {"ratio": 0.95, "foxhunt_us": 95.0, "ort_us": 100.0}}})
    if with_sb3:
        write(raw, "sb3.json", {"results": {"dqn": {
            "ratio": 0.2, "foxhunt_s": 2.0, "foxhunt_train_s": 1.5, "sb3_s": 10.0,
            "steps": 50000}}})
    return raw


def verdicts(tmp_path, **kw):
    raw = make_raw(tmp_path, **kw)
    fwd = report.forwards(str(raw), PEAK)
    tgts, _ = report.targets(str(raw), fwd)
    return fwd, {t["target"]: t for t in tgts}


def test_forwards_read_the_median_and_the_peak_of_their_precision(tmp_path):
    fwd, _ = verdicts(tmp_path)
    by = {(r["model"], r["precision"], r["batch"]): r for r in fwd}
    assert by[("dqn", "fp32", 64)]["real_us"] == 640.0  # the median, not the 999 us repetition
    assert abs(by[("tft", "fp32", 1)]["fraction"] - 3e7 / 1e4 / 250.0) < 1e-12
    int8 = by[("tft", "int8", 64)]
    # FLOPs: the FP32 TFT's batch-1 figure x 64, over CPU time, against the INT8 peak.
    assert abs(int8["gflops"] - 3e7 * 64 / 30e-3 / 1e9) < 1e-9
    assert abs(int8["fraction"] - int8["gflops"] / 1000.0) < 1e-12
    assert abs(int8["vs_fp32"] - 0.75) < 1e-12
    assert "avx512_bf16" in by[("mamba2", "bf16", 1)]["note"]
    assert "real_us" not in by[("mamba2", "bf16", 64)]  # not in the run: no figure


def test_targets_are_judged_against_their_bounds(tmp_path):
    _, t = verdicts(tmp_path)
    assert t["INT8 TFT batch 64 <= 0.8x FP32's time"]["met"] is True
    assert t["TFT BF16 batch 64 <= 0.6x FP32's time"]["met"] is False
    assert t["TFT BF16 batch 1 <= 1.0x FP32's time"]["met"] is None  # not measured
    assert t["Tape CSV parse >= 150 MB/s (one core)"]["met"] is True
    assert t["Bar building >= 10 M prints/s (one core, slowest bar type)"]["value"] == 9.0
    assert t["Bar building >= 10 M prints/s (one core, slowest bar type)"]["met"] is False
    # Median of three stress runs: p50 145 us, speedup 1.35x.
    assert t["One bar through four models p50 <= 150 us (stress concurrent)"]["value"] == 145.0
    assert t["Concurrent >= 1.3x serial"]["met"] is True
    assert t["64 instruments >= 5x one instrument's bar rate"]["met"] is True
    assert t["budget --instruments 500 <= 30 s"]["met"] is False
    assert t["DQN batch 64 <= 0.8x ONNX Runtime"]["met"] is True
    assert t["PPO batch 64 <= 0.9x ONNX Runtime"]["met"] is False
    assert t["CartPole DQN training <= 0.25x Stable-Baselines3's time"]["met"] is True


def test_a_median_below_the_bound_is_not_met(tmp_path):
    _, t = verdicts(tmp_path, concurrent_speedup=1.29)
    assert t["Concurrent >= 1.3x serial"]["met"] is False


def test_a_step_that_did_not_run_reads_na(tmp_path):
    _, t = verdicts(tmp_path, with_sb3=False)
    row = t["CartPole PPO training <= 0.25x Stable-Baselines3's time"]
    assert row["met"] is None and row["measured"] == "n/a"
    assert t["predict --ticks, E-mini tape, four models >= 1 M prints/s end to end"]["met"] is None


def test_main_writes_both_files(tmp_path, monkeypatch):
    raw = make_raw(tmp_path)
    (tmp_path / "peak.json").write_text(json.dumps(PEAK))
    monkeypatch.setenv("FOXHUNT_PEAK_JSON", str(tmp_path / "peak.json"))
    assert report.main([str(raw), str(tmp_path)]) == 0
    j = json.loads((tmp_path / "perf-figures.json").read_text())
    assert j["targets_total"] == len(j["targets"]) and j["peak"]["cpu"] == "test CPU"
    md = (tmp_path / "perf-figures.md").read_text()
    assert "## (a) Every forward" in md and "## (b) The targets of issue 48" in md
    assert "| tft | int8 | 64 | 30.00 ms |" in md


def test_the_script_checks_its_arguments():
    script = ROOT / "scripts" / "perf-figures.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    h = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert h.returncode == 0 and "--quick" in h.stdout and "--out" in h.stdout
    bad = subprocess.run([str(script), "--only", "nonsense"], capture_output=True, text=True)
    assert bad.returncode == 2 and "nonsense" in bad.stderr
