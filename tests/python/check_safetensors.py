#!/usr/bin/env python3
"""Cross-checks a safetensors file written by foxhunt (C++) with Python's safetensors and torch.

usage: check_safetensors.py CPP.safetensors EXPECTED.json [OUT.safetensors]

EXPECTED.json (written by SafetensorsTest.PythonReadsTheFile):
  {"metadata": {str: str},
   "tensors": {name: {"dtype": "F32", "shape": [..], "hex": raw little-endian bytes as hex}},
   "dqn": {"input": [[float]], "output": [[float]]}}

Checks that safetensors.torch.load_file accepts the file (the reference implementation validates
the header, offsets and data section), that every tensor has the expected dtype, shape and bytes,
that the metadata matches, and that the DQN rebuilt in PyTorch from the weights by name
(q.fc0 -> ReLU -> q.fc1 -> ReLU -> ... -> q.fcN, see src/models/mlp.cpp) gives the C++ output
(max abs diff <= 1e-5: BLAS kernels may sum in another order). With OUT, writes the loaded tensors back with safetensors' save_file (its
own ordering and alignment) for the C++ side to read. Exits 0 when everything matches, 1 if not.
"""
import json
import re
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def raw_bytes(t: torch.Tensor) -> bytes:
    return bytes(t.contiguous().reshape(-1).view(torch.uint8).tolist())


def dqn_forward(tensors: dict, x: torch.Tensor) -> torch.Tensor:
    layers = sorted(
        int(m.group(1)) for m in (re.fullmatch(r"q\.fc(\d+)\.weight", k) for k in tensors) if m
    )
    if not layers or layers != list(range(len(layers))):
        raise SystemExit(f"expected DQN layers q.fc0 .. q.fcN, got {layers}")
    for i in layers:
        x = torch.nn.functional.linear(x, tensors[f"q.fc{i}.weight"], tensors[f"q.fc{i}.bias"])
        if i + 1 < len(layers):
            x = torch.relu(x)
    return x


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    path, expected_path = sys.argv[1], sys.argv[2]
    with open(expected_path) as f:
        expected = json.load(f)
    torch.set_num_threads(1)

    errors = []
    tensors = load_file(path)
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata() or {}
    if metadata != expected["metadata"]:
        errors.append(f"metadata: expected {expected['metadata']}, got {metadata}")
    want = expected["tensors"]
    if set(tensors) != set(want):
        errors.append(f"names: expected {sorted(want)}, got {sorted(tensors)}")
    for name, w in want.items():
        t = tensors.get(name)
        if t is None:
            continue
        if t.dtype != DTYPES[w["dtype"]]:
            errors.append(f"{name}: expected dtype {w['dtype']}, got {t.dtype}")
        elif list(t.shape) != w["shape"]:
            errors.append(f"{name}: expected shape {w['shape']}, got {list(t.shape)}")
        elif raw_bytes(t).hex() != w["hex"]:
            errors.append(f"{name}: bytes differ from what C++ wrote")

    dqn = expected["dqn"]
    x = torch.tensor(dqn["input"], dtype=torch.float32)
    want_q = torch.tensor(dqn["output"], dtype=torch.float32)
    with torch.no_grad():
        q = dqn_forward(tensors, x)
    diff = (q.double() - want_q.double()).abs().max().item()
    if q.shape != want_q.shape or diff > 1e-5:
        errors.append(f"dqn forward: expected max abs diff <= 1e-5, got {diff} ({list(q.shape)})")

    if len(sys.argv) == 4:
        save_file(tensors, sys.argv[3], metadata=metadata)

    for e in errors:
        print(f"[check_safetensors] {path}: {e}", file=sys.stderr)
    print(
        f"[check_safetensors] {len(tensors)} tensors, {len(metadata)} metadata keys, "
        f"dqn max abs diff {diff:.3g}: {'FAIL' if errors else 'ok'}",
        file=sys.stderr,
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
