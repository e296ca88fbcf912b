"""The torch side of bench/pretrained.ts: the same Hugging Face checkpoint (qwen2/qwen3/llama/mistral
config.json + model.safetensors, float32) as a plain PyTorch decoder, timed on the same batch.

Written from the published architecture (RMSNorm, rotary embeddings, grouped-query attention with
q/k/v biases or q/k norms, SiLU-gated MLP, tied or untied head); no transformers needed, only torch
(Debian's python3-torch works). Prints one JSON object: the mean target log-prob (to check both sides
compute the same function), best-of times of a log-probs-only forward (no grad) and of a training step
(forward, backward, Adam).

    python3 bench/support/torch_hf_bench.py CHECKPOINT_DIR BATCH SEQ THREADS REPS
"""

import json
import math
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", "float32 checkpoints only"
        start, end = info["data_offsets"]
        arr = np.frombuffer(data[start:end], dtype=np.float32).reshape(info["shape"])
        out[name] = torch.tensor(arr.copy())
    return out


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Decoder(torch.nn.Module):
    def __init__(self, cfg, tensors):
        super().__init__()
        self.cfg = cfg
        self.w = torch.nn.ParameterDict({k.replace(".", "__"): torch.nn.Parameter(v) for k, v in tensors.items()})
        d = cfg["hidden_size"]
        self.H = cfg["num_attention_heads"]
        self.Hkv = cfg.get("num_key_value_heads", self.H)
        self.dh = cfg.get("head_dim") or d // self.H
        self.eps = cfg["rms_norm_eps"]
        theta = cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0)
        self.inv = 1.0 / (theta ** (torch.arange(0, self.dh, 2, dtype=torch.float32) / self.dh))

    def p(self, name):
        return self.w[name.replace(".", "__")]

    def has(self, name):
        return name.replace(".", "__") in self.w

    def linear(self, x, path):
        y = x @ self.p(path + ".weight").t()
        if self.has(path + ".bias"):
            y = y + self.p(path + ".bias")
        return y

    def forward(self, ids):
        B, T = ids.shape
        x = F.embedding(ids, self.p("model.embed_tokens.weight"))
        ang = torch.arange(T, dtype=torch.float32)[:, None] * self.inv[None, :]
        emb = torch.cat((ang, ang), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.full((T, T), float("-inf")).triu(1)
        g = self.H // self.Hkv
        for l in range(self.cfg["num_hidden_layers"]):
            p = f"model.layers.{l}"
            h = rms_norm(x, self.p(p + ".input_layernorm.weight"), self.eps)
            q = self.linear(h, p + ".self_attn.q_proj").view(B, T, self.H, self.dh)
            k = self.linear(h, p + ".self_attn.k_proj").view(B, T, self.Hkv, self.dh)
            v = self.linear(h, p + ".self_attn.v_proj").view(B, T, self.Hkv, self.dh)
            if self.has(p + ".self_attn.q_norm.weight"):
                q = rms_norm(q, self.p(p + ".self_attn.q_norm.weight"), self.eps)
                k = rms_norm(k, self.p(p + ".self_attn.k_norm.weight"), self.eps)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k = k.repeat_interleave(g, dim=1)
            v = v.repeat_interleave(g, dim=1)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dh) + mask, dim=-1)
            o = (att @ v).transpose(1, 2).reshape(B, T, self.H * self.dh)
            x = x + self.linear(o, p + ".self_attn.o_proj")
            h = rms_norm(x, self.p(p + ".post_attention_layernorm.weight"), self.eps)
            act = F.silu(self.linear(h, p + ".mlp.gate_proj")) * self.linear(h, p + ".mlp.up_proj")
            x = x + self.linear(act, p + ".mlp.down_proj")
        x = rms_norm(x, self.p("model.norm.weight"), self.eps)
        head = self.p("lm_head.weight") if self.has("lm_head.weight") else self.p("model.embed_tokens.weight")
        return x @ head.t()


def token_logprobs(model, ids):
    logits = model(ids)[:, :-1]
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None])[..., 0]


def best_of(fn, reps):
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def main():
    ckpt, batch, seq, threads, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    cfg = json.load(open(f"{ckpt}/config.json"))
    model = Decoder(cfg, read_safetensors(f"{ckpt}/model.safetensors"))
    V = cfg["vocab_size"]
    ids = torch.tensor([[(b * 31 + t * 7 + 3) % V for t in range(seq)] for b in range(batch)])
    with torch.no_grad():
        mean_lp = token_logprobs(model, ids).mean().item()

    def forward():
        with torch.no_grad():
            token_logprobs(model, ids).sum().item()

    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad()
        loss = -token_logprobs(model, ids).mean()
        loss.backward()
        opt.step()
        loss.item()

    out = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "meanLogProb": mean_lp,
        "forwardLogProbsMs": best_of(forward, reps),
        "trainStepMs": best_of(step, reps),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
