"""foxhunt from Python: the C++ serving runtime, planner, budget and training jobs.

Research and production share one code path: the decisions below are computed by the same C++
ensemble that `foxhunt predict` runs (tests/python/test_module.py checks they are identical).

    import foxhunt
    summary = foxhunt.train("all", data="spx.csv", out="models/spx")
    ens = foxhunt.Ensemble("models/spx")
    out = ens.run(foxhunt.read_bars("live.csv"))   # numpy arrays
    out["decision"], out["signals"]["tft"]
    foxhunt.plan("tft", device_profile="rtx3050ti-4gb")["chosen_batch"]
    # A tape of trade prints: bars (with their flow columns), training, decisions per bar.
    bars = foxhunt.read_tape_bars("tick_data.csv", bar="time:1m")
    foxhunt.train("all", ticks="tick_data.csv", bar="time:1m", out="models/es")
    foxhunt.Ensemble("models/es").run_tape("tick_data.csv")  # the bundles' recorded spec
    foxhunt.budget()["ok"]

Errors: ValueError for bad input (what was expected, what was received), MemoryError for a
refused allocation under an enforced budget, RuntimeError otherwise.
"""
import csv
import json
import math

import numpy as np

from . import _foxhunt

__version__ = _foxhunt.version()

_COLUMNS = ("timestamp", "open", "high", "low", "close", "volume")


def _column(bars, name, n, default=None):
    if name in bars and bars[name] is not None:
        col = np.asarray(bars[name])
    elif default is not None:
        col = np.asarray(default)
    else:
        raise ValueError(f"bars: expected a '{name}' column")
    if col.shape != (n,):
        raise ValueError(f"bars['{name}']: expected {n} values, got shape {col.shape}")
    return col


def _bar_columns(bars):
    """(timestamp int64, open, high, low, close, volume) from a dict-like of columns: open,
    high and low default to close, volume to 0. Timestamps are Unix seconds."""
    close = np.asarray(bars["close"], dtype=np.float64)
    n = close.shape[0]
    ts = _column(bars, "timestamp", n).astype(np.int64)
    o = _column(bars, "open", n, close).astype(np.float64)
    h = _column(bars, "high", n, close).astype(np.float64)
    lo = _column(bars, "low", n, close).astype(np.float64)
    v = _column(bars, "volume", n, np.zeros(n)).astype(np.float64)
    return ts, o, h, lo, close, v


def read_bars(path):
    """A bars CSV written by `foxhunt data generate` (Unix-second timestamps) as numpy columns.
    Other formats: load them yourself (pandas) and pass the columns."""
    cols = {c: [] for c in _COLUMNS}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            for c in _COLUMNS:
                cols[c].append(float(row[c]) if c != "timestamp" else int(row[c]))
    return {c: np.asarray(v) for c, v in cols.items()}


_INT_COLUMNS = ("timestamp", "prints", "start_ns", "end_ns")


def _tape_columns(cols):
    return {k: np.asarray(v, dtype=np.int64 if k in _INT_COLUMNS else np.float64)
            for k, v in cols.items()}


def read_tape_bars(path, bar, on_bad="refuse"):
    """The bars of a tape of trade prints (`foxhunt data bars --ticks PATH --bar BAR`): the
    bar spec ("time:1m", "tick:500", "volume:1000", "dollar:5e6") and numpy columns timestamp,
    open, high, low, close, volume and the flow columns vwap, prints, buy_volume, sell_volume,
    duration (s), realized_variance, start_ns, end_ns. A tape with a symbol column gives
    {"symbols": {name: columns}} (time bars only). on_bad: "refuse" or "drop" bad prints."""
    j = json.loads(_foxhunt.tape_bars(str(path), bar, on_bad))
    if "bars" in j:
        j["bars"] = _tape_columns(j["bars"])
    else:
        j["symbols"] = {s: _tape_columns(c) for s, c in j["symbols"].items()}
    return j


def _decisions_to_arrays(items, models):
    n = len(items)
    out = {
        "timestamp": np.array([d["timestamp"] for d in items], dtype=np.int64),
        "decision": np.array([d["decision"] for d in items], dtype=np.float64),
        "position": np.array([d["position"] for d in items], dtype=np.float64),
        "latency_us": np.array([d["latency_us"] for d in items], dtype=np.float64),
        "signals": {},
    }
    for m in models:
        sig = np.full(n, math.nan)
        for i, d in enumerate(items):
            s = d["signals"].get(m)
            if s is not None:
                sig[i] = s
        out["signals"][m] = sig  # NaN while the model warms up
    return out


class Ensemble:
    """The four-model ensemble on one instrument (what `foxhunt predict` runs).

    `rule`: the decision rule as a dict (the JSON form of `--rule`); None uses DIR/rule.json,
    the weights `train all` fitted on its validation split, else the built-in rule.
    """

    def __init__(self, bundles, device="cpu", rule=None):
        self._e = _foxhunt.Ensemble(str(bundles), device, json.dumps(rule) if rule else "")
        self.models = list(self._e.models())

    def run(self, bars):
        """Feeds the bars in time order (continuing from earlier calls). `bars`: a dict-like of
        numpy columns (timestamp, close; open, high, low, volume optional). Returns numpy
        arrays: timestamp, decision (target position in [-1, 1]), position, latency_us and
        signals {model: array} (NaN during warm-up)."""
        items = json.loads(self._e.run(*_bar_columns(bars)))
        return _decisions_to_arrays(items, self.models)

    def run_tape(self, path, bar=None, on_bad="refuse"):
        """A tape of trade prints through the ensemble as `foxhunt predict --ticks` serves it:
        bars built as the prints are read, a decision each time one closes. `bar`: None for the
        bundles' recorded spec (bundles trained on plain bars need one); another spec is a
        ValueError. Returns the arrays of run() plus close_print_ns (the print that closed each
        bar) and print_to_decision_ns (from its line being read to the decision)."""
        items = json.loads(self._e.run_tape(str(path), bar or "", on_bad))
        out = _decisions_to_arrays(items, self.models)
        out["close_print_ns"] = np.array([d["close_print_ns"] for d in items], dtype=np.int64)
        out["print_to_decision_ns"] = np.array([d["print_to_decision_ns"] for d in items],
                                               dtype=np.int64)
        return out

    @property
    def bar_spec(self):
        """The bar spec the bundles were trained on ("" for plain bars)."""
        return self._e.bar_spec()

    def on_bar(self, timestamp, close, open=None, high=None, low=None, volume=0.0):
        """One bar; returns its decision as a dict (the JSON of `predict --json`)."""
        o = close if open is None else open
        h = max(o, close) if high is None else high
        lo = min(o, close) if low is None else low
        return json.loads(self._e.run([int(timestamp)], [o], [h], [lo], [close], [volume]))[0]

    @property
    def position(self):
        return self._e.position()


class Desk:
    """Many instruments through one set of models, batched across instruments.

    `rule`: as for Ensemble (None: DIR/rule.json, else the built-in rule).
    """

    def __init__(self, bundles, device="cpu", rule=None):
        self._d = _foxhunt.Desk(str(bundles), device, json.dumps(rule) if rule else "")

    def on_timestamp(self, timestamp, symbols, close, open=None, high=None, low=None,
                     volume=None):
        """The bars of one timestamp (one per symbol); returns one dict per symbol (the JSON of
        `predict --json` on a panel, with its "symbol")."""
        close = np.asarray(close, dtype=np.float64)
        o = close if open is None else np.asarray(open, dtype=np.float64)
        h = np.maximum(o, close) if high is None else np.asarray(high, dtype=np.float64)
        lo = np.minimum(o, close) if low is None else np.asarray(low, dtype=np.float64)
        v = np.zeros_like(close) if volume is None else np.asarray(volume, dtype=np.float64)
        return json.loads(self._d.on_timestamp(int(timestamp), list(symbols), o, h, lo, close, v))

    @property
    def instruments(self):
        return self._d.instruments()

    @property
    def state_bytes(self):
        return self._d.state_bytes()


def plan(model, device="cpu", device_profile="rtx3050ti-4gb", budget_mib=None, seq_len=0):
    """The largest verified training batch within a budget (`foxhunt plan --json`) as a dict."""
    return json.loads(_foxhunt.plan(model, device, device_profile or "", budget_mib or 0.0,
                                    int(seq_len)))


def budget(device="cpu", device_profile="rtx3050ti-4gb", budget_mib=None, headroom_mib=None,
           views=True):
    """Every model's measured footprint against the budget (`foxhunt budget --json`)."""
    return json.loads(_foxhunt.budget(device, device_profile or "", budget_mib or 0.0,
                                      -1.0 if headroom_mib is None else float(headroom_mib),
                                      bool(views)))


def train(model, data="", out="", steps=0, epochs=0, seed=None, device="cpu", env="",
          eval_episodes=20, ticks="", bar="", periods_per_year=None):
    """`foxhunt train MODEL` (or "all") as a function: returns the summary dict. 0 steps or
    epochs: the trainer's defaults; env "trading" trains an RL model on `data`. `ticks`: a tape
    of trade prints instead of `data`, its bars built with `bar` (recorded in the bundles).
    `periods_per_year`: bars per year (None: inferred from the bars' sessions or span)."""
    return json.loads(_foxhunt.train(model, str(data or ""), str(out or ""), int(steps),
                                     int(epochs), -1 if seed is None else int(seed), device,
                                     env, int(eval_episodes), str(ticks or ""), bar or "",
                                     float(periods_per_year or 0.0)))
