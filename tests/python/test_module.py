"""The foxhunt Python module against the CLI: the same bars give identical decisions (one code
path for research and production), the desk on a panel, plan/budget/train as dicts, and errors
as Python exceptions. Run by ctest (Python.ModuleMatchesTheCli) with PYTHONPATH at the built
module and FOXHUNT_CLI at the CLI."""
import csv
import json
import math
import os
import subprocess

import numpy as np
import pytest

import foxhunt

CLI = os.environ["FOXHUNT_CLI"]


def cli(*args):
    return subprocess.run([CLI, *map(str, args)], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("foxhunt")
    cli("data", "generate", "--bars", "1500", "--seed", "3", "--out", d / "train.csv")
    summary = foxhunt.train("all", data=d / "train.csv", out=d / "b", steps=256, epochs=1,
                            eval_episodes=0)
    assert summary["complete"], summary
    for seed, name in ((4, "live.csv"), (5, "other.csv")):
        cli("data", "generate", "--bars", "400", "--seed", seed, "--start", 1800000000,
            "--out", d / name)
    return d


# Briefly trained bundles give tiny signals: without a dead band, and with the forecasters taking
# their full size at a small edge, the decisions move, so that comparing them compares something.
# The default rule ("distribution", serving.h) sizes a forecaster's signal by full_edge (its gain
# is 1 / full_edge); forecast_gain is read only by the older "median" rule.
RULE = {"dead_band": 0.0, "full_edge": 0.02}


def cli_decisions(bundles, data, rule_file=None):
    args = ["predict", "--bundles", bundles, "--data", data, "--json"]
    if rule_file:
        args += ["--rule", rule_file]
    return [json.loads(line) for line in cli(*args).splitlines()]


def test_python_and_cli_give_identical_decisions(work):
    rule_file = work / "rule.json"
    rule_file.write_text(json.dumps(RULE))
    ens = foxhunt.Ensemble(work / "b", rule=RULE)
    assert ens.models == ["dqn", "ppo", "mamba2", "tft"]
    got = ens.run(foxhunt.read_bars(work / "live.csv"))
    ref = cli_decisions(work / "b", work / "live.csv", rule_file)
    assert len(got["decision"]) == len(ref) == 400
    assert np.count_nonzero(got["decision"]) > 100          # positions are taken
    assert np.count_nonzero(np.diff(got["decision"])) > 100  # and changed
    np.testing.assert_array_equal(got["decision"], [d["decision"] for d in ref])
    np.testing.assert_array_equal(got["timestamp"], [d["timestamp"] for d in ref])
    for m in ens.models:
        want = [math.nan if d["signals"][m] is None else d["signals"][m] for d in ref]
        np.testing.assert_array_equal(got["signals"][m], want)
    # The gain took effect: the forecasters' signals are larger than under the default full_edge
    # (0.1), five times so where neither is clipped at the full size.
    default_edge = foxhunt.Ensemble(work / "b", rule={"dead_band": 0.0}).run(
        foxhunt.read_bars(work / "live.csv"))
    for m in ("mamba2", "tft"):
        big, small = np.asarray(got["signals"][m]), np.asarray(default_edge["signals"][m])
        ready = ~np.isnan(big)
        assert np.count_nonzero(ready) > 50, m
        larger = np.abs(big[ready]) > np.abs(small[ready]) + 1e-12
        assert 2 * np.count_nonzero(larger) > np.count_nonzero(ready), m
        assert np.all(np.abs(big[ready]) >= np.abs(small[ready]) - 1e-12), m
    # Warm-up: NaN signals, then every model ready.
    assert math.isnan(got["signals"]["tft"][0]) and not math.isnan(got["signals"]["tft"][-1])
    assert abs(ens.position - got["decision"][-1]) < 1e-15


def test_desk_equals_predict_on_a_panel(work):
    a, b = foxhunt.read_bars(work / "live.csv"), foxhunt.read_bars(work / "other.csv")
    panel = work / "panel.csv"
    with open(panel, "w") as f:
        f.write("timestamp,symbol,open,high,low,close,volume\n")
        for i in range(len(a["close"])):
            for sym, s in (("AAA", a), ("BBB", b)):
                f.write(",".join([str(s["timestamp"][i]), sym] +
                                 [repr(float(s[c][i])) for c in ("open", "high", "low", "close",
                                                                 "volume")]) + "\n")
    rule_file = work / "rule.json"
    rule_file.write_text(json.dumps(RULE))
    ref = {(d["timestamp"], d["symbol"]): d["decision"]
           for d in cli_decisions(work / "b", panel, rule_file)}
    assert sum(1 for v in ref.values() if v != 0) > 100
    desk = foxhunt.Desk(work / "b", rule=RULE)
    got = {}
    for i in range(len(a["close"])):
        cols = {c: [a[c][i], b[c][i]] for c in ("open", "high", "low", "close", "volume")}
        for d in desk.on_timestamp(int(a["timestamp"][i]), ["AAA", "BBB"], **cols):
            got[(d["timestamp"], d["symbol"])] = d["decision"]
    assert got == ref
    assert desk.instruments == 2 and desk.state_bytes > 0


def test_plan_budget_and_errors():
    p = foxhunt.plan("dqn", budget_mib=1024)
    assert p["model"] == "dqn" and p["verified"] and p["chosen_batch"] >= 1
    assert p["budget_bytes"] == 1024 * 1024 * 1024
    b = foxhunt.budget(views=False)
    assert [r["model"] for r in b["models"]] == ["dqn", "ppo", "mamba2", "tft"]
    assert b["ok"] is True
    with pytest.raises(ValueError, match="bundle"):
        foxhunt.Ensemble("/nowhere")
    with pytest.raises(ValueError, match="device"):
        foxhunt.plan("dqn", device="gpu")
    with pytest.raises(ValueError):
        foxhunt.plan("nope")
    with pytest.raises(MemoryError):
        foxhunt.plan("tft", budget_mib=0.01)


def test_bad_bars_are_value_errors(work):
    ens = foxhunt.Ensemble(work / "b")
    with pytest.raises(ValueError, match="equal length"):
        ens._e.run([1, 2], [1.0], [1.0], [1.0], [1.0], [1.0])
    with pytest.raises(ValueError):
        ens.on_bar(1800000000, close=float("nan"))


def write_tape(path, minutes=360, seed=7):
    """A one-instrument tape: 4 prints a minute from 2027-01-15 14:30 UTC, some repeated."""
    rng = np.random.default_rng(seed)
    price, lines = 100.0, ["timestamp,price,size"]
    t0 = 1800000000 * 10**9
    for m in range(minutes):
        for k in range(4):
            t = t0 + (m * 60 + k * 15) * 10**9 + int(rng.integers(0, 1000)) * 10**6
            price = round(price * math.exp(5e-4 * rng.standard_normal()), 2)
            line = f"{t},{price},{int(rng.integers(1, 10))}"
            lines.append(line)
            if rng.integers(0, 5) == 0:
                lines.append(line)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_tape_bars_and_run_tape_match_the_cli(work):
    tape = write_tape(work / "tape.csv")
    bars = foxhunt.read_tape_bars(tape, bar="time:1m")
    assert bars["spec"] == "time:1m" and len(bars["bars"]["close"]) == 360
    cli("data", "bars", "--ticks", tape, "--bar", "time:1m", "--out", work / "tape_bars.csv")
    with open(work / "tape_bars.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    np.testing.assert_array_equal(bars["bars"]["close"], [float(r["close"]) for r in rows])
    np.testing.assert_array_equal(bars["bars"]["prints"], [int(r["prints"]) for r in rows])
    np.testing.assert_array_equal(bars["bars"]["start_ns"], [int(r["start_ns"]) for r in rows])
    # The bundles trained on plain bars record no spec: run_tape needs one, then equals the CLI.
    ens = foxhunt.Ensemble(work / "b", rule=RULE)
    assert ens.bar_spec == ""
    with pytest.raises(ValueError, match="record no bar spec"):
        ens.run_tape(tape)
    got = ens.run_tape(tape, bar="time:1m")
    rule_file = work / "rule_tape.json"
    rule_file.write_text(json.dumps(RULE))
    want = [json.loads(line) for line in cli("predict", "--bundles", work / "b", "--ticks", tape,
                                             "--bar", "time:1m", "--rule", rule_file,
                                             "--json").splitlines()]
    assert len(got["decision"]) == len(want) == 360
    np.testing.assert_array_equal(got["decision"], [d["decision"] for d in want])
    np.testing.assert_array_equal(got["close_print_ns"], [d["close_print_ns"] for d in want])
    assert np.all(got["print_to_decision_ns"] >= 0)
