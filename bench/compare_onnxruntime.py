#!/usr/bin/env python3
"""foxhunt's C++ forward against ONNX Runtime on the same networks: same weights, same inputs,
outputs compared, timed alternately with the same statistic.

  .venv/bin/python bench/compare_onnxruntime.py [--build DIR] [--threads N] [--min-time S]
                                                [--out FILE] [--models dqn,ppo,...] [--check-only]
                                                [--opset N]

ONNX Runtime is what a user would pick to serve these networks instead of foxhunt
(`pip install onnxruntime==1.31.1`, installed by scripts/setup.sh into .venv).

1. `DIR/models_bench --export TMP` writes each model's weights, the example inputs the C++
   forward benchmarks time and the C++ outputs for them, at batch 1 and 64 (as for
   compare_python.py, whose code this script shares).
2. The PyTorch replica (bench/torch_models.py) is exported to ONNX once per batch, with the
   example's static shapes (so ORT may specialise its graph for the shape it is timed at), by
   torch.onnx's TorchScript exporter at --opset (default 17).
3. An ORT session per model and batch: CPUExecutionProvider, intra_op_num_threads = --threads,
   inter_op_num_threads = 1, sequential execution, every graph optimisation on. Its outputs must
   match the C++ outputs: max over elements of |ort - cpp| / max(1, |cpp|) <= 1e-5 (ORT fuses
   layer norms and GEMMs, so a few ulps differ; the max absolute difference is reported). A
   mismatch makes the exit code 1.
4. (not with --check-only) per model, alternating: C++ first (models_bench, both batches, as in
   compare_python.py), then ORT (both batches). The ORT call is `run_with_iobinding` on inputs and
   outputs bound once (no per-call numpy allocation): the least Python can add to an ORT call.
   That remainder is measured too: the same timing of a one-node Identity graph on the same
   inputs ("ORT floor"), reported so a reader can see how much of a small model's figure is the
   Python binding rather than the engine. The verdict uses the full ORT figure.

Timing: R = 5 timed blocks of at least min-time / R seconds each; a block's figure is its mean
wall time per call; the reported figure is the MEDIAN of the R block means, in microseconds (the
statistic of compare_python.py on both sides).

The table: model, batch, foxhunt us, ORT us, ratio (foxhunt / ORT: below 1 is foxhunt faster),
ORT floor us, max abs diff, verdict. A report, not a gate: exit 0 unless an output check or a
program fails (1); bad usage exits 2; --check-only with FOXHUNT_NO_PYTHON=1 exits 77 (skipped).
The JSON (--out, default BUILD/compare-onnxruntime.json in the --build directory, which git
ignores) is written atomically.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import warnings

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compare_python as cp  # noqa: E402  (after the path insert)

ORT_PIN = "1.31.1"
DEFAULT_OUT = "compare-onnxruntime.json"


def log(msg: str) -> None:
    print(f"[compare_onnxruntime] {msg}", file=sys.stderr, flush=True)


def parse_args(argv):
    p = cp.new_parser("compare_onnxruntime.py", "ONNX Runtime (exported to ONNX)", DEFAULT_OUT)
    p.add_argument("--opset", default="17", metavar="N",
                   help="ONNX opset of the export (default 17)")
    a = p.parse_args(argv)
    try:
        a.opset = int(a.opset)
        if not 13 <= a.opset <= 20:
            raise ValueError
    except ValueError:
        p.error(f"--opset: expected an integer in [13, 20], got '{a.opset}'")
    return cp.check_common_args(a, p, DEFAULT_OUT)


def import_ort():
    try:
        import onnx  # noqa: F401  (the exporter needs it)
        import onnxruntime
    except ImportError as e:
        raise cp.Failure(f"{e.name} is not installed: scripts/setup.sh installs onnxruntime=="
                         f"{ORT_PIN} and onnx into .venv")
    return onnxruntime


def export_onnx(torch, module, inputs, names_in, names_out, path, opset):
    """The eager module traced at these inputs' shapes into an ONNX file."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and trace notes
        torch.onnx.export(module, tuple(inputs), path, dynamo=False, opset_version=opset,
                          input_names=list(names_in), output_names=list(names_out),
                          do_constant_folding=True)


def identity_onnx(path, inputs, opset):
    """A graph of one Identity node per input: what ORT's Python call costs with no work."""
    import onnx
    from onnx import TensorProto, helper
    kinds = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64}
    ins, outs, nodes = [], [], []
    for i, x in enumerate(inputs):
        t = kinds[str(x.dtype).replace("torch.", "")]
        ins.append(helper.make_tensor_value_info(f"in{i}", t, list(x.shape)))
        outs.append(helper.make_tensor_value_info(f"out{i}", t, list(x.shape)))
        nodes.append(helper.make_node("Identity", [f"in{i}"], [f"out{i}"]))
    graph = helper.make_graph(nodes, "identity", ins, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # what opset 17 needs; the onnx package may default past ORT's reader
    onnx.save(model, path)


class OrtCall:
    """An ORT session over one set of inputs, bound once. Calling it runs the session and
    returns the outputs as torch tensors (for the output check); `run` is the timed call."""

    def __init__(self, ort, torch, path, inputs, threads):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.torch = torch
        self.session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        names = [i.name for i in self.session.get_inputs()]
        if len(names) != len(inputs):
            # the tracer drops an input the graph does not use: a replica that ignores an input
            raise cp.Failure(f"{path}: the ONNX graph takes {len(names)} inputs {names}, the model "
                             f"{len(inputs)}")
        self.arrays = [x.contiguous().numpy() for x in inputs]  # kept alive: bound by address
        self.binding = self.session.io_binding()
        for name, arr in zip(names, self.arrays):
            self.binding.bind_cpu_input(name, arr)
        for o in self.session.get_outputs():
            self.binding.bind_output(o.name, "cpu")
        self.run()  # first call: allocates the outputs

    def run(self):
        self.session.run_with_iobinding(self.binding)

    def __call__(self, *unused):
        self.run()
        return tuple(self.torch.from_numpy(o) for o in self.binding.copy_outputs_to_cpu())


def build_sessions(ort, torch, torch_models, models, loaded, tmp, a):
    """{model: {batch: (model call, identity call)}}."""
    sessions = {}
    for m in models:
        _, module, examples = loaded[m]
        sessions[m] = {}
        for b in cp.BATCHES:
            ins = examples[b][0]
            path = os.path.join(tmp, f"{m}.b{b}.onnx")
            t = time.perf_counter()
            export_onnx(torch, module, ins, torch_models.INPUT_NAMES[m],
                        torch_models.OUTPUT_NAMES[m], path, a.opset)
            floor_path = os.path.join(tmp, f"{m}.b{b}.identity.onnx")
            identity_onnx(floor_path, ins, a.opset)
            sessions[m][b] = (OrtCall(ort, torch, path, ins, a.threads),
                              OrtCall(ort, torch, floor_path, ins, a.threads))
            log(f"{m}/{b}: exported and loaded in {time.perf_counter() - t:.1f} s")
    return sessions


def main(argv) -> int:
    a = parse_args(argv)
    t0 = time.perf_counter()
    setup = cp.prepare(a)
    if isinstance(setup, int):
        return setup
    torch, binary, binary_stamp, models, loaded, started = setup
    ort = import_ort()
    import torch_models

    with tempfile.TemporaryDirectory(prefix="foxhunt-onnx-") as tmp:
        sessions = build_sessions(ort, torch, torch_models, models, loaded, tmp, a)
    checks = {}
    for m in models:
        examples = loaded[m][2]
        checks[m] = {}
        for b in cp.BATCHES:
            try:
                checks[m].update(cp.compare_outputs(torch, sessions[m][b][0], {b: examples[b]}))
            except cp.Failure as e:
                raise cp.Failure(f"[{m}] {e}")
    check_s = time.perf_counter() - t0

    timings = {}
    cpp_context = None
    if not a.check_only:
        for m in models:
            log(f"{m}: C++")
            cpp, ctx = cp.time_cpp(binary, m, a.threads, a.min_time)
            cpp_context = cpp_context or ctx
            log(f"{m}: ONNX Runtime")
            ortt = {b: cp.time_python(torch, sessions[m][b][0].run, (), a.min_time)
                    for b in cp.BATCHES}
            floor = {b: cp.time_python(torch, sessions[m][b][1].run, (), a.min_time / 4)
                     for b in cp.BATCHES}
            timings[m] = (cpp, ortt, floor)

    rebuilt = cp.file_stamp(binary) != binary_stamp
    if rebuilt:
        log(f"WARNING: {binary} changed during the run (rebuilt?): the figures may mix two builds")

    rows = []
    for m in models:
        for b in cp.BATCHES:
            c = checks[m][b]
            row = {"model": m, "batch": b, "check_ok": c["max_rel_diff"] <= cp.TOLERANCE,
                   "max_abs_diff": c["max_abs_diff"], "max_rel_diff": c["max_rel_diff"],
                   "outputs": c["outputs"]}
            if m in timings:
                cpp, ortt, floor = (t[b] for t in timings[m])
                row.update({"foxhunt_us": cpp["us"], "ort_us": ortt["us"],
                            "ratio": cpp["us"] / ortt["us"], "ort_floor_us": floor["us"],
                            "foxhunt": cpp, "ort": ortt, "ort_floor": floor})
                row["verdict"] = cp.verdict(row["ratio"])
            rows.append(row)

    print(f"threads {a.threads}, onnxruntime {ort.__version__}, torch {torch.__version__}, "
          f"opset {a.opset}, {cp.cpu_model()}"
          + ("" if a.check_only else f", min-time {a.min_time:g} s per side and case, median of "
             f"{cp.REPEATS} block means"))
    cp.print_table(rows, not a.check_only, "ORT", ("ORT floor", "ort_floor_us"))
    method = (f"median of {cp.REPEATS} block means per call (us); C++: Google Benchmark "
              f"repetitions of min_time/{cp.REPEATS} s, real_time; ORT: run_with_iobinding on "
              f"inputs and outputs bound once, blocks of calls_per_block calls after warm-up, gc "
              f"off; ort_floor: the same on a one-Identity-node graph")
    bad = cp.finish(a, rows, "ort", "ONNX Runtime", check_s, torch, binary, binary_stamp, rebuilt,
                    cpp_context, started, loaded, models, method,
                    {"onnxruntime_version": ort.__version__, "opset": a.opset})
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except cp.Failure as e:
        log(f"FAILED: {e}")
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
