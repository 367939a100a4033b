"""Single-process PyTorch training of BertForMaskedLM and ViTForImageClassification
(encoders.py) as fsdp-run trains them: the ground truth of tests/e2e/encoders_e2e.py
and of scripts/demo-encoders.sh's check.

reference.py hands a bert or vit config here (run()), with its flags plus
--mask-token-id (bert), --labels and --eval-labels (vit, whose --data and
--eval-data are the images .npy). train() is the loop, for callers in Python.

Semantics (docs/training-semantics.md):
  bert: sample g of step t (0-based) is the S tokens from
  ((t*G + g)*S) mod (n - S - 1); a token at absolute index p is selected iff
  splitmix64(p) mod 20 < 3, its input then the mask id and its target the
  original; the step's loss is the sum of cross-entropy over the selected
  tokens of the global batch divided by their count.
  vit: sample g of step t is image (t*G + g) mod N, its pixels (x/255 - 0.5)/0.5
  in f32 (rounded once to bf16 under --bf16-compute); the loss is the mean
  cross-entropy over the G images.
  With --grad-accum A, micro-step a covers samples [a*G/A, (a+1)*G/A), its loss
  the part of the step's loss those samples make (the same divisor), so the step's
  gradient is that of the step's loss. AdamW, the learning-rate schedule,
  clipping and the grad norm as reference.py. Eval batch b is what step b would
  take from the eval data, eval_loss the mean of those batches' losses.
Weights: HF names; cls.predictions.decoder.{weight,bias} (tied copies) are read
as aliases and not written back, as transformers' save_pretrained does.
"""
import argparse
import json

import numpy as np
import torch
import torch.nn.functional as F

import batches_ref
import encoders
import models
import reference
import safetensors_io

TIED = {"cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias"}


class MaskedText:
    """bert's data: a token file (torch int64 [n]), S tokens a sample."""

    def __init__(self, tokens, S, mask_id):
        self.tokens = tokens.numpy() if isinstance(tokens, torch.Tensor) else np.asarray(tokens)
        self.S, self.mask_id = S, mask_id

    def batch(self, t, G):
        """(inputs [G,S], targets [G,S], divisor: the selected tokens of the batch)."""
        n = len(self.tokens)
        starts = [batches_ref.window_start(n, self.S, G, t, g) for g in range(G)]
        x, y, count = encoders.mlm_batch(self.tokens, starts, self.S, self.mask_id)
        if count == 0:
            raise ValueError(f"step {t + 1}: no token selected")
        return x, y, count

    @staticmethod
    def loss(logits, y, divisor):
        return encoders.mlm_loss(logits, y, divisor)


class Images:
    """vit's data: uint8 images [N,H,W,C] and labels [N]."""

    def __init__(self, images, labels, dtype=torch.float32):
        self.images, self.labels, self.dtype = images, np.asarray(labels).astype(np.int64), dtype

    def batch(self, t, G):
        """(pixels [G,C,H,W], labels [G], divisor G)."""
        idx = [batches_ref.image_index(len(self.images), G, t, g) for g in range(G)]
        x = encoders.R(encoders.normalise_images(self.images[idx]).to(self.dtype))
        return x, torch.from_numpy(self.labels[idx]), G

    @staticmethod
    def loss(logits, y, divisor):
        return F.cross_entropy(logits, y, reduction="sum") / divisor


def batch_loss(model, data, x, y, divisor):
    return data.loss(model(x), y, divisor)


def train(model, data, opt_args, steps, G, A=1, eval_data=None, eval_every=0, eval_batches=1,
          bf16_params=False, on_step=None, allowance=None, terms=0):
    """Trains `model` on `data` (MaskedText or Images) `steps` steps of G samples
    in A micro-steps. opt_args: an object with reference.py's optimizer flags
    (lr, beta1, beta2, eps, weight_decay, clip_grad_norm, lr_schedule,
    warmup_steps, min_lr; steps is taken from `steps`). Returns the metrics, one
    dict a step: step, loss, grad_norm, lr, and eval_loss where evaluated;
    on_step(record) is called after each."""
    if G % A:
        raise ValueError(f"global batch {G} is not a multiple of grad-accum {A}")
    params = list(model.parameters())
    opt_args = argparse.Namespace(**{**vars(opt_args), "steps": steps})
    opt = reference.adamw(params, opt_args)
    mb = G // A

    def bf16_view():
        masters = [p.data for p in params]
        for p in params:
            p.data = p.data.to(torch.bfloat16).to(p.dtype)
        return masters

    def restore(masters):
        for p, w in zip(params, masters):
            p.data = w

    def evaluate():
        """The eval record: eval_loss; for images also eval_accuracy (the
        share of samples whose largest logit, ties to the lower class, is
        the label) and eval_margin (the smallest gap between a sample's two
        largest logits: how near a prediction came to another class)."""
        losses, correct, total, margin = [], 0, 0, float("inf")
        with torch.no_grad():
            masters = bf16_view() if bf16_params else None
            for b in range(eval_batches):
                x, y, div = eval_data.batch(b, G)
                logits = model(x)
                losses.append(float(eval_data.loss(logits, y, div)))
                if isinstance(eval_data, Images):
                    top2 = logits.float().topk(2, dim=-1).values
                    margin = min(margin, float((top2[:, 0] - top2[:, 1]).min()))
                    correct += int((logits.float().argmax(dim=-1) == y.view(-1)).sum())
                    total += y.numel()
            if masters is not None:
                restore(masters)
        rec = {"eval_loss": sum(losses) / len(losses)}
        if total:
            rec.update(eval_accuracy=correct / total, eval_margin=margin)
        return rec

    out = []
    for t in range(steps):
        x, y, div = data.batch(t, G)
        opt.zero_grad(set_to_none=True)
        masters = bf16_view() if bf16_params else None
        step_loss = 0.0
        models.FLIP_SENSITIVITY = [] if t == 0 and models.BF16_COMPUTE else None
        for m in range(A):
            loss = batch_loss(model, data, x[m * mb:(m + 1) * mb], y[m * mb:(m + 1) * mb], div)
            loss.backward()
            step_loss += loss.item()
        if masters is not None:
            restore(masters)
        if opt_args.clip_grad_norm > 0:
            gn = torch.nn.utils.clip_grad_norm_(params, opt_args.clip_grad_norm)
        else:
            gn = reference.total_norm(params)
        lr = reference.learning_rate(opt_args, t + 1)
        for group in opt.param_groups:
            group["lr"] = lr
        if allowance is not None:  # reference.add_adam_allowance, terms a step
            reference.add_adam_allowance(model.named_parameters(), allowance, lr, terms)
        opt.step()
        rec = {"step": t + 1, "loss": step_loss, "grad_norm": float(gn), "lr": lr}
        if models.FLIP_SENSITIVITY:  # step 1, relative to the loss (reference.py)
            rec["flip_sensitivity"] = max(models.FLIP_SENSITIVITY) / abs(step_loss)
        models.FLIP_SENSITIVITY = None
        if eval_data is not None and (t + 1 == steps or
                                      (eval_every > 0 and (t + 1) % eval_every == 0)):
            rec.update(evaluate())
        out.append(rec)
        if on_step:
            on_step(rec)
    return out


def load_weights(model, path):
    """Reads HF-named weights into `model`; tied copies are checked to be present
    only as names. Returns the names read."""
    tensors = safetensors_io.load(path)
    params = dict(model.named_parameters())
    tied = TIED if isinstance(model, encoders.BertForMaskedLM) else {}
    for name in tensors:
        if name not in params and name not in tied:
            reference.die(f"weights file has '{name}', which the model does not have")
    missing = [n for n in params if n not in tensors]
    if missing:
        reference.die(f"weights file lacks {len(missing)} parameter(s): {', '.join(missing[:5])}")
    with torch.no_grad():
        for name, p in params.items():
            t = tensors[name]
            if tuple(t.shape) != tuple(p.shape):
                reference.die(f"'{name}' has shape {list(t.shape)}, the model expects {list(p.shape)}")
            p.copy_(t.to(p.dtype))


def save_weights(model, path, dtype=torch.float32):
    """Each parameter once, HF names (no tied copies), as save_pretrained."""
    safetensors_io.save({n: p.detach().to(dtype).contiguous() for n, p in model.named_parameters()},
                        path, metadata={"format": "pt"})


def load_images(images_path, labels_path, model):
    images = np.load(images_path)
    labels = np.load(labels_path)
    H, W = model.image
    if images.dtype != np.uint8 or images.shape[1:] != (H, W, model.channels):
        reference.die(f"{images_path}: {images.dtype} {list(images.shape)}, not uint8 "
                      f"[N, {H}, {W}, {model.channels}]")
    if labels.shape != (images.shape[0],):
        reference.die(f"{labels_path}: shape {list(labels.shape)}, not [{images.shape[0]}]")
    classes = model.classifier.weight.shape[0]
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        reference.die(f"{labels_path}: a label outside [0, {classes})")
    return images, labels


def make_data(a, cfg, model, dtype, data_path, labels_path):
    """The data object of reference.py's flags for `cfg`'s family."""
    if cfg["model_type"] == "vit":
        if not labels_path:
            reference.die(f"vit needs labels for {data_path} (--labels / --eval-labels)")
        return Images(*load_images(data_path, labels_path, model), dtype=dtype)
    vocab = int(cfg["vocab_size"])
    if not 0 <= a.mask_token_id < vocab:
        reference.die(f"--mask-token-id {a.mask_token_id} is not below vocab_size {vocab}")
    tokens = reference.load_tokens(data_path, vocab, a.data_dtype)
    if tokens.numel() < a.seq_len + 2:
        reference.die(f"{data_path}: {tokens.numel()} tokens; need at least seq_len + 2")
    return MaskedText(tokens, a.seq_len, a.mask_token_id)


def run(a, cfg):
    """reference.py's command line for a bert or vit config (a: its parsed flags)."""
    G, A = a.global_batch, a.grad_accum
    if a.no_dropout or a.bidirectional or a.exact_gelu:
        reference.die("--no-dropout, --bidirectional and --exact-gelu are not for encoders")
    if G < 1 or A < 1 or a.steps < 0 or G % A:
        reference.die("--global-batch and --grad-accum must be >= 1, G a multiple of A, "
                      "and --steps >= 0")
    models.BF16_COMPUTE = a.bf16_compute
    models.BF16_EACH_USE = a.bf16_each_use
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    dtype = torch.float64 if a.dtype == "f64" else torch.float32
    try:
        model = encoders.build_encoder(cfg, dtype)
    except models.ConfigError as e:
        reference.die(f"{a.config}: {e}")
    if cfg["model_type"] == "vit":
        P1 = model.num_patches + 1
        if a.seq_len not in (None, P1):
            reference.die(f"--seq-len {a.seq_len}: a vit sequence is its {P1} patches and CLS")
        a.seq_len = P1
    elif a.seq_len is None or not 1 <= a.seq_len <= model.max_seq_len:
        reference.die(f"bert needs --seq-len in [1, {model.max_seq_len}]")
    load_weights(model, a.weights)
    data = make_data(a, cfg, model, dtype, a.data, a.labels)
    eval_data = make_data(a, cfg, model, dtype, a.eval_data, a.eval_labels) if a.eval_data else None

    mf = open(a.metrics, "w") if a.metrics else None

    def on_step(rec):
        if mf:
            mf.write(json.dumps(rec) + "\n")
            mf.flush()
        if not a.quiet:
            print(f"step {rec['step']}: loss {rec['loss']:.9g} grad_norm {rec['grad_norm']:.9g}")

    try:
        allowance = {} if a.save_adam_allowance else None
        train(model, data, a, a.steps, G, A, eval_data, a.eval_every, a.eval_batches,
              a.bf16_params, on_step, allowance, G * a.seq_len)
    except ValueError as e:
        reference.die(str(e))
    if mf:
        mf.close()
    if a.save_weights:
        save_weights(model, a.save_weights, torch.float64 if a.save_dtype == "f64" else torch.float32)
    if a.save_adam_allowance:
        safetensors_io.save({n: allowance.get(n, torch.zeros(p.shape)).to(torch.float32)
                             for n, p in model.named_parameters()},
                            a.save_adam_allowance, metadata={"format": "pt"})
