#!/usr/bin/python3
"""Single-process PyTorch reference of the masked-LM program
make_masked_program.py writes (logits[b, s] = embed[input[b, s]] +
position[s]), trained on the masked batches as docs/training-semantics.md says fsdp-run takes
them ("Model families", bert).

usage: masked_reference.py --data TOKENS.bin --weights INIT.safetensors
                           --steps T --global-batch G --seq-len S --mask-token-id M
                           [--lr X] [--weight-decay X] [--eval-data TOKENS.bin]
                           [--eval-every N] [--eval-batches K]
                           --metrics OUT.jsonl --save-weights OUT.safetensors
                           [--old-combination R A]

Sample g of step t is the S tokens from ((t G + g) S) mod (n - S - 1) of the
uint16 token file; a token at absolute index p is selected iff
splitmix64(p) mod 20 < 3, its input M and its target the original
(encoders.mlm_batch); the loss is the sum of cross-entropy over the selected
tokens of the global batch divided by their count (encoders.mlm_loss).
AdamW as fsdp-run's defaults (betas 0.9, 0.95, eps 1e-8, weight decay on both
2-D tables), constant learning rate. eval_loss, after step t when t is a
multiple of N or the last (N = 0: the last only), is the mean over eval
batches b < K of the same loss on the samples step b would take from the
eval file.

--old-combination R A: also report, as "old_loss", what fsdp-run reported
before the masked loss was combined by counts: the sum over R ranks and A
micro-steps of each micro-step's mean over its selected tokens, divided by
the global count. The test checks that it is not what fsdp-run reports now.
Prints the micro-steps (of that layout) with no selected token.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import batches_ref  # noqa: E402
import encoders  # noqa: E402
import safetensors_io  # noqa: E402

EMBED, POSITION = "embed.weight", "position.weight"


def batch(tokens, G, S, t, mask_id, samples=None):
    """Inputs, targets and count of samples `samples` (default all G) of step t."""
    samples = range(G) if samples is None else samples
    starts = [batches_ref.window_start(len(tokens), S, G, t, g) for g in samples]
    return encoders.mlm_batch(tokens, starts, S, mask_id)


def logits(embed, position, inputs):
    return embed[inputs] + position[None, :, :]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--eval-data")
    ap.add_argument("--weights", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--global-batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--mask-token-id", type=int, required=True)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=0)
    ap.add_argument("--eval-batches", type=int, default=1)
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--save-weights", required=True)
    ap.add_argument("--dtype", choices=("f32", "f64"), default="f32",
                    help="f64: the same reference in float64, whose gap to the f32 one bounds "
                         "fsdp's (compare.py --bound-from)")
    ap.add_argument("--old-combination", type=int, nargs=2, metavar=("R", "A"))
    a = ap.parse_args(argv)
    tokens = np.fromfile(a.data, dtype="<u2").astype(np.int64)
    evals = np.fromfile(a.eval_data, dtype="<u2").astype(np.int64) if a.eval_data else None
    w = safetensors_io.load(a.weights)
    dtype = torch.float64 if a.dtype == "f64" else torch.float32
    embed = torch.nn.Parameter(w[EMBED].to(dtype).clone())
    position = torch.nn.Parameter(w[POSITION].to(dtype).clone())
    opt = torch.optim.AdamW([embed, position], lr=a.lr, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=a.weight_decay, foreach=False)
    G, S, M = a.global_batch, a.seq_len, a.mask_token_id
    empty = []

    def loss_of(data, t):
        inputs, targets, count = batch(data, G, S, t, M)
        if count == 0:
            raise SystemExit(f"masked_reference.py: step {t + 1} selects nothing")
        return encoders.mlm_loss(logits(embed, position, inputs), targets, count)

    with open(a.metrics, "w") as out:
        for t in range(a.steps):
            loss = loss_of(tokens, t)
            opt.zero_grad()
            loss.backward()
            norm = float(torch.cat([embed.grad.flatten(), position.grad.flatten()]).norm())
            row = {"step": t + 1, "loss": float(loss), "grad_norm": norm}
            if a.old_combination:
                R, A = a.old_combination
                B = G // (R * A)
                total, count = 0.0, batch(tokens, G, S, t, M)[2]
                with torch.no_grad():
                    for micro in range(A):
                        for rank in range(R):
                            rows = [batches_ref.sample(B, R, micro, rank, b) for b in range(B)]
                            x, y, n = batch(tokens, G, S, t, M, rows)
                            if n == 0:
                                empty.append((t + 1, rank, micro))
                                continue
                            total += float(encoders.mlm_loss(logits(embed, position, x), y, n))
                row["old_loss"] = total / count
            opt.step()
            last = t + 1 == a.steps
            due = last or (a.eval_every > 0 and (t + 1) % a.eval_every == 0)
            if evals is not None and due:
                with torch.no_grad():
                    row["eval_loss"] = sum(float(loss_of(evals, b))
                                           for b in range(a.eval_batches)) / a.eval_batches
            out.write(json.dumps(row) + "\n")
    if a.old_combination:
        print("micro-steps with no selected token (step, rank, micro-step):", empty)
    safetensors_io.save({EMBED: embed.detach().float().contiguous(),
                         POSITION: position.detach().float().contiguous()}, a.save_weights)


if __name__ == "__main__":
    main()
