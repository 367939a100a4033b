#!/usr/bin/env python3
"""The GPU backend end to end on the emulated device (CTest label gpu-emulated).

usage: e2e.py BIN_DIR PLUGIN MODELS_DIR WORK_DIR

gpt2-tiny planned for the cuda target (--cluster H100-SXM.json) runs through
`fsdp-run --backend nccl` with FSDP_NCCL_PLUGIN naming the emulated plugin
(lib/libfsdp-nccl-emulated.so): exactly what a user runs, with the device
executor, the NCCL communicators and cuda.cu compiled from the same sources
as libfsdp-nccl.so. World 1 without a bootstrap; world 2 one process a
rank, with the file bootstrap (--rank R --nccl-id-file F) and under mpirun
(where there is one: without it the test fails, saying so); and llama-tiny
at world 2 with bf16 compute, selective activation checkpointing and
gradient accumulation 2 (CASES). Each is held to
the threads backend running the cpu-target plan of the same settings:

  * losses and grad norms: the measured rule of tests/README.md ("How a
    comparison is bounded"): A is the threads run, X the same run under
    another OpenBLAS kernel set (each of bounds.blas_alternates(): Nehalem's
    SSE kernels, Sandybridge's AVX ones), all correct; the emulated run B must
    lie within compare.py --spread-from's bound for the largest gap (4x A's
    gap to X, floor 64 f32 ulps). The control: the threads run with
    another seed must fall outside that bound.
  * memory: every step's measured arena peak equals the plan's arena_bytes
    (and the prediction), byte for byte.

Before those, the switch refuses what it cannot use, each time with exit 1,
one error naming the variable, and no metrics file: FSDP_NCCL_PLUGIN empty,
naming no file, or naming a library that is not an fsdp NCCL backend;
FSDP_EMULATED_GPU_MEMORY not a count; a device smaller than the plan's
arena (before step 1, saying both sizes).

And a fault: at world 2 (the file bootstrap), rank 1's fifth collective
fails asynchronously (FSDP_EMU_NCCL_FAULT=1:5, the NCCL emulation's): both
ranks exit 1, rank 0's error names rank 1, and neither error repeats the
FSDP_CUDA_SYNC hint (a peer's failure carried it twice).

The last line says what ran; exit 0 only when everything held.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import bounds  # noqa: E402  (tests/e2e: the one definition of the bound rules)

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, "..", "e2e", "compare.py")
STEPS = 2
# (model, world, launch, plan settings, grad-accum): how each emulated run
# starts ("none": world 1, no bootstrap; "file": --rank/--nccl-id-file).
CASES = [
    ("gpt2-tiny", 1, "none", [], 1),
    ("gpt2-tiny", 2, "file", [], 1),
    ("gpt2-tiny", 2, "mpirun", [], 1),
    ("llama-tiny", 2, "file", ["--compute-dtype", "bf16", "--activation-checkpointing",
                               "selective"], 2),
]
TIMEOUT_S = 300  # a hang ends the test with the ranks' output, never blocks CI


def run(cmd, env=None, check=True):
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=TIMEOUT_S)
    if check and r.returncode != 0:
        sys.exit("FAILED (exit %d): %s\n%s" % (r.returncode, " ".join(cmd), r.stdout))
    return r


def metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def refusals(fsdp_run, plan, plugin, arena, work):
    """Each (environment, expected lines): exit 1, the lines, no metrics."""
    libm = sorted({l.split()[-1] for l in open("/proc/self/maps") if "/libm.so" in l})
    if not libm:
        sys.exit("FAILED: no libm mapped into this python to stand for a foreign library")
    missing = os.path.join(work, "missing.so")
    cases = [
        ({"FSDP_NCCL_PLUGIN": ""}, ["fsdp-run: error: --backend nccl: FSDP_NCCL_PLUGIN is set but "
                                    "empty"]),
        ({"FSDP_NCCL_PLUGIN": missing}, ["fsdp-run: error: --backend nccl: FSDP_NCCL_PLUGIN=%s: "
                                         "cannot load %s: " % (missing, missing)]),
        ({"FSDP_NCCL_PLUGIN": libm[0]}, ["fsdp-run: error: --backend nccl: FSDP_NCCL_PLUGIN=%s: "
                                         "%s is not this fsdp-run's NCCL backend" % (libm[0],
                                                                                     libm[0])]),
        ({"FSDP_NCCL_PLUGIN": plugin, "FSDP_EMULATED_GPU_MEMORY": "80GiB"},
         ["cuda-emu: FSDP_EMULATED_GPU_MEMORY='80GiB': not a count",
          "fsdp-run: error: --backend nccl: no CUDA device (cudaGetDeviceCount: "]),
        ({"FSDP_NCCL_PLUGIN": plugin, "FSDP_EMULATED_GPU_MEMORY": str(arena - 1)},
         ["cuda-emu: cudaMalloc of %d bytes: 0 of the device's %d bytes "
          "(FSDP_EMULATED_GPU_MEMORY) in use" % (arena, arena - 1),
          "cudaMalloc of the arena (%d bytes): CUDA: out of memory" % arena]),
    ]
    for extra, expected in cases:
        env = dict(os.environ)
        env.pop("FSDP_EMULATED_GPU_MEMORY", None)
        env.update(extra)
        out = os.path.join(work, "refused.jsonl")
        cmd = [fsdp_run, plan, "--backend", "nccl", "--steps", "1", "--metrics", out]
        r = run(cmd, env=env, check=False)
        where = " ".join("%s=%s" % kv for kv in extra.items())
        if r.returncode != 1:
            sys.exit("FAILED: %s: exit %d, not 1\n%s" % (where, r.returncode, r.stdout))
        for line in expected:
            if line not in r.stdout:
                sys.exit("FAILED: %s: no '%s' in\n%s" % (where, line, r.stdout))
        if "step 1" in r.stdout or (os.path.exists(out) and os.path.getsize(out) > 0):
            sys.exit("FAILED: %s: a step ran or metrics were written\n%s" % (where, r.stdout))
    return len(cases)


def spawn_ranks(cmds, env):
    """Runs one process a rank; returns [(cmd, exit status, output)]."""
    procs = [(cmd, subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)) for cmd in cmds]
    done = []
    for cmd, p in procs:
        try:
            out, _ = p.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for _, q in procs:
                q.kill()
            sys.exit("FAILED (hang): %s" % " ".join(cmd))
        done.append((cmd, p.returncode, out))
    return done


def injected_fault(fsdp_run, plan, env, work):
    idf = os.path.join(work, "fault-id")
    cmds = [[fsdp_run, plan, "--backend", "nccl", "--steps", "2", "--quiet", "--timeout", "60",
             "--rank", str(r), "--nccl-id-file", idf] for r in range(2)]
    results = spawn_ranks(cmds, dict(env, FSDP_EMU_NCCL_FAULT="1:5"))
    hint = "set FSDP_CUDA_SYNC=1"
    for cmd, status, out in results:
        if status != 1 or out.count(hint) > 1 or "fsdp-run: error: " not in out:
            sys.exit("FAILED: the injected fault: exit %d (1 expected), %d hints (at most 1):\n"
                     "%s\n%s" % (status, out.count(hint), " ".join(cmd), out))
    if "rank 1" not in results[0][2]:
        sys.exit("FAILED: the injected fault: rank 0's error does not name rank 1:\n%s"
                 % results[0][2])


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    bin_dir, plugin, models, work = sys.argv[1:]
    os.makedirs(work, exist_ok=True)
    for name in os.listdir(work):
        os.remove(os.path.join(work, name))
    fsdp_plan, fsdp_run = os.path.join(bin_dir, "fsdp-plan"), os.path.join(bin_dir, "fsdp-run")
    if not os.path.isfile(plugin):
        sys.exit("FAILED: no emulated plugin at %s" % plugin)
    emulated = dict(os.environ, FSDP_NCCL_PLUGIN=plugin)
    emulated.pop("FSDP_EMULATED_GPU_MEMORY", None)
    common = ["--micro-batch", "2", "--seq-len", "16"]
    runs = 0
    mpirun = shutil.which("mpirun")
    if not mpirun:
        sys.exit("FAILED: no mpirun on PATH (the runs under MPI cannot be checked)")
    for model, world, launch, settings, accum in CASES:
        w = lambda name: os.path.join(work, "%s-w%d-%s-%s" % (model, world, launch, name))
        cfg = os.path.join(models, model, "config.json")
        plan = [fsdp_plan, cfg, "--world-size", str(world)] + common + settings
        run(plan + ["-o", w("cpu.json")])
        run(plan + ["--cluster", os.path.join(models, "hardware", "H100-SXM.json"),
                    "-o", w("cuda.json")])
        arena = json.load(open(w("cuda.json")))["arena_bytes"]
        if launch == "none":
            refused = refusals(fsdp_run, w("cuda.json"), plugin, arena, work)

        # The references: threads on the cpu-target plan, under two kernel sets.
        train = ["--steps", str(STEPS), "--quiet", "--grad-accum", str(accum)]
        run([fsdp_run, w("cpu.json"), "--metrics", w("a.jsonl")] + train)
        # Every other kernel set this CPU runs (bounds.blas_alternates): the
        # bound is 4x the largest gap to any of them, so that a CPU whose own
        # kernels are one of the sets still measures a spread.
        alternates = []
        for label, env in bounds.blas_alternates():
            alternates.append(w("x-%s.jsonl" % label))
            run([fsdp_run, w("cpu.json"), "--metrics", alternates[-1]] + train,
                env=dict(os.environ, OPENBLAS_CORETYPE=env["OPENBLAS_CORETYPE"]))
        run([fsdp_run, w("cpu.json"), "--metrics", w("seed.jsonl"), "--seed", "1"] + train)

        # The emulated device: world 1 without a bootstrap, world 2 one
        # process a rank through the id file.
        nccl = [fsdp_run, w("cuda.json"), "--backend", "nccl", "--timeout", "120"] + train
        if launch == "none":
            run(nccl + ["--metrics", w("b.jsonl")], env=emulated)
        elif launch == "mpirun":
            mpi_env = dict(emulated, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
            run([mpirun, "-np", str(world), "--oversubscribe", "-x", "FSDP_NCCL_PLUGIN"] + nccl +
                ["--metrics", w("b.jsonl")], env=mpi_env)
        else:
            cmds = [nccl + ["--rank", str(r), "--nccl-id-file", w("id")] for r in range(world)]
            cmds[0] += ["--metrics", w("b.jsonl")]
            for cmd, status, out in spawn_ranks(cmds, emulated):
                if status != 0:
                    sys.exit("FAILED (exit %d): %s\n%s" % (status, " ".join(cmd), out))
            if model == "gpt2-tiny":
                injected_fault(fsdp_run, w("cuda.json"), emulated, work)
        runs += 1

        b = metrics(w("b.jsonl"))
        if len(b) != STEPS:
            sys.exit("FAILED: %s: %d metrics lines, %d steps" % (w(""), len(b), STEPS))
        for m in b:
            if not (m["peak_bytes"] == m["predicted_peak_bytes"] == arena):
                sys.exit("FAILED: %s step %d: device peak %d, predicted %d, plan's arena %d"
                         % (w(""), m["step"], m["peak_bytes"], m["predicted_peak_bytes"], arena))
        # Within 4x the gap to some alternate is within 4x the largest gap;
        # outside for every alternate is outside the largest.
        def within(run_b):
            outs = [run([PY, COMPARE, "--metrics", w("a.jsonl"), run_b, "--spread-from", x],
                        check=False) for x in alternates]
            return any(o.returncode == 0 for o in outs), "\n".join(o.stdout for o in outs)
        ok, out = within(w("b.jsonl"))
        if not ok:
            sys.exit("FAILED: %s: the emulated device's losses differ from threads'\n%s"
                     % (w(""), out))
        control, out = within(w("seed.jsonl"))
        if control:
            sys.exit("FAILED: %s: the control (another seed) is within the bound: the "
                     "comparison cannot fail\n%s" % (w(""), out))
        print("%s world %d (%s) %s grad-accum %d: %d steps, losses within the bound of "
              "threads', peak %d bytes = the plan's arena"
              % (model, world, launch, " ".join(settings), accum, STEPS, arena))
    print("FSDP_NCCL_PLUGIN and the emulated device's settings: %d refusals, each naming "
          "the variable" % refused)
    print("an asynchronous NCCL error injected into rank 1: both ranks stopped, naming it")
    print("emulated device: %d runs, losses equal threads, peaks exact" % runs)


if __name__ == "__main__":
    main()
