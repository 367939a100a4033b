#!/usr/bin/python3
"""Write a small runnable image program (docs/program-format.md, inputs kind
"images"): a linear classifier over whole images, the planner's part of ViT
written by hand so that fsdp-run's image batches can be trained end to end
before the ViT graph exists.

usage: make_image_program.py OUT.json --height H --width W --channels C
                             --classes K --micro-batch B --world-size R

The image is one patch (patch = image, so P = 1 and seq_len = 2); the model is
logits = patches x W^T with one parameter "classifier.weight" [K, C*H*W] in
one full-shard unit padded to R shards, and the step the planner would make of
it: gather, linear, cross_entropy and its gradient (scaled by the runtime's
1/G), the weight's gradient into the unit's buffer, reduce-scatter, then the
global norm and AdamW. With HF's Conv2d kernel [K, C, H, W] viewed as
[K, C*H*W], it is a convolution with kernel = stride = the image.
"""
import argparse

from hand_program import OneUnit


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--height", type=int, required=True)
    ap.add_argument("--width", type=int, required=True)
    ap.add_argument("--channels", type=int, required=True)
    ap.add_argument("--classes", type=int, required=True)
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    a = ap.parse_args(argv)
    B, R, K = a.micro_batch, a.world_size, a.classes
    V = a.channels * a.height * a.width
    u = OneUnit("classifier", "classifier.weight", [K, V], R)
    take, gathered, grads = u.take, u.gathered, u.grads
    tensors = [
        {"offset": take(B * V * 4), "shape": [B, 1, V], "dtype": "f32"},  # 0 patches
        {"offset": take(B * 8), "shape": [B, 1], "dtype": "i64"},   # 1 labels
        {"offset": take(4), "shape": [], "dtype": "f32"},           # 2 loss
        {"offset": take(B * K * 4), "shape": [B, 1, K], "dtype": "f32"},  # 3 logits
        {"offset": take(B * K * 4), "shape": [B, 1, K], "dtype": "f32"},  # 4 dlogits
        {"offset": gathered, "shape": [K, V], "dtype": "f32"},      # 5 the weight
        {"offset": grads, "shape": [K, V], "dtype": "f32"},         # 6 its gradient
    ]
    compute = [
        {"op": "record", "event": 0},
        {"op": "wait", "event": 1, "phase": "forward"},
        {"op": "linear", "module": "classifier", "layout": "out_in", "in": [0, 5], "out": [3],
         "unit": 0, "phase": "forward"},
        {"op": "cross_entropy", "in": [3, 1], "out": [2], "phase": "forward"},
        {"op": "cross_entropy_grad", "in": [3, 1], "out": [4], "phase": "backward"},
        {"op": "alloc", "kind": "grads", "unit": 0, "dst": grads, "zero_from": u.numel,
         "phase": "backward"},
        {"op": "linear_grad_weight", "module": "classifier", "layout": "out_in", "in": [4, 0],
         "out": [6], "phase": "backward"},
        {"op": "free", "kind": "params", "unit": 0, "phase": "backward"},
        {"op": "record", "event": 2},
        {"op": "wait", "event": 3, "phase": "backward"},
        {"op": "free", "kind": "grads", "unit": 0, "phase": "backward"},
    ]
    u.write(a.out, {"name": "image-linear", "model_type": "vit"}, B, 2,
            {"kind": "images", "tokens": 0, "targets": 1,
                  "image": {"height": a.height, "width": a.width, "channels": a.channels,
                            "patch_height": a.height, "patch_width": a.width, "classes": K}},
            tensors, compute)


if __name__ == "__main__":
    main()
