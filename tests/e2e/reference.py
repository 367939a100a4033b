#!/usr/bin/python3
"""Single-process PyTorch training: the ground truth fsdp-run is compared against.

usage: reference.py --config CONFIG --weights W.safetensors --data FILE --steps K
                    --global-batch G --seq-len S [--grad-accum A] [--lr 1e-3]
                    [--beta1 0.9] [--beta2 0.95] [--eps 1e-8] [--weight-decay 0.1]
                    [--clip-grad-norm X] [--data-dtype uint16|uint32]
                    [--dtype f32|f64] [--bf16-params] [--bf16-compute]
                    [--metrics OUT.jsonl] [--save-weights OUT.safetensors]
                    [--save-dtype f32|f64] [--no-dropout] [--threads N]
                    [--lr-schedule constant|linear|cosine] [--warmup-steps W] [--min-lr X]
                    [--eval-data FILE] [--eval-every N] [--eval-batches K]
                    [--mask-token-id ID] [--labels L.npy] [--eval-labels L.npy]
                    [--aux-micro-batch M]

A bert or vit config is trained by encoder_reference.py (its semantics there):
bert's --data is a token file (masked-LM, --mask-token-id, default 103); vit's
--data and --eval-data are images .npy with --labels and --eval-labels, and
--seq-len may be left out.

Semantics (docs/training-semantics.md):
  n = number of tokens; sample g of step t (t = 0 for the first step) starts at
  ((t*G + g)*S) mod (n - S - 1); inputs are S tokens from there, targets the next S.
  The step's loss is the mean cross-entropy over all G*S tokens and its gradient that
  of this mean: with --grad-accum A, micro-step a covers samples [a*G/A, (a+1)*G/A)
  and its mean loss is scaled by 1/A before backward.
  Mixture of experts (mixtral, qwen3_moe) with output_router_logits: a forward's
  loss adds router_aux_loss_coef x the mean, over its consecutive chunks of
  --aux-micro-batch M samples, of each chunk's load-balancing loss
  (models.causal_lm_loss): fsdp computes it per micro-batch of one rank, which
  holds M = micro_batch consecutive samples, so a run at micro_batch M is
  compared with --aux-micro-batch M (default G/A: one rank). G/A must be a
  multiple of M. The loss reported, eval_loss included, holds the term.
  AdamW (torch.optim.AdamW, foreach=False) with weight decay only on parameters of
  >= 2 dims. --clip-grad-norm X > 0 clips with clip_grad_norm_; grad_norm in the
  metrics is the total norm before clipping, always.
  --bf16-params: parameters are rounded to bf16 for each step's forward/backward
  (compute, gradients, master weights and AdamW state in --dtype: f32 as fsdp, f64 to
  measure how far f32 rounding moves which bf16 value a master weight rounds to).
  --bf16-compute: --compute-dtype bf16 (docs/training-semantics.md, "Mixed precision"): every value an
  op stores, every activation gradient and each use of a parameter rounded to bf16
  (so parameter gradients are bf16), norms, softmax and the loss computed in --dtype
  on bf16 inputs; master weights, gradient sums and AdamW in --dtype.
  --bf16-each-use: with --bf16-compute, an activation used by several ops has each
  use's gradient contribution rounded before they are summed (as fsdp stores them),
  not only the sum (models.BF16_EACH_USE): another correct placement of roundings.
  The learning rate of step t (1-based), T = --steps, W = --warmup-steps: lr*t/W
  for t <= W; after, with p = (t-W)/(T-W): constant lr, linear min+(lr-min)(1-p),
  cosine min+(lr-min)/2 (1+cos pi p); weight decay uses it (torch's AdamW).
  Eval, after the update of step t (t a multiple of --eval-every, or t = T): batch b
  (b < --eval-batches) is what step b would take from --eval-data; eval_loss is the
  mean of their losses, under no_grad, the parameters as the training forward sees
  them (bf16-rounded with --bf16-params).
Output: one JSON line per step {"step": t+1, "loss": ..., "grad_norm": ...}, with
--bf16-compute step 1's "flip_sensitivity" (models.FLIP_SENSITIVITY, relative); the
final weights with the input file's names and layouts (f32 unless --save-dtype f64).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402
import safetensors_io  # noqa: E402

GPT2_BUFFERS = (".attn.bias", ".attn.masked_bias")  # causal-mask buffers of old GPT-2 files


def die(msg):
    print(f"reference.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def map_names(model, file_names):
    """For each name in the weights file: ('param', param name) | ('alias', param name)
    (a tied head stored twice) | ('keep', None) (a GPT-2 mask buffer, written back as read)."""
    params = dict(model.named_parameters())
    mapping = {}
    for name in file_names:
        if name in params:
            mapping[name] = ("param", name)
        elif isinstance(model, models.GPT2LMHeadModel) and "transformer." + name in params:
            mapping[name] = ("param", "transformer." + name)
        elif name == "lm_head.weight" and model.tied:
            tied = "transformer.wte.weight" if isinstance(model, models.GPT2LMHeadModel) \
                else "model.embed_tokens.weight"
            mapping[name] = ("alias", tied)
        elif isinstance(model, models.GPT2LMHeadModel) and name.endswith(GPT2_BUFFERS):
            mapping[name] = ("keep", None)
        else:
            die(f"weights file has '{name}', which the model does not have")
    got = {p for kind, p in mapping.values() if kind == "param"}
    missing = [n for n in params if n not in got]
    if missing:
        die(f"weights file lacks {len(missing)} parameter(s): {', '.join(missing[:5])}")
    return mapping


def load_weights(model, path):
    tensors = safetensors_io.load(path)
    mapping = map_names(model, tensors)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, (kind, pname) in mapping.items():
            t = tensors[name]
            if kind == "keep":
                continue
            p = params[pname]
            if tuple(t.shape) != tuple(p.shape):
                die(f"'{name}' has shape {list(t.shape)}, the model expects {list(p.shape)}")
            if kind == "param":
                p.copy_(t.to(p.dtype))
    return tensors, mapping


def save_weights(model, path, tensors, mapping, dtype):
    params = dict(model.named_parameters())
    out = {}
    for name, (kind, pname) in mapping.items():
        if kind == "keep":
            out[name] = tensors[name]
        else:
            out[name] = params[pname].detach().to(dtype).contiguous()
    safetensors_io.save(out, path, metadata={"format": "pt"})


def add_adam_allowance(named_params, allowance, lr, terms):
    """AdamW's step is lr * m / (sqrt(v) + eps): where a gradient is within
    its rounding of 0, two correct f32 runs may step up to lr in opposite
    directions, which no measured spread foresees (one element of
    encoder_ops.py's weights under Zen kernels: 1e-5 apart, 6x the spread).
    Adds 2 lr to allowance[name] at each element whose |g| is at most terms
    x u32 x its tensor's largest |g|: the rounding bound of a sum of `terms`
    terms (a weight gradient sums over the step's tokens), taken at the
    tensor's largest gradient as the scale of its terms (stated, not
    proven: a term may exceed the largest sum). An exact 0 gets none: it is
    a row nothing used (an embedding's unseen tokens), 0 in every run."""
    for name, p in named_params:
        if p.grad is None:
            continue
        g = p.grad.detach().abs().to(torch.float64)
        near_zero = (g <= terms * 2.0 ** -24 * float(g.max())) & (g > 0)
        acc = allowance.setdefault(name, torch.zeros(g.shape, dtype=torch.float64))
        acc += 2 * lr * near_zero.to(torch.float64)


def load_tokens(path, vocab, dtype=None):
    """Tokens of `dtype` (uint16 or uint32); by default the narrowest that holds
    the vocabulary (uint16 up to 65536 tokens), as fsdp-run's --data-dtype."""
    dtype = dtype or ("uint16" if vocab <= 65536 else "uint32")
    data = np.fromfile(path, dtype="<u2" if dtype == "uint16" else "<u4")
    if data.size and int(data.max()) >= vocab:
        die(f"{path}: token {int(data.max())} is out of range for vocab_size {vocab}")
    return torch.from_numpy(data.astype(np.int64))


def batch(data, t, G, S):
    """(inputs [G,S], targets [G,S]) of step t (0-based)."""
    n = data.numel()
    m = n - S - 1
    starts = [((t * G + g) * S) % m for g in range(G)]
    x = torch.stack([data[s:s + S] for s in starts])
    y = torch.stack([data[s + 1:s + S + 1] for s in starts])
    return x, y


def total_norm(params):
    grads = [p.grad.detach() for p in params if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    return torch.norm(torch.stack([torch.norm(g, 2.0) for g in grads]), 2.0)


def learning_rate(a, t):
    """The rate of step t (1-based) under a's --lr, --lr-schedule, --warmup-steps,
    --min-lr and --steps (docs/training-semantics.md)."""
    W, T = a.warmup_steps, a.steps
    if t <= W:
        return a.lr * t / W
    p = (t - W) / (T - W)
    if a.lr_schedule == "linear":
        return a.min_lr + (a.lr - a.min_lr) * (1 - p)
    if a.lr_schedule == "cosine":
        return a.min_lr + (a.lr - a.min_lr) * 0.5 * (1 + math.cos(math.pi * p))
    return a.lr


def adamw(params, a):
    """torch's AdamW as fsdp-run's: a's --lr, --beta1, --beta2, --eps, and
    --weight-decay on parameters of two or more dimensions only."""
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps,
                             weight_decay=a.weight_decay, foreach=False)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--global-batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int,
                    help="tokens per sample (required but for vit, whose sequence is its patches "
                         "and the CLS token)")
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip-grad-norm", type=float, default=0.0)
    ap.add_argument("--data-dtype", choices=("uint16", "uint32"),
                    help="token width of --data (default: uint16 when the vocabulary fits)")
    ap.add_argument("--dtype", choices=("f32", "f64"), default="f32")
    ap.add_argument("--bf16-params", action="store_true")
    ap.add_argument("--bf16-compute", action="store_true",
                    help="round every stored value, activation gradient and parameter use to "
                         "bf16 (models.BF16_COMPUTE), computing in --dtype between roundings")
    ap.add_argument("--bf16-each-use", action="store_true",
                    help="with --bf16-compute: round each use's gradient contribution of an "
                         "activation used twice before the sum (models.BF16_EACH_USE)")
    ap.add_argument("--metrics")
    ap.add_argument("--save-weights")
    ap.add_argument("--save-adam-allowance", metavar="FILE",
                    help="per weight element, 2 lr for each step its gradient was within "
                         "rounding of 0 (add_adam_allowance), HF names as --save-weights")
    ap.add_argument("--save-dtype", choices=("f32", "f64"), default="f32")
    ap.add_argument("--no-dropout", action="store_true",
                    help="train a config with non-zero dropout without dropout")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--lr-schedule", choices=("constant", "linear", "cosine"), default="constant")
    ap.add_argument("--warmup-steps", type=int, default=0)
    ap.add_argument("--min-lr", type=float, default=0.0)
    ap.add_argument("--eval-data")
    ap.add_argument("--eval-every", type=int, default=0)
    ap.add_argument("--eval-batches", type=int, default=1)
    ap.add_argument("--bidirectional", action="store_true",
                    help="gpt2 only: every query sees every key (the encoders' attention; "
                         "tests/e2e/encoder_ops.py)")
    ap.add_argument("--exact-gelu", action="store_true",
                    help="gpt2 only: GELU 0.5 x (1 + erf(x / sqrt 2)) (HF gelu) for gelu_new")
    ap.add_argument("--labels", help="vit: labels .npy (int64 or int32 [N]); --data is the "
                                     "images .npy (uint8 [N, H, W, C])")
    ap.add_argument("--eval-labels", help="vit: the labels of --eval-data")
    ap.add_argument("--mask-token-id", type=int, default=103, help="bert: the mask token")
    ap.add_argument("--aux-micro-batch", type=int, metavar="M",
                    help="mixtral, qwen3_moe with output_router_logits: the load-balancing loss "
                         "per chunk of M consecutive samples (fsdp's micro_batch; default: "
                         "global batch / grad accum)")
    a = ap.parse_args(argv)

    try:
        cfg = models.load_config(a.config)
    except (OSError, ValueError) as e:
        die(f"{a.config}: {e}")
    if cfg.get("model_type") in ("bert", "vit"):
        import encoder_reference  # BertForMaskedLM and ViTForImageClassification
        return encoder_reference.run(a, cfg)
    if a.seq_len is None:
        die("--seq-len is required")

    G, S, A = a.global_batch, a.seq_len, a.grad_accum
    if G < 1 or S < 1 or A < 1 or a.steps < 0:
        die("--global-batch, --seq-len, --grad-accum must be >= 1 and --steps >= 0")
    if G % A:
        die(f"--global-batch {G} is not a multiple of --grad-accum {A}")
    models.BF16_COMPUTE = a.bf16_compute
    models.BF16_EACH_USE = a.bf16_each_use
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    dtype = torch.float64 if a.dtype == "f64" else torch.float32

    try:
        drop = models.dropout_keys(cfg)
        if drop and not a.no_dropout:
            die(f"{a.config}: {drop[0][0]} = {drop[0][1]}: dropout is not supported; set it to 0 "
                "or pass --no-dropout")
        model = models.build_model(cfg, dtype)
    except models.ConfigError as e:
        die(f"{a.config}: {e}")
    if a.bidirectional or a.exact_gelu:
        if not isinstance(model, models.GPT2LMHeadModel):
            die("--bidirectional and --exact-gelu need a gpt2 config")
        for blk in model.transformer.h:
            blk.attn.causal = not a.bidirectional
            blk.mlp.act = models.gelu_exact if a.exact_gelu else models.gelu_new
    if S > model.max_seq_len and isinstance(model, models.GPT2LMHeadModel):
        die(f"--seq-len {S} exceeds n_positions = {model.max_seq_len}")
    tensors, mapping = load_weights(model, a.weights)
    aux_chunk = None
    if models.has_aux_loss(model):
        aux_chunk = G // A if a.aux_micro_batch is None else a.aux_micro_batch
        if aux_chunk < 1 or (G // A) % aux_chunk:
            die(f"--aux-micro-batch {aux_chunk} does not divide the {G // A} samples of a "
                "micro-step (--global-batch / --grad-accum)")
    elif a.aux_micro_batch is not None:
        die(f"--aux-micro-batch: {a.config} has no load-balancing loss (a mixtral or qwen3_moe "
            "config with output_router_logits true)")

    data = load_tokens(a.data, model.c["vocab"], a.data_dtype)
    if data.numel() < S + 2:
        die(f"{a.data}: {data.numel()} tokens; need at least seq_len + 2 = {S + 2}")

    eval_data = None
    if a.eval_data:
        eval_data = load_tokens(a.eval_data, model.c["vocab"])
        if eval_data.numel() < S + 2:
            die(f"{a.eval_data}: {eval_data.numel()} tokens; need at least seq_len + 2 = {S + 2}")

    def evaluate():
        losses = []
        with torch.no_grad():
            masters = [p.data for p in params]
            if a.bf16_params:
                for p in params:
                    p.data = p.data.to(torch.bfloat16).to(dtype)
            for b in range(a.eval_batches):
                x, y = batch(eval_data, b, G, S)
                # The micro-batches' mean losses, averaged: what fsdp-run computes.
                losses.append(sum(models.causal_lm_loss(model, x[m * mb:(m + 1) * mb],
                                                        y[m * mb:(m + 1) * mb], aux_chunk).item()
                                  for m in range(A)) / A)
            for p, w in zip(params, masters):
                p.data = w
        return sum(losses) / len(losses)

    params = list(model.parameters())
    opt = adamw(params, a)
    allowance = {}

    mf = open(a.metrics, "w") if a.metrics else None
    mb = G // A
    for t in range(a.steps):
        x, y = batch(data, t, G, S)
        opt.zero_grad(set_to_none=True)
        masters = None
        if a.bf16_params:
            masters = [p.data for p in params]
            for p in params:
                p.data = p.data.to(torch.bfloat16).to(dtype)
        loss_sum = 0.0
        models.FLIP_SENSITIVITY = [] if t == 0 and a.bf16_compute else None
        for m in range(A):
            xs, ys = x[m * mb:(m + 1) * mb], y[m * mb:(m + 1) * mb]
            loss = models.causal_lm_loss(model, xs, ys, aux_chunk)
            (loss / A if A > 1 else loss).backward()
            loss_sum += loss.item()
        if masters is not None:
            for p, w in zip(params, masters):
                p.data = w
        step_loss = loss_sum / A
        if a.clip_grad_norm > 0:
            gn = torch.nn.utils.clip_grad_norm_(params, a.clip_grad_norm)
        else:
            gn = total_norm(params)
        lr = learning_rate(a, t + 1)
        for group in opt.param_groups:
            group["lr"] = lr
        if a.save_adam_allowance:
            add_adam_allowance(model.named_parameters(), allowance, lr, G * S)
        opt.step()
        rec = {"step": t + 1, "loss": step_loss, "grad_norm": float(gn), "lr": lr}
        if models.FLIP_SENSITIVITY:  # step 1, relative to the loss
            rec["flip_sensitivity"] = max(models.FLIP_SENSITIVITY) / abs(step_loss)
        models.FLIP_SENSITIVITY = None
        if eval_data is not None and (t + 1 == a.steps or
                                      (a.eval_every > 0 and (t + 1) % a.eval_every == 0)):
            rec["eval_loss"] = evaluate()
        if mf:
            mf.write(json.dumps(rec) + "\n")
            mf.flush()
        if not a.quiet:
            print(f"step {t + 1}: loss {step_loss:.9g} grad_norm {float(gn):.9g}")
    if mf:
        mf.close()
    if a.save_weights:
        save_weights(model, a.save_weights, tensors, mapping,
                     torch.float64 if a.save_dtype == "f64" else torch.float32)
    if a.save_adam_allowance:
        params = dict(model.named_parameters())
        out = {}
        for name, (kind, pname) in mapping.items():
            out[name] = (torch.zeros(tensors[name].shape) if kind == "keep" else
                         allowance.get(pname, torch.zeros(params[pname].shape)).to(torch.float32))
        safetensors_io.save(out, a.save_adam_allowance, metadata={"format": "pt"})


if __name__ == "__main__":
    main()
