"""The statistics of bench/rl_seeds.py: the interquartile mean and its bootstrap interval."""
import importlib.util
import pathlib

spec = importlib.util.spec_from_file_location(
    "rl_seeds", pathlib.Path(__file__).resolve().parents[2] / "bench" / "rl_seeds.py")
rl_seeds = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rl_seeds)


def test_iqm_drops_the_outer_quarters():
    # Eight runs: the middle four (3, 4, 5, 6) remain.
    assert rl_seeds.iqm([1, 2, 3, 4, 5, 6, 7, 100]) == 4.5
    # Five runs: quarters of 1.25 runs; the middle 2.5 runs are 0.75 * 2 + 3 + 0.75 * 4.
    assert abs(rl_seeds.iqm([1, 2, 3, 4, 5]) - 3.0) < 1e-12
    assert abs(rl_seeds.iqm([0, 0, 0, 10, 1000]) - (0.75 * 0 + 0 + 0.75 * 10) / 2.5) < 1e-12
    # An outlier does not move it, unlike the mean.
    assert rl_seeds.iqm([5, 5, 5, 5, 1e9]) == 5


def test_bootstrap_interval_brackets_the_iqm_and_is_seeded():
    runs = [10.0, 12.0, 9.0, 30.0, 11.0, 10.5, 9.5]
    lo, hi = rl_seeds.bootstrap_interval(runs, rl_seeds.iqm)
    assert lo <= rl_seeds.iqm(runs) <= hi
    assert lo >= min(runs) and hi <= max(runs)
    assert (lo, hi) == rl_seeds.bootstrap_interval(runs, rl_seeds.iqm)
    assert rl_seeds.bootstrap_interval([3.0] * 5, rl_seeds.iqm) == (3.0, 3.0)
