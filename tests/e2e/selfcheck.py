#!/usr/bin/python3
"""The body of selfcheck.sh, in one process (importing torch once keeps it fast).

usage: selfcheck.py WORKDIR   (WORKDIR must hold gpl3.bin, made by make_data.py)
"""
import contextlib
import io
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import bounds  # noqa: E402
import compare  # noqa: E402
import make_weights  # noqa: E402
import reference  # noqa: E402
import safetensors_io  # noqa: E402
import test_models  # noqa: E402
import test_safetensors  # noqa: E402


def cmp(*args, quiet=False):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = compare.main(list(args))
    if not quiet:
        print("  " + out.getvalue().rstrip().replace("\n", "\n  "))
    return rc


def check(*args):
    if cmp(*args) != 0:
        sys.exit(f"selfcheck: FAILED: compare.py {' '.join(args)}")


def main():
    w = sys.argv[1]
    data = os.path.join(w, "gpl3.bin")
    print("== (a) safetensors and model pieces")
    test_safetensors.main()
    test_models.main()
    for m in ("gpt2-tiny", "llama-tiny"):
        cfg = os.path.join(ROOT, "models", m, "config.json")
        init = os.path.join(w, f"{m}.init.safetensors")
        with contextlib.redirect_stdout(io.StringIO()):
            make_weights.main([cfg, init, "--seed", "1234"])

        def f(name, ext):
            return os.path.join(w, f"{m}.{name}.{ext}")

        def run(name, *extra):
            reference.main(["--config", cfg, "--weights", init, "--data", data, "--steps", "3",
                            "--global-batch", "4", "--seq-len", "16", "--quiet",
                            "--metrics", f(name, "jsonl"), "--save-weights", f(name, "safetensors"),
                            *extra])

        run("f32", "--dtype", "f32")
        run("f64", "--dtype", "f64")
        run("f32-acc2", "--dtype", "f32", "--grad-accum", "2")
        run("f64-acc2", "--dtype", "f64", "--grad-accum", "2")
        run("f32-clip", "--dtype", "f32", "--clip-grad-norm", "1.0")
        run("bf16", "--dtype", "f32", "--bf16-params")

        def both(a, b, kind):
            return ["--" + kind, f(a, "jsonl" if kind == "metrics" else "safetensors"),
                    f(b, "jsonl" if kind == "metrics" else "safetensors")]

        # Every bound here is measured (bounds.py) or analysed, none tuned:
        print(f"== (b) {m}: f32 vs f64, 3 steps, G=4, S=16, GPL-3 bytes")
        # The f32 run's gap to f64 is what the suites measure their bounds
        # from; here it must be of an f32 rounding's size, F32_FACTOR x the
        # floors' analysis of bounds.py (64 ulps), and not 0 (f64 ran).
        check("--show", *both("f32", "f64", "metrics"),
              "--loss-tol", repr(4 * bounds.f32_loss(0.0)),
              "--grad-norm-tol", repr(4 * bounds.f32_grad_norm(0.0)),
              *both("f32", "f64", "weights"), "--weight-tol", repr(4 * bounds.f32_weight(0.0)))
        with contextlib.redirect_stderr(io.StringIO()):
            if cmp(*both("f32", "f64", "metrics"), "--loss-tol", "0", quiet=True) == 0:
                sys.exit("selfcheck: FAILED: --dtype f64 changed nothing")
        print(f"== (c) {m}: grad_accum 2 vs 1, f32 (bound: the f32 run's gap to f64)")
        check("--show", *both("f32", "f32-acc2", "metrics"), *both("f32", "f32-acc2", "weights"),
              "--bound-from", f("f64", "jsonl"), f("f64", "safetensors"))
        print(f"== (c) {m}: grad_accum 2 vs 1, f64")
        # Analysed: the f64 analogue of bounds.py's loss floor (64 f64 ulps,
        # relative), and the weights, saved as f32, one f32 ulp of a weight
        # below 2 apart at most (two f64 values ulps apart round to neighbours).
        check(*both("f64-acc2", "f64", "metrics"), "--loss-tol", repr(64 * 2.0 ** -53),
              "--grad-norm-tol", repr(64 * 2.0 ** -53),
              *both("f64-acc2", "f64", "weights"), "--weight-tol", repr(2.0 ** -23))
        print(f"== {m}: --clip-grad-norm 1 vs off (step 1 identical: grad_norm is the pre-clip norm;"
              " then they differ: the clip acted)")
        check(*both("f32-clip", "f32", "metrics"), "--steps", "1", "--loss-tol", "0", "--grad-norm-tol", "0")
        with contextlib.redirect_stderr(io.StringIO()):
            if cmp(*both("f32-clip", "f32", "metrics"), "--loss-tol", "0", quiet=True) == 0:
                sys.exit("selfcheck: FAILED: --clip-grad-norm 1 changed nothing")
        print(f"== {m}: --bf16-params vs f32 (not equal: the bf16 rounding ran)")
        with contextlib.redirect_stderr(io.StringIO()):
            if cmp(*both("bf16", "f32", "metrics"), "--loss-tol", "0", quiet=True) == 0:
                sys.exit("selfcheck: FAILED: --bf16-params changed nothing")
        a, b = safetensors_io.read_info(init), safetensors_io.read_info(f("f32", "safetensors"))
        assert a == b, (a, b)
        print(f"  saved weights: the input's {len(a)} names, shapes and dtypes")


if __name__ == "__main__":
    main()
