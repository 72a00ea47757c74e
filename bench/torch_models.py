#!/usr/bin/env python3
"""PyTorch-eager re-implementations of the four foxhunt models' inference forward.

The networks mirror the LibTorch modules of src/models/{dqn,ppo,mamba2,tft}.cpp op for op (same
ATen ops in the same order wherever the order can change the rounding), in eval mode (no
dropout), so that a benchmark can time them in PyTorch with the weights exported from C++.

Weights file: ``DIR/<name>.safetensors`` with every named parameter/buffer of the LibTorch module
under its LibTorch name ("q.fc0.weight", "blocks.0.mixer.in_proj.weight", ...), the metadata
"model", "options" (JSON), "inputs" and "outputs" (JSON lists), and example tensors
"input.b<B>.<i>" / "output.b<B>.<i>" (C++ forward outputs in eval + inference mode). Example
keys are recognised by that full pattern only: the TFT's own "output.weight" / "output.bias" are
parameters.

API:
  build(name, options, tensors) -> eval-mode nn.Module; forward(*inputs) returns a tuple of
      outputs in the C++ order (dqn: (q,), ppo: (logits, value), mamba2: (quantiles,),
      tft: (quantiles,)).
  load(path) -> (name, options, module, examples), examples = {batch: (inputs, outputs)}.
  verify(path) -> max abs difference per example batch and output (see the CLI).

CLI:
  python3 bench/torch_models.py              self-test on random weights (no C++ needed)
  python3 bench/torch_models.py DIR|FILE...  check the Python forward against the C++ examples
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["MODEL_NAMES", "DEFAULTS", "INPUT_NAMES", "OUTPUT_NAMES", "resolve_options", "create",
           "build", "load", "verify", "example_inputs"]

MODEL_NAMES = ("dqn", "ppo", "mamba2", "tft")

# The C++ defaults (include/foxhunt/models/{dqn,ppo,mamba2,tft}.h), every field.
DEFAULTS: Dict[str, dict] = {
    "dqn": {"state_dim": 256, "hidden": [128, 64], "actions": 3},
    "ppo": {"state_dim": 256, "hidden": [128, 64], "actions": 3, "orthogonal_init": True},
    "mamba2": {"input_dim": 32, "d_model": 64, "d_state": 16, "n_layers": 2, "expand": 2,
               "headdim": 16, "ngroups": 1, "d_conv": 4, "chunk_size": 16, "window": 32,
               "horizon": 1, "quantiles": [0.1, 0.5, 0.9]},
    "tft": {"past_features": 225, "future_features": 4, "static_categories": 16, "hidden": 32,
            "heads": 4, "lstm_layers": 2, "dropout": 0.1, "window": 60, "horizon": 5,
            "quantiles": [0.1, 0.5, 0.9], "real_embedding": 8},
}

# The registry adapters' I/O names (IoSpec: policy_spec / forecaster_spec in src/models/spec.cpp).
INPUT_NAMES = {"dqn": ["state"], "ppo": ["state"], "mamba2": ["x"],
               "tft": ["past", "future", "static_id"]}
OUTPUT_NAMES = {"dqn": ["q"], "ppo": ["logits", "value"], "mamba2": ["quantiles"],
                "tft": ["quantiles"]}

# Closed-form parameter counts of the defaults, from the C++ headers (self-test cross-check).
DEFAULT_PARAMETER_COUNTS = {"dqn": 41_347, "ppo": 82_564, "mamba2": 58_675, "tft": 807_564}


def resolve_options(name: str, options: Optional[dict] = None) -> dict:
    """The C++ defaults of `name` with the keys of `options` applied; unknown keys raise."""
    if name not in DEFAULTS:
        raise ValueError(f"unknown model '{name}', expected one of {list(MODEL_NAMES)}")
    if isinstance(options, str):
        options = json.loads(options)
    options = dict(options or {})
    unknown = sorted(set(options) - set(DEFAULTS[name]))
    if unknown:
        raise ValueError(f"[{name}] unknown option keys {unknown}; known: {list(DEFAULTS[name])}")
    out = json.loads(json.dumps(DEFAULTS[name]))  # deep copy
    out.update(options)
    return out


# ================================================================================================
# DQN / PPO: MLPs (src/models/mlp.cpp)
# ================================================================================================


class Mlp(nn.Module):
    """in -> hidden... -> out, Linear layers "fc0", "fc1", ..., activation between layers."""

    def __init__(self, in_features: int, hidden: Sequence[int], out: int, activation: str):
        super().__init__()
        widths = list(hidden) + [out]
        self.n = len(widths)
        self.act = torch.relu if activation == "relu" else torch.tanh
        prev = in_features
        for i, w in enumerate(widths):
            self.add_module(f"fc{i}", nn.Linear(prev, w))
            prev = w
        self.layers = [getattr(self, f"fc{i}") for i in range(self.n)]  # plain list: no renaming

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        last = self.n - 1
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < last:
                x = self.act(x)
        return x


class DqnNet(nn.Module):
    """DqnNetImpl: state [B, state_dim] -> (q [B, actions],)."""

    def __init__(self, o: dict):
        super().__init__()
        self.options = o
        self.q = Mlp(o["state_dim"], o["hidden"], o["actions"], "relu")

    def forward(self, state: torch.Tensor) -> Tuple[torch.Tensor]:
        return (self.q(state),)


class ActorCritic(nn.Module):
    """ActorCriticImpl: state -> (logits [B, actions], value [B])."""

    def __init__(self, o: dict):
        super().__init__()
        self.options = o
        self.policy = Mlp(o["state_dim"], o["hidden"], o["actions"], "tanh")
        self.value = Mlp(o["state_dim"], o["hidden"], 1, "tanh")

    def forward(self, state: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.policy(state), self.value(state).squeeze(-1)


# ================================================================================================
# Mamba-2 (src/models/mamba2.cpp)
# ================================================================================================


def _rms_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    low = x.dtype in (torch.half, torch.bfloat16)
    xf = x.float() if low else x
    out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return out.to(x.dtype) if low else out


def segsum(a: torch.Tensor) -> torch.Tensor:
    """S[..., i, j] = sum_{k=j+1..i} a[..., k] (i >= j), -inf above the diagonal."""
    T = a.size(-1)
    x = a.unsqueeze(-1).expand(*a.shape, T).contiguous()
    ones = torch.ones(T, T, dtype=torch.bool, device=a.device)
    x = x.masked_fill(ones.tril(-1).logical_not(), 0.0)
    s = x.cumsum(-2)
    return s.masked_fill(ones.tril(0).logical_not(), float("-inf"))


def _heads_from_groups(t: torch.Tensor, H: int) -> torch.Tensor:
    """repeat_interleave(H // G, dim=-2) written as expand + reshape (the same copy): the legacy
    ONNX exporter mis-exports repeat_interleave here (the causal mask of segsum came out wrong)."""
    G = t.size(-2)
    if G == H:
        return t
    lead, n = t.shape[:-2], t.size(-1)
    return t.unsqueeze(-2).expand(*lead, G, H // G, n).reshape(*lead, H, n)


def ssd_chunked(X, A, B, C, chunk_size: int, initial_state=None):
    """Chunked SSD scan (ssd_chunked in mamba2.cpp). X [b,L,H,P], A [b,L,H], B/C [b,L,G,N].

    The three-operand einsums of the C++ code are written as the two pairwise contractions ATen
    performs for them (left to right, summing an index as soon as no later operand uses it), so the
    result does not depend on whether opt_einsum is installed.
    """
    b, L, H, P = X.shape
    N = B.size(3)
    Q = chunk_size
    nc = (L + Q - 1) // Q
    pad = nc * Q - L
    B = _heads_from_groups(B, H)
    C = _heads_from_groups(C, H)
    if pad > 0:
        X = F.pad(X, (0, 0, 0, 0, 0, pad))
        A = F.pad(A, (0, 0, 0, pad))
        B = F.pad(B, (0, 0, 0, 0, 0, pad))
        C = F.pad(C, (0, 0, 0, 0, 0, pad))
    X = X.reshape(b, nc, Q, H, P)
    B = B.reshape(b, nc, Q, H, N)
    C = C.reshape(b, nc, Q, H, N)
    A = A.reshape(b, nc, Q, H).permute(0, 3, 1, 2)  # [b, H, c, Q]
    A_cum = A.cumsum(-1)

    # 1. diagonal blocks
    Lmat = torch.exp(segsum(A)).permute(0, 2, 1, 3, 4)  # [b, c, H, l, s]
    CB = torch.einsum("bclhn,bcshn->bchls", C, B)
    Y_diag = torch.einsum("bchls,bcshp->bclhp", CB * Lmat, X)

    # 2. chunk-end states: einsum("bclhn,bhcl,bclhp->bchpn", B, decay_states, X)
    decay_states = torch.exp(A_cum.narrow(-1, Q - 1, 1) - A_cum)  # [b, H, c, Q]
    Bd = torch.einsum("bclhn,bhcl->bclhn", B, decay_states)
    states = torch.einsum("bclhn,bclhp->bchpn", Bd, X)

    # 3. inter-chunk recurrence
    if initial_state is not None:
        s0 = initial_state.unsqueeze(1)
    else:
        s0 = torch.zeros(b, 1, H, P, N, dtype=X.dtype, device=X.device)
    states = torch.cat([s0, states], 1)  # [b, c+1, H, P, N]
    chunk_sums = F.pad(A_cum.select(-1, Q - 1), (1, 0))  # [b, H, c+1]
    decay_chunk = torch.exp(segsum(chunk_sums))  # [b, H, z, c]
    new_states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)
    final_state = new_states.select(1, nc)
    states = new_states.narrow(1, 0, nc)

    # 4. state -> output: einsum("bclhn,bchpn,bhcl->bclhp", C, states, exp(A_cum))
    Cs = torch.einsum("bclhn,bchpn->bclhp", C, states)
    Y_off = torch.einsum("bclhp,bhcl->bclhp", Cs, torch.exp(A_cum))

    Y = (Y_diag + Y_off).reshape(b, nc * Q, H, P)
    if pad > 0:
        Y = Y.narrow(1, 0, L)
    return Y, final_state


def ssd_sequential(X, A, B, C, initial_state=None):
    """Reference recurrence h_t = exp(A_t) h_{t-1} + X_t (x) B_t, y_t = h_t . C_t (tests only)."""
    b, L, H, P = X.shape
    N = B.size(3)
    B = _heads_from_groups(B, H)
    C = _heads_from_groups(C, H)
    h = initial_state if initial_state is not None else X.new_zeros(b, H, P, N)
    ys = []
    for t in range(L):
        decay = torch.exp(A[:, t]).unsqueeze(-1).unsqueeze(-1)
        h = decay * h + X[:, t].unsqueeze(-1) * B[:, t].unsqueeze(-2)
        ys.append((h * C[:, t].unsqueeze(-2)).sum(-1))
    return torch.stack(ys, 1), h


class Mamba2RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return _rms_normalize(x, self.eps) * self.weight


class Mamba2Mixer(nn.Module):
    def __init__(self, o: dict):
        super().__init__()
        self.o = o
        dm = o["d_model"]
        self.di = di = o["expand"] * dm
        self.P = o["headdim"]
        self.H = H = di // self.P
        self.G = o["ngroups"]
        self.N = o["d_state"]
        self.K = o["d_conv"]
        self.conv_dim = conv_dim = di + 2 * self.G * self.N
        self.in_proj = nn.Linear(dm, 2 * di + 2 * self.G * self.N + H, bias=False)
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, self.K, groups=conv_dim, padding=self.K - 1,
                                bias=True)
        self.dt_bias = nn.Parameter(torch.zeros(H))
        self.A_log = nn.Parameter(torch.log(torch.empty(H).uniform_(1.0, 16.0)))
        self.D = nn.Parameter(torch.ones(H))
        self.norm_weight = nn.Parameter(torch.ones(di))
        self.out_proj = nn.Linear(di, dm, bias=False)

    def gated_norm(self, y, z):
        g = y * F.silu(z)
        lead = g.shape
        grouped = g.unflatten(-1, (self.G, self.di // self.G))
        return _rms_normalize(grouped, 1e-5).reshape(lead) * self.norm_weight

    def forward(self, u):
        b, L, _ = u.shape
        di, H, P, G, N, conv_dim = self.di, self.H, self.P, self.G, self.N, self.conv_dim
        zxbcdt = self.in_proj(u)
        z = zxbcdt.narrow(-1, 0, di)
        xBC_pre = zxbcdt.narrow(-1, di, conv_dim)
        dt = zxbcdt.narrow(-1, di + conv_dim, H)
        xBC = F.silu(self.conv1d(xBC_pre.transpose(1, 2)).narrow(-1, 0, L).transpose(1, 2))
        x = xBC.narrow(-1, 0, di).reshape(b, L, H, P)
        B = xBC.narrow(-1, di, G * N).reshape(b, L, G, N)
        C = xBC.narrow(-1, di + G * N, G * N).reshape(b, L, G, N)
        delta = F.softplus(dt + self.dt_bias)  # [b, L, H]
        A = -torch.exp(self.A_log)  # [H]
        y, _ = ssd_chunked(x * delta.unsqueeze(-1), A * delta, B, C, self.o["chunk_size"])
        y = y + x * self.D.view(H, 1)
        return self.out_proj(self.gated_norm(y.reshape(b, L, di), z))


class Mamba2Block(nn.Module):
    def __init__(self, o: dict):
        super().__init__()
        self.norm = Mamba2RMSNorm(o["d_model"])
        self.mixer = Mamba2Mixer(o)

    def forward(self, u):
        return u + self.mixer(self.norm(u))


class Mamba2Net(nn.Module):
    """Mamba2NetImpl::forward: x [B, L, input_dim] -> (quantiles [B, horizon, Q],)."""

    def __init__(self, o: dict):
        super().__init__()
        self.options = o
        di = o["expand"] * o["d_model"]
        if di % o["headdim"] or (di // o["headdim"]) % o["ngroups"]:
            raise ValueError(f"[mamba2] bad sizes: d_inner={di}, headdim={o['headdim']}, "
                             f"ngroups={o['ngroups']}")
        self.Q = len(o["quantiles"])
        self.embed = nn.Linear(o["input_dim"], o["d_model"])
        self.blocks = nn.ModuleList([Mamba2Block(o) for _ in range(o["n_layers"])])
        self.norm_f = Mamba2RMSNorm(o["d_model"])
        self.head = nn.Linear(o["d_model"], o["horizon"] * self.Q)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor]:
        h = self.embed(x)
        for blk in self.blocks:
            h = blk(h)
        h = self.norm_f(h)  # over every position, as the C++ `hidden` does
        out = self.head(h.select(1, h.size(1) - 1))
        return (out.unflatten(-1, (self.options["horizon"], self.Q)),)


# ================================================================================================
# TFT (src/models/tft.cpp)
# ================================================================================================


from torch_tft import (GateAddNorm, GatedResidualNetwork, Glu,  # noqa: E402,F401
                       InterpretableMultiHeadAttention, TftNet, VariableSelectionNetwork,
                       tft_causal_mask)


_CLASSES = {"dqn": DqnNet, "ppo": ActorCritic, "mamba2": Mamba2Net, "tft": TftNet}
_EXAMPLE_KEY = re.compile(r"^(input|output)\.b(\d+)\.(\d+)$")


def create(name: str, options: Optional[dict] = None, **kwargs) -> nn.Module:
    """The network `name` with (resolved) `options` and PyTorch's random init, in eval mode."""
    o = resolve_options(name, options)
    return _CLASSES[name](o, **kwargs).eval()


def _is_example_key(key: str) -> bool:
    # By the full pattern, not the prefix: the TFT has a module named "output" ("output.weight").
    return _EXAMPLE_KEY.match(key) is not None


def build(name: str, options: dict, tensors: Dict[str, torch.Tensor], **kwargs) -> nn.Module:
    """An eval-mode module `name` built from `options` (missing keys: the C++ defaults) with every
    parameter/buffer loaded from `tensors` by its LibTorch name. Strict: raises KeyError naming the
    missing and unexpected keys and ValueError for shape mismatches. Example entries
    ("input.b<B>.<i>", "output.b<B>.<i>") are ignored. `kwargs` go to the model class
    (tft: vsn_block_floats)."""
    model = create(name, options, **kwargs)
    weights = {k: v for k, v in tensors.items() if not _is_example_key(k)}
    expected = model.state_dict()
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected))
    if missing or unexpected:
        raise KeyError(f"[{name}] weights do not match the module built from the options: "
                       f"missing {missing}, unexpected {unexpected}")
    bad = [f"{k}: file {tuple(weights[k].shape)} vs module {tuple(v.shape)}"
           for k, v in expected.items() if tuple(weights[k].shape) != tuple(v.shape)]
    if bad:
        raise ValueError(f"[{name}] shape mismatches: " + "; ".join(bad))
    dtypes = {v.dtype for v in weights.values() if v.is_floating_point()}
    if len(dtypes) > 1:
        raise ValueError(f"[{name}] mixed parameter dtypes {sorted(map(str, dtypes))}")
    if dtypes:
        model = model.to(dtypes.pop())
    model.load_state_dict(weights, strict=True)
    return model.eval()


def _read_safetensors(path: str):
    try:
        from safetensors import safe_open
    except ImportError as e:  # pragma: no cover
        raise ImportError("safetensors is required (it is in /work/main/.venv)") from e
    tensors = {}
    with safe_open(str(path), framework="pt") as f:
        meta = dict(f.metadata() or {})
        for k in f.keys():
            tensors[k] = f.get_tensor(k)
    return meta, tensors


def load(path, **kwargs):
    """(name, options, module, examples) from a weights file; examples maps each batch size to
    (inputs tuple, outputs tuple) of the C++ forward."""
    meta, tensors = _read_safetensors(path)
    for key in ("model", "options"):
        if key not in meta:
            raise KeyError(f"{path}: metadata lacks '{key}' (has {sorted(meta)})")
    name = meta["model"]
    options = resolve_options(name, json.loads(meta["options"]))
    module = build(name, options, tensors, **kwargs)

    found: Dict[int, Dict[str, Dict[int, torch.Tensor]]] = {}
    for k, v in tensors.items():
        if not _is_example_key(k):
            continue
        m = _EXAMPLE_KEY.match(k)
        found.setdefault(int(m.group(2)), {"input": {}, "output": {}})[m.group(1)][
            int(m.group(3))] = v

    def ordered(d: Dict[int, torch.Tensor], what: str, batch: int):
        if sorted(d) != list(range(len(d))):
            raise KeyError(f"{path}: {what} tensors of batch {batch} are not numbered 0..n-1: "
                           f"{sorted(d)}")
        return tuple(d[i] for i in range(len(d)))

    for key, want in (("inputs", INPUT_NAMES[name]), ("outputs", OUTPUT_NAMES[name])):
        if key in meta:
            got = json.loads(meta[key])
            if len(got) != len(want):
                raise ValueError(f"{path}: metadata {key} {got}, expected {len(want)}: {want}")
            if got != want:
                warnings.warn(f"{path}: metadata {key} {got} differ from the expected names {want}")
    examples = {}
    for batch, d in sorted(found.items()):
        ins = ordered(d["input"], "input", batch)
        outs = ordered(d["output"], "output", batch)
        if len(ins) != len(INPUT_NAMES[name]) or len(outs) != len(OUTPUT_NAMES[name]):
            raise ValueError(f"{path}: batch {batch} has {len(ins)} inputs and {len(outs)} "
                             f"outputs, expected {len(INPUT_NAMES[name])} and "
                             f"{len(OUTPUT_NAMES[name])}")
        examples[batch] = (ins, outs)
    return name, options, module, examples


def verify(path, **kwargs) -> Dict[int, List[float]]:
    """Max |python - C++| per example batch and output."""
    name, _, module, examples = load(path, **kwargs)
    result = {}
    with torch.inference_mode():
        for batch, (ins, outs) in examples.items():
            got = module(*ins)
            diffs = []
            for i, (g, w) in enumerate(zip(got, outs)):
                if tuple(g.shape) != tuple(w.shape):
                    raise ValueError(f"[{name}] batch {batch} output {i}: shape {tuple(g.shape)} "
                                     f"vs C++ {tuple(w.shape)}")
                diffs.append((g.double() - w.double()).abs().max().item() if g.numel() else 0.0)
            result[batch] = diffs
    return result


def example_inputs(name: str, options: dict, batch: int, generator=None) -> tuple:
    """Random inputs of the registry's example shapes (window = options' window)."""
    o = resolve_options(name, options)
    g = generator
    if name in ("dqn", "ppo"):
        return (torch.randn(batch, o["state_dim"], generator=g),)
    if name == "mamba2":
        return (torch.randn(batch, o["window"], o["input_dim"], generator=g),)
    return (torch.randn(batch, o["window"], o["past_features"], generator=g),
            torch.randn(batch, o["horizon"], o["future_features"], generator=g),
            torch.randint(0, o["static_categories"], (batch,), generator=g))


# ================================================================================================
# Self-test (random weights) and the C++ comparison CLI
# ================================================================================================


def _time(module, inputs, min_s=0.5, max_iters=1000):
    with torch.inference_mode():
        module(*inputs)
        n, t0 = 0, time.perf_counter()
        while n < max_iters and (time.perf_counter() - t0 < min_s or n < 3):
            module(*inputs)
            n += 1
        return (time.perf_counter() - t0) / n


def _vsn_unfolded(vsn: VariableSelectionNetwork, x, c):
    """Textbook VSN (embed, per-variable GRNs, selection GRN on the flat embeddings)."""
    b, t, v = x.shape
    emb = vsn.embed(x)  # [B, T, V, E]
    hid = F.elu(torch.einsum("btve,veo->btvo", emb, vsn.fc2_weight) + vsn.fc2_bias)
    hid = torch.einsum("btvi,vio->btvo", hid, vsn.fc1_weight) + vsn.fc1_bias
    g = torch.einsum("btvi,vio->btvo", hid, vsn.glu_weight) + vsn.glu_bias
    skip = (torch.einsum("btve,veo->btvo", emb, vsn.skip_weight) + vsn.skip_bias
            if vsn.skip_weight is not None else emb)
    h = vsn.h
    y = F.layer_norm(g[..., :h] * torch.sigmoid(g[..., h:]) + skip, (h,)) * vsn.norm_weight \
        + vsn.norm_bias
    if v == 1:
        return y.squeeze(2)
    w = torch.softmax(vsn.selection(emb.reshape(b, t, -1), c), -1)
    return (w.unsqueeze(-1) * y).sum(2)


def _self_test():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    ok = True
    for name in MODEL_NAMES:
        o = resolve_options(name, {})
        ref = create(name, o)
        # Non-trivial values for the parameters PyTorch inits to constants (biases 0, norms 1).
        with torch.no_grad():
            for pn, p in ref.named_parameters():
                if pn.endswith("bias") or "norm" in pn or pn.endswith(".D") or "dt_bias" in pn:
                    p.add_(0.1 * torch.randn_like(p))
        sd = {k: v.clone() for k, v in ref.state_dict().items()}
        n_params = sum(v.numel() for v in sd.values())
        status = "ok" if n_params == DEFAULT_PARAMETER_COUNTS[name] else "MISMATCH"
        ok &= status == "ok"
        print(f"== {name}: {len(sd)} tensors, {n_params} parameters "
              f"(C++ closed form {DEFAULT_PARAMETER_COUNTS[name]}: {status})")
        for k, v in sd.items():
            print(f"   {k:55s} {list(v.shape)}")
        # strictness
        for broken, what in (({k: v for k, v in list(sd.items())[1:]}, "missing"),
                             ({**sd, "bogus.weight": torch.zeros(1)}, "unexpected")):
            try:
                build(name, o, broken)
                print(f"   strict check ({what}): NOT raised")
                ok = False
            except KeyError:
                pass
        model = build(name, o, {**sd, "input.b1.0": torch.zeros(1)})
        for batch in (1, 64):
            ins = example_inputs(name, o, batch)
            with torch.inference_mode():
                outs = model(*ins)
            sec = _time(model, ins)
            print(f"   batch {batch:2d}: outputs {[list(t.shape) for t in outs]}  "
                  f"{sec * 1e3:8.3f} ms/forward (1 thread)")
    # Numerical cross-checks of the reformulations against textbook forms.
    torch.manual_seed(1)
    with torch.inference_mode():
        b, L, H, P, G, N = 3, 37, 4, 5, 2, 6
        X = torch.randn(b, L, H, P, dtype=torch.float64)
        A = -torch.rand(b, L, H, dtype=torch.float64)
        Bm = torch.randn(b, L, G, N, dtype=torch.float64)
        Cm = torch.randn(b, L, G, N, dtype=torch.float64)
        yc, sc = ssd_chunked(X, A, Bm, Cm, 8)
        ys, ss = ssd_sequential(X, A, Bm, Cm)
        d = max((yc - ys).abs().max().item(), (sc - ss).abs().max().item())
        print(f"ssd_chunked vs ssd_sequential (fp64): max diff {d:.2e}")
        ok &= d < 1e-10
        tft = create("tft", {"past_features": 7, "future_features": 3, "real_embedding": 4,
                             "hidden": 8, "heads": 2, "window": 11, "horizon": 3})
        tft = tft.double()
        with torch.no_grad():
            for pn, p in tft.named_parameters():
                p.add_(0.1 * torch.randn_like(p))
        x = torch.randn(2, 11, 7, dtype=torch.float64)
        c = torch.randn(2, 8, dtype=torch.float64)
        d = (tft.past_vsn(x, c)[0] - _vsn_unfolded(tft.past_vsn, x, c)).abs().max().item()
        tft.past_vsn.block_floats = 64  # several position blocks
        d = max(d, (tft.past_vsn(x, c)[0] - _vsn_unfolded(tft.past_vsn, x, c)).abs().max().item())
        print(f"folded VSN vs unfolded VSN (fp64): max diff {d:.2e}")
        ok &= d < 1e-10
        # causality of the TFT mask: future input at step k moves only forecasts at steps >= k
        ins = example_inputs("tft", tft.options, 2)
        ins = (ins[0].double(), ins[1].double(), ins[2])
        base = tft(*ins)[0]
        fut = ins[1].clone()
        fut[:, 2] += 1.0
        moved = (tft(ins[0], fut, ins[2])[0] - base).abs().amax(dim=(0, 2))
        print(f"tft causality (future step 2 perturbed): per-step change {moved.tolist()}")
        ok &= bool((moved[:2] == 0).all() and moved[2] > 0)
    print("SELF-TEST", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


def _cli(args: List[str]) -> int:
    import os
    torch.set_num_threads(1)
    paths = []
    for a in args:
        if os.path.isdir(a):
            paths += [os.path.join(a, f"{n}.safetensors") for n in MODEL_NAMES
                      if os.path.exists(os.path.join(a, f"{n}.safetensors"))]
        else:
            paths.append(a)
    worst = 0.0
    for p in paths:
        for batch, diffs in verify(p).items():
            worst = max([worst] + diffs)
            print(f"{p}: batch {batch}: max |py - C++| per output {['%.3e' % d for d in diffs]}")
    print(f"worst {worst:.3e}")
    return 0 if worst <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(_cli(sys.argv[1:]) if len(sys.argv) > 1 else _self_test())
