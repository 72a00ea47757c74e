"""The TFT of bench/torch_models.py in PyTorch eager, split from it (the largest of the four): the
gated layers, the variable selection network, the interpretable attention and TftNet, mirroring
src/models/tft*.cpp op for op in eval mode."""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


class Glu(nn.Module):
    def __init__(self, in_features: int, out: int, dropout: float):
        super().__init__()
        self.out = out
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(in_features, 2 * out)

    def forward(self, x):
        y = self.fc(self.dropout(x))
        return y.narrow(-1, 0, self.out) * torch.sigmoid(y.narrow(-1, self.out, self.out))


class GateAddNorm(nn.Module):
    def __init__(self, in_features: int, out: int, dropout: float):
        super().__init__()
        self.glu = Glu(in_features, out, dropout)
        self.norm = nn.LayerNorm(out)  # eps 1e-5 like LibTorch's default

    def forward(self, x, skip):
        return self.norm(self.glu(x) + skip)


class GatedResidualNetwork(nn.Module):
    def __init__(self, in_features: int, hidden: int, out: int, context: int = 0,
                 dropout: float = 0.0):
        super().__init__()
        self.fc2 = nn.Linear(in_features, hidden)
        self.context = nn.Linear(context, hidden, bias=False) if context > 0 else None
        self.fc1 = nn.Linear(hidden, hidden)
        self.gate_norm = GateAddNorm(hidden, out, dropout)
        self.skip = nn.Linear(in_features, out) if in_features != out else None

    def forward(self, a, c=None):
        return self.forward_projected(self.fc2(a), a if self.skip is None else self.skip(a), c)

    def forward_projected(self, fc2_a, skip, c=None):
        h = fc2_a
        if c is not None:
            ctx = self.context(c)
            h = h + (ctx.unsqueeze(1) if h.dim() == 3 else ctx)
        h = self.fc1(F.elu(h))
        return self.gate_norm(h, skip)


class VariableSelectionNetwork(nn.Module):
    """VSN over V real variables with the C++ parameter layout ([V, in, out] batched weights) and
    the C++ folded evaluation (embedding folded into the per-variable GRN fc2/skip and into the
    selection GRN fc2/skip, recomputed on every forward as VariableSelectionNetworkImpl::forward
    does). `block_floats` is the C++ position-block budget (2^18 floats); None runs every position
    in one block (numerically the same up to GEMM blocking)."""

    def __init__(self, variables: int, embedding: int, hidden: int, context: int, dropout: float,
                 block_floats: Optional[int] = 1 << 18):
        super().__init__()
        v, e, h = variables, embedding, hidden
        self.v, self.e, self.h, self.hi = v, e, h, min(e, h)
        self.p = dropout
        self.block_floats = block_floats
        hi = self.hi
        self.emb_weight = nn.Parameter(torch.empty(v, 1, e).uniform_(-1.0, 1.0))
        self.emb_bias = nn.Parameter(torch.empty(v, e).uniform_(-1.0, 1.0))
        self.fc2_weight = nn.Parameter(torch.randn(v, e, hi) * math.sqrt(2.0 / e))
        self.fc2_bias = nn.Parameter(torch.zeros(v, hi))
        self.fc1_weight = nn.Parameter(torch.randn(v, hi, hi) * math.sqrt(2.0 / hi))
        self.fc1_bias = nn.Parameter(torch.zeros(v, hi))
        bound = math.sqrt(6.0 / (hi + 2 * h))
        self.glu_weight = nn.Parameter(torch.empty(v, hi, 2 * h).uniform_(-bound, bound))
        self.glu_bias = nn.Parameter(torch.zeros(v, 2 * h))
        self.norm_weight = nn.Parameter(torch.ones(v, h))
        self.norm_bias = nn.Parameter(torch.zeros(v, h))
        if e != h:
            self.skip_weight = nn.Parameter(torch.randn(v, e, h) * math.sqrt(2.0 / e))
            self.skip_bias = nn.Parameter(torch.zeros(v, h))
        else:
            self.skip_weight = None
            self.skip_bias = None
        self.selection = (GatedResidualNetwork(v * e, h, v, context, dropout) if v > 1 else None)

    def embed(self, x):  # [B, T, V] -> [B, T, V, E]
        return torch.addcmul(self.emb_bias, x.unsqueeze(-1), self.emb_weight.squeeze(1))

    def fold(self) -> dict:
        v, e = self.v, self.e
        we = self.emb_weight.squeeze(1)
        f = {"fc2_slope": torch.bmm(self.emb_weight, self.fc2_weight),
             "fc2_offset": torch.baddbmm(self.fc2_bias.unsqueeze(1), self.emb_bias.unsqueeze(1),
                                         self.fc2_weight)}
        if self.skip_weight is not None:
            f["skip_slope"] = torch.bmm(self.emb_weight, self.skip_weight)
            f["skip_offset"] = torch.baddbmm(self.skip_bias.unsqueeze(1),
                                             self.emb_bias.unsqueeze(1), self.skip_weight)
        else:
            f["skip_slope"] = self.emb_weight
            f["skip_offset"] = self.emb_bias.unsqueeze(1)
        if v == 1:
            return f

        def fold_flat(weight, bias):
            w3 = weight.view(weight.size(0), v, e)
            return (torch.einsum("ove,ve->vo", w3, we),
                    torch.einsum("ove,ve->o", w3, self.emb_bias) + bias)

        sel = self.selection
        f["sel_fc2"], f["sel_fc2_offset"] = fold_flat(sel.fc2.weight, sel.fc2.bias)
        if sel.skip is not None:
            f["sel_skip"], f["sel_skip_offset"] = fold_flat(sel.skip.weight, sel.skip.bias)
        return f

    def variable_grns(self, xv, f):  # xv [V, N, 1] -> [V, N, H]
        h = self.h
        hid = F.elu(torch.addcmul(f["fc2_offset"], xv, f["fc2_slope"]))
        hid = torch.baddbmm(self.fc1_bias.unsqueeze(1), hid, self.fc1_weight)
        hid = F.dropout(hid, self.p, self.training)
        g = torch.baddbmm(self.glu_bias.unsqueeze(1), hid, self.glu_weight)
        skip = torch.addcmul(f["skip_offset"], xv, f["skip_slope"])
        y = torch.addcmul(skip, g.narrow(-1, 0, h), torch.sigmoid(g.narrow(-1, h, h)))
        y = F.layer_norm(y, (h,), None, None, 1e-5)
        return torch.addcmul(self.norm_bias.unsqueeze(1), y, self.norm_weight.unsqueeze(1))

    def forward(self, x, c=None):
        """x [B, T, V] -> (output [B, T, H], weights [B, T, V])."""
        v, e, h = self.v, self.e, self.h
        b, t, _ = x.shape
        n = b * t
        f = self.fold()
        x2 = x.reshape(n, v)
        xv = x2.t().contiguous().unsqueeze(-1)
        if v == 1:
            return (self.variable_grns(xv, f).squeeze(0).view(b, t, h),
                    torch.ones(b, t, 1, dtype=x.dtype, device=x.device))
        sel = self.selection
        fc2_a = torch.addmm(f["sel_fc2_offset"], x2, f["sel_fc2"]).view(b, t, -1)
        if sel.skip is not None:
            sel_skip = torch.addmm(f["sel_skip_offset"], x2, f["sel_skip"]).view(b, t, -1)
        else:
            sel_skip = self.embed(x).reshape(b, t, v * e)
        weights = torch.softmax(sel.forward_projected(fc2_a, sel_skip, c), -1)
        w2 = weights.view(n, v)
        block = n if self.block_floats is None else max(1, self.block_floats // (v * 2 * h))
        parts = []
        for start in range(0, n, block):
            ln = min(block, n - start)
            y = self.variable_grns(xv.narrow(1, start, ln), f)
            parts.append(torch.bmm(w2.narrow(0, start, ln).unsqueeze(1),
                                   y.transpose(0, 1)).squeeze(1))
        out = parts[0] if len(parts) == 1 else torch.cat(parts, 0)
        return out.view(b, t, h), weights


class InterpretableMultiHeadAttention(nn.Module):
    def __init__(self, hidden: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.d_k = hidden // heads
        self.p = dropout
        self.query = nn.Linear(hidden, heads * self.d_k)
        self.key = nn.Linear(hidden, heads * self.d_k)
        self.value = nn.Linear(hidden, self.d_k)
        self.out = nn.Linear(self.d_k, hidden)

    def forward(self, q, kv, mask=None):
        b, lq, _ = q.shape
        lk = kv.size(1)
        qh = self.query(q).view(b, lq, self.heads, self.d_k).transpose(1, 2)
        kh = self.key(kv).view(b, lk, self.heads, self.d_k).transpose(1, 2)
        v = self.value(kv).unsqueeze(1)
        scores = torch.matmul(qh, kh.transpose(-2, -1)) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        w = torch.softmax(scores, -1)
        heads_out = torch.matmul(F.dropout(w, self.p, self.training), v)
        # (The C++ also returns w.mean(1), the head-averaged weights; unused by forward.)
        return self.out(heads_out.mean(1))


def tft_causal_mask(window: int, horizon: int, device) -> torch.Tensor:
    keys = torch.arange(window + horizon, dtype=torch.long, device=device).unsqueeze(0)
    queries = torch.arange(horizon, dtype=torch.long, device=device).unsqueeze(1) + window
    return keys > queries


class TftNet(nn.Module):
    """TftNetImpl::forward: (past [B,T,P], future [B,K,F], static_id [B] int64) ->
    (quantiles [B, K, Q],). No input validation (the C++ forward validates shapes, finiteness and
    the static_id range first)."""

    def __init__(self, o: dict, vsn_block_floats: Optional[int] = 1 << 18):
        super().__init__()
        self.options = o
        h, p = o["hidden"], o["dropout"]
        if h % o["heads"]:
            raise ValueError(f"[tft] heads={o['heads']} must divide hidden={h}")

        def grn(context):
            return GatedResidualNetwork(h, h, h, context, p)

        self.static_embedding = nn.Embedding(o["static_categories"], h)
        self.static_variable = grn(0)
        self.static_context_selection = grn(0)
        self.static_context_hidden = grn(0)
        self.static_context_cell = grn(0)
        self.static_context_enrichment = grn(0)
        self.past_vsn = VariableSelectionNetwork(o["past_features"], o["real_embedding"], h, h, p,
                                                 vsn_block_floats)
        self.future_vsn = VariableSelectionNetwork(o["future_features"], o["real_embedding"], h,
                                                   h, p, vsn_block_floats)
        layers = o["lstm_layers"]
        self.encoder = nn.LSTM(h, h, num_layers=layers, batch_first=True,
                               dropout=p if layers > 1 else 0.0)
        self.decoder = nn.LSTM(h, h, num_layers=layers, batch_first=True,
                               dropout=p if layers > 1 else 0.0)
        self.lstm_gate = GateAddNorm(h, h, p)
        self.enrichment = grn(h)
        self.attention = InterpretableMultiHeadAttention(h, o["heads"], p)
        self.attention_gate = GateAddNorm(h, h, p)
        self.positionwise = grn(0)
        self.output_gate = GateAddNorm(h, h, p)
        self.output = nn.Linear(h, len(o["quantiles"]))

    def forward(self, past, future, static_id) -> Tuple[torch.Tensor]:
        dtype = self.output.weight.dtype
        past = past.to(dtype)
        future = future.to(dtype)
        # static covariate encoders
        s = self.static_variable(self.static_embedding(static_id))
        c_s = self.static_context_selection(s)
        c_h = self.static_context_hidden(s)
        c_c = self.static_context_cell(s)
        c_e = self.static_context_enrichment(s)
        past_sel, _ = self.past_vsn(past, c_s)
        future_sel, _ = self.future_vsn(future, c_s)
        # forward_selected
        t, k = past_sel.size(1), future_sel.size(1)
        layers = self.options["lstm_layers"]
        state0 = (c_h.unsqueeze(0).repeat(layers, 1, 1), c_c.unsqueeze(0).repeat(layers, 1, 1))
        enc_out, enc_state = self.encoder(past_sel, state0)
        dec_out, _ = self.decoder(future_sel, enc_state)
        phi = self.lstm_gate(torch.cat([enc_out, dec_out], 1),
                             torch.cat([past_sel, future_sel], 1))
        theta = self.enrichment(phi, c_e)
        theta_dec = theta.narrow(1, t, k)
        att = self.attention(theta_dec, theta, tft_causal_mask(t, k, theta.device))
        delta = self.attention_gate(att, theta_dec)
        psi = self.positionwise(delta)
        out = self.output_gate(psi, phi.narrow(1, t, k))
        return (self.output(out),)


# ================================================================================================
# Building and loading
# ================================================================================================
