"""Checks fsdp-plan's tensor-parallel reports against closed forms from
the models' configs (tensor-parallel.test)."""
import json
import re
import sys

models, out = sys.argv[1], sys.argv[2]


def load(name):
    with open(f"{out}/{name}.report.json") as f:
        return json.load(f)


def config(model):
    with open(f"{models}/{model}/config.json") as f:
        return json.load(f)


def block_units(report):
    return [u for u in report["units"] if u["name"].startswith("block")]


c = config("llama-tiny")
H, I = c["hidden_size"], c["intermediate_size"]
heads, kv = c["num_attention_heads"], c["num_key_value_heads"]
D = H // heads
q, kvw, o, mlp = H * H, kv * D * H, H * H, 3 * H * I
norms = 2 * H

r = load("tp2")
assert r["mesh"] == {"dp": 2, "tp": 2, "sequence_parallel": True}, r["mesh"]
tp = 2
expected = (q + 2 * kvw + o + mlp) // tp + norms
assert all(u["params"] == expected for u in block_units(r)), (block_units(r), expected)
print(f"tp2: mesh dp 2 x tp 2, sequence parallel; block units hold 1/2 of the heads' and "
      f"columns' parameters and every norm: {expected} each")
B, S, L = 2, 16, c["num_hidden_layers"]
activation = B * S * H * 4
assert r["comm"]["tp_activations"] == 8 * activation * L, (r["comm"], activation)
print(f"tp2: activations {8 * activation * L} bytes: 4 gathers and 4 reduce-scatters of a "
      f"[{B}, {S}, {H}] f32 activation in each of {L} blocks")
# Every parameter not cut is partial: the root (embeddings, norm, head)
# whole, so all of each rank's shard of it; a block's two norms, at its
# end, in the second rank's shard.
root = [u for u in r["units"] if u["name"] == "root"][0]
partial = 4 * (root["shard_numel"] + L * norms)
assert r["comm"]["all_reduce_tp"] == partial, (r["comm"], partial)
print(f"tp2: all_reduce over tp {partial} bytes: the root's shard and each block's norms, "
      f"every parameter not cut")
r = load("whole")
assert r["mesh"]["sequence_parallel"] is False
assert r["comm"]["tp_activations"] == 4 * activation * L, r["comm"]
assert r["comm"]["all_reduce_tp"] == 0, r["comm"]
print(f"whole: activations {4 * activation * L} bytes: 4 all-reduces a block; no partial "
      f"gradient")

r = load("tp4")
tp = 4
# 2 key/value heads over 4 ranks: one head a rank, shared by 2.
expected = (q + o + mlp) // tp + 2 * (D * H) + norms
assert all(u["params"] == expected for u in block_units(r)), (block_units(r), expected)
# dp 2: each rank's shard is half the unit; the shared heads (k, v: D*H
# each) lie in the first half, which one rank of each pair holds.
shared = 2 * D * H
shard = expected // 2
in_first = min(shard, (q // tp) + shared) - min(shard, q // tp)
partial = 4 * in_first * c["num_hidden_layers"]
assert r["comm"]["all_reduce_tp"] == partial, (r["comm"], partial)
print(f"tp4: block units {expected} each; all_reduce over tp {partial} bytes: "
      f"the shared key/value heads")

with open(f"{out}/gpt2.mlir") as f:
    text = f.read()
assert 'nn.param "transformer.h.0.attn.c_attn.weight" {tp_dim = 1 : i64, tp_pieces = 2 : i64, tp_sections = 3 : i64}' in text
# The row-parallel bias is whole, added to the rank's part of the tokens
# after the reduce-scatter (its gradient partial); with bf16 parameters it
# is read through its cast.
assert 'nn.param "transformer.h.0.attn.c_proj.bias" {tp_partial, tp_pieces = 1 : i64} :' in text
assert re.search(r"fsdp.tp_reduce_scatter %[0-9]+ bias %[0-9]+ ", text)
print("gpt2: c_attn in 3 sections; the row-parallel biases whole, added after the sum")

r = load("hybrid")
assert r["mesh"] == {"dp": 4, "tp": 2, "sequence_parallel": True} and r["shard_size"] == 2, (
    r["mesh"], r["shard_size"])
with open(f"{out}/hybrid.mlir") as f:
    text = f.read()
assert "fsdp.all_reduce @block0\n" in text or "fsdp.all_reduce @block0 " in text
print("hybrid: shard groups of 2 data-parallel ranks, 2 replicas")
