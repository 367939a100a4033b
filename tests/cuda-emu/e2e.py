#!/usr/bin/env python3
"""The GPU backend end to end on the emulated device (CTest label gpu-emulated).

usage: e2e.py BIN_DIR PLUGIN MODELS_DIR WORK_DIR GROUP
       e2e.py --summary WORK_DIR RACES_RESULT GROUP...

Each GROUP is a CTest of its own (gpu-emulated-GROUP) so that `ctest -j2`
runs two at once; each writes WORK_DIR/GROUP/result.json when everything in
it held, and the summary (gpu-emulated-summary, which needs them all as
CTest fixtures) adds them up into the last line.

Every emulated run is `fsdp-run --backend nccl` with FSDP_NCCL_PLUGIN naming
the emulated plugin (lib/libfsdp-nccl-emulated.so): exactly what a user runs,
with the device executor, the NCCL communicators and cuda.cu compiled from
the same sources as libfsdp-nccl.so, on a plan for the cuda target
(--cluster H100-SXM.json). World 1 runs without a bootstrap; more ranks one
process a rank, either through the file bootstrap (--rank R --nccl-id-file
F, "file") or under mpirun ("mpirun"; without mpirun the test fails, saying
so). Each run is held to the threads backend running the cpu-target plan of
the same settings (and the same inputs: synthetic tokens for the decoders,
a token file and a mask token for bert-tiny, labelled images for vit-tiny):

  * losses and grad norms: the measured rule of tests/README.md ("How a
    comparison is bounded"): A is the threads run, X the same run under
    another OpenBLAS kernel set (each of bounds.blas_alternates(): Nehalem's
    SSE kernels, Sandybridge's AVX ones), all correct; the emulated run B must
    lie within compare.py --spread-from's bound for the largest gap (4x A's
    gap to X, floor 64 f32 ulps). With bf16 compute, X is also the same
    global batch as one rank's micro-batches of one sequence (the partial
    gradients summed in another order, bf16's alternative in bounds.py): the
    kernel sets barely move a bf16 run. The control: the threads run with
    another seed must fall outside that bound.
  * memory: every step's measured arena peak equals the plan's arena_bytes
    (and the prediction), byte for byte; and so does what the device saw:
    each rank's emulated device allocated one arena of that size and its
    operations read or wrote up to its last byte (FSDP_EMU_MEMORY_REPORT).

The groups (CASES: model, world, strategy, launch, plan settings,
grad-accum):
  switch    gpt2-tiny at world 1 and 2 (file and mpirun), and with
            --grad-sync last gpt2-tiny (f32, --reshard-after-backward false,
            grad-accum 3) and llama-tiny
            (bf16 compute, no-shard, grad-accum 3) at world 2, and
            llama-tiny with --reshard-after-forward 2 (bf16 parameters) at
            world 4, gpt2-tiny with --offload optimizer and with --offload
            all at world 2, and the llama-tiny hpZ case with --offload all
            (each host pool's measured peak the plan's, its losses and
            gradient norms those of the run without offload, bit for bit);
            before them the
            switch's refusals, each with exit 1, one error naming the
            variable and no metrics file: FSDP_NCCL_PLUGIN empty, naming no
            file, or naming a library that is not an fsdp NCCL backend;
            FSDP_EMULATED_GPU_MEMORY not a count; a device smaller than the
            plan's arena (before step 1, saying both sizes).
  llama, qwen3, bert, vit: the model at world 1, 2 and 4 between them
            (qwen3-tiny at 2 and 4), every strategy at 4 among them, f32 and
            bf16 compute, block and selective checkpointing, grad-accum 2.
  moe       mixtral-tiny and qwen3_moe-tiny (its aux loss on) at world 1 and
            2, f32 and bf16 each, grad-accum 2 and block checkpointing once.
  tp        tensor parallelism: llama-tiny at dp x tp 2 x 2 (sequence
            parallel) and 1 x 4 (shard-grad-op, its 2 kv heads shared by 2
            ranks each: the partial gradients summed through slots), and
            gpt2-tiny at 1 x 2 without sequence parallelism (its row-parallel
            biases added after the all-reduce) under mpirun, grad-accum 2.
  resume    gpt2-tiny at world 2: a checkpoint saved after step 2 of 4 by
            an emulated run resumes on threads, and one saved by threads
            resumes on the emulated device; steps 1-2 of the one and 3-4 of
            the other, together, are held to the uninterrupted threads run by
            the same rule (the kernels differ, so the bound is the rule's).
  faults    at world 2 (file bootstrap) every other rank stops, naming the
            rank, and no rank hangs (each with --timeout): rank 1 killed
            with SIGKILL after step 1; rank 1's fifth collective failing
            asynchronously (FSDP_EMU_NCCL_FAULT=1:5, the NCCL emulation's),
            through the file bootstrap (where neither error repeats the
            FSDP_CUDA_SYNC hint: a peer's failure carried it twice) and under
            mpirun (a non-zero exit, rank 1 named); rank 1's device smaller than the arena (before step 1:
            rank 1 says both sizes, rank 0 names rank 1, nothing written).

Left out to fit CI (about 550 CPU seconds for them all: 4-5 minutes at
ctest -j2 on 2 idle cores): the full cross product, qwen3-tiny at world 1,
gpt2-tiny at world 4, and vit-tiny's bf16 at world 4 (see CASES).
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import bounds  # noqa: E402  (tests/e2e: the one definition of the bound rules)

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.join(HERE, "..", "e2e")
COMPARE = os.path.join(E2E, "compare.py")
STEPS = 2
BF16 = ["--compute-dtype", "bf16"]
BLOCKS = ["--activation-checkpointing", "blocks"]
SELECTIVE = ["--activation-checkpointing", "selective"]
LAST = ["--grad-sync", "last"]  # no-sync accumulation: a last_micro_step phase
KEPT = ["--reshard-after-backward", "false"]  # gathered once a step: first_micro_step
HPZ = ["--reshard-after-forward", "2"]  # the reshard copy and the reshard group's gathers
OFFLOAD = ["--offload", "optimizer"]  # the pinned host pool, its copies and the host's AdamW
ALL = ["--offload", "all"]  # and the parameter shards there, copied in before each gather
# (model, world, strategy, launch, plan settings, grad-accum). launch: "none"
# (world 1, no bootstrap), "file" (--rank/--nccl-id-file) or "mpirun".
CASES = {
    "switch": [
        ("gpt2-tiny", 1, "full-shard", "none", [], 1),
        ("gpt2-tiny", 2, "full-shard", "file", [], 1),
        ("gpt2-tiny", 2, "full-shard", "mpirun", [], 1),
        # --grad-sync last: the accumulate kernels (f32 and bf16 gradients
        # into the f32 sums), the last micro-step's own lists and its joins
        # to the micro-step before it and to the optimizer; no-shard reduces
        # with a local reduce-scatter and an all-reduce. With
        # --reshard-after-backward false, the first micro-step's lists (the
        # only gathers) and its join to the next.
        ("gpt2-tiny", 2, "full-shard", "file", LAST + KEPT, 3),
        ("llama-tiny", 2, "no-shard", "mpirun", BF16 + LAST, 3),
        # --reshard-after-forward 2 at world 4: each unit's copy on the
        # compute stream (cudaMemcpyAsync), the backward gathers over the
        # NCCL reshard group (ncclCommSplit), in bf16.
        ("llama-tiny", 4, "full-shard", "file", ["--param-dtype", "bf16"] + HPZ, 1),
        # --offload optimizer: the gradient shard to the pinned host pool
        # (cudaMemcpyAsync, the host waiting on its event), AdamW on the
        # host, the master shard back on the compute stream.
        ("gpt2-tiny", 2, "full-shard", "mpirun", OFFLOAD, 1),
        # --offload all: each gather's shard copied in from the pinned pool
        # on the comm stream (f32; with bf16 parameters their bf16 copy,
        # rounded on the host after each update), with hpZ's copies.
        ("gpt2-tiny", 2, "full-shard", "file", ALL, 1),
        ("llama-tiny", 4, "full-shard", "file", ["--param-dtype", "bf16"] + HPZ + ALL, 1),
    ],
    "llama": [
        ("llama-tiny", 1, "full-shard", "none", BF16, 1),
        ("llama-tiny", 2, "full-shard", "file", BF16 + SELECTIVE, 2),
        ("llama-tiny", 4, "shard-grad-op", "mpirun", BLOCKS, 1),
    ],
    "qwen3": [
        ("qwen3-tiny", 2, "no-shard", "mpirun", [], 2),
        ("qwen3-tiny", 4, "full-shard", "file", BF16 + BLOCKS, 1),
        ("qwen3-tiny", 4, "hybrid-shard", "file", SELECTIVE, 1),
    ],
    "bert": [
        ("bert-tiny", 1, "full-shard", "none", SELECTIVE, 2),
        ("bert-tiny", 2, "shard-grad-op", "file", BF16, 1),
        ("bert-tiny", 4, "no-shard", "mpirun", BLOCKS, 1),
    ],
    # vit-tiny's bf16 runs are wide (tests/e2e/encoders_e2e.py: AdamW's first
    # step turns bf16 roundings of the key biases' zero gradients into full-lr
    # moves): at world 4 its step-2 loss sat 4.7e-5 from threads', outside the
    # decomposed batch's 1.2e-5 (its grad norm inside), so bf16 is at world 1.
    "vit": [
        ("vit-tiny", 1, "full-shard", "none", BF16 + BLOCKS, 1),
        ("vit-tiny", 2, "full-shard", "mpirun", [], 2),
        ("vit-tiny", 4, "hybrid-shard", "file", SELECTIVE, 1),
    ],
    # The mixture-of-experts ops' CUDA kernels (routing, the packed rows, the
    # grouped expert matmuls, the combine, every gradient): mixtral-tiny (4
    # experts, top 2, renormalized) and qwen3_moe-tiny (8 experts, top 2, not
    # renormalized, a dense layer between, the aux loss on), each in f32 and
    # bf16.
    "moe": [
        ("mixtral-tiny", 1, "full-shard", "none", [], 1),
        ("mixtral-tiny", 2, "shard-grad-op", "file", BF16, 1),
        ("qwen3_moe-tiny", 2, "full-shard", "file", [], 2),
        ("qwen3_moe-tiny", 1, "full-shard", "none", BF16 + BLOCKS, 1),
    ],
    # Tensor parallelism (--tp N): the tp collectives on the compute stream
    # over the tp communicator, the partial gradients' sums on the comm
    # stream over its other one (GQA's shared kv pieces through the slots),
    # the bias kernel, the grad norm's pieces counted once.
    "tp": [
        ("llama-tiny", 4, "full-shard", "file", ["--tp", "2"], 1),
        ("gpt2-tiny", 2, "full-shard", "mpirun", ["--tp", "2", "--sequence-parallel", "false"], 2),
        ("llama-tiny", 4, "shard-grad-op", "file", ["--tp", "4"], 1),
    ],
}
GROUPS = ["switch", "llama", "qwen3", "bert", "vit", "moe", "tp", "resume", "faults"]
TIMEOUT_S = 300  # a hang ends the test with the ranks' output, never blocks CI
RUN_TIMEOUT = "120"  # fsdp-run --timeout of the emulated runs
HINT = "set FSDP_CUDA_SYNC=1"


# The stream-order checker's reports in this group's runs (each one also
# fails its run): counted for the summary line.
STREAM_ORDER_REPORTS = [0]


def counted(out):
    STREAM_ORDER_REPORTS[0] += out.count("cuda-emu: stream-order race")
    return out


def run(cmd, env=None, check=True):
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=TIMEOUT_S)
    counted(r.stdout)
    if check and r.returncode != 0:
        sys.exit("FAILED (exit %d): %s\n%s" % (r.returncode, " ".join(cmd), r.stdout))
    return r


def metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class Ctx:
    def __init__(self, bin_dir, plugin, models, work):
        self.fsdp_plan = os.path.join(bin_dir, "fsdp-plan")
        self.fsdp_run = os.path.join(bin_dir, "fsdp-run")
        self.plugin, self.models, self.work = plugin, models, work
        self.emulated = dict(os.environ, FSDP_NCCL_PLUGIN=plugin)
        for var in ("FSDP_EMULATED_GPU_MEMORY", "FSDP_EMU_NCCL_FAULT"):
            self.emulated.pop(var, None)
        self.mpirun = shutil.which("mpirun")
        if not self.mpirun:
            sys.exit("FAILED: no mpirun on PATH (the runs under MPI cannot be checked)")
        self.inputs = {}

    def path(self, *parts):
        return os.path.join(self.work, "-".join(str(p) for p in parts))

    def model_inputs(self, model):
        """(plan flags, run flags) of the model's inputs; the files made once."""
        if model in self.inputs:
            return self.inputs[model]
        if model == "bert-tiny":
            data = self.path("tokens.bin")
            run([PY, os.path.join(E2E, "make_data.py"), data, "--random", "4000", "--vocab",
                 "503"])
            # 502: a token below bert-tiny's vocabulary of 503 (the default 103
            # would be one of the random tokens too, but not a mask of its own).
            got = (["--seq-len", "16"], ["--data", data, "--mask-token-id", "502"])
        elif model == "vit-tiny":
            im, lb = self.path("images.npy"), self.path("labels.npy")
            run([PY, os.path.join(E2E, "make_images.py"), im, lb, "--shapes", "--count", "64",
                 "--height", "16", "--width", "16"])
            got = ([], ["--data", im, "--labels", lb])  # its sequence is the patches
        else:
            got = (["--seq-len", "16"], ["--synthetic-data"])
        self.inputs[model] = got
        return got

    def plans(self, tag, model, world, strategy, settings, accum=1):
        """Plans for the cpu and the cuda target, `accum` micro-steps a step
        (the programs' grad_accum); returns (cpu, cuda, arena)."""
        cfg = os.path.join(self.models, model, "config.json")
        shard = ["--shard-size", "2"] if strategy == "hybrid-shard" else []
        plan = ([self.fsdp_plan, cfg, "--world-size", str(world), "--micro-batch", "2",
                 "--strategy", strategy, "--grad-accum", str(accum)] + shard +
                self.model_inputs(model)[0] + settings)
        cpu, cuda = self.path(tag, "cpu.json"), self.path(tag, "cuda.json")
        run(plan + ["-o", cpu])
        run(plan + ["--cluster", os.path.join(self.models, "hardware", "H100-SXM.json"),
                    "-o", cuda])
        return cpu, cuda, json.load(open(cuda))["arena_bytes"]

    def references(self, tag, plan, train):
        """The threads runs: A, each alternate kernel set, another seed."""
        a = self.path(tag, "a.jsonl")
        run([self.fsdp_run, plan, "--metrics", a] + train)
        # Every other kernel set this CPU runs (bounds.blas_alternates): the
        # bound is 4x the largest gap to any of them, so that a CPU whose own
        # kernels are one of the sets still measures a spread.
        alternates = []
        for label, env in bounds.blas_alternates():
            alternates.append(self.path(tag, "x", label + ".jsonl"))
            run([self.fsdp_run, plan, "--metrics", alternates[-1]] + train,
                env=dict(os.environ, OPENBLAS_CORETYPE=env["OPENBLAS_CORETYPE"]))
        seed = self.path(tag, "seed.jsonl")
        run([self.fsdp_run, plan, "--metrics", seed, "--seed", "1"] + train)
        return a, alternates, seed

    def decomposition(self, tag, model, world, settings, accum, inputs):
        """bf16's other correct alternative (bounds.BF16_FACTOR's): the same
        global batch as one rank's micro-batches of 1 sequence, so that every
        gradient sums its bf16-rounded partials in another order. The kernel
        sets alone barely move a bf16 run (their f32 GEMMs round to the same
        bf16 values), while the device's own summation order flips roundings
        as this does: qwen3-tiny at world 4 sat 4.45e-5 from threads in grad
        norm, 10x the kernel sets' bound, 5x inside this one's spread."""
        cfg = os.path.join(self.models, model, "config.json")
        plan = self.path(tag, "decomposed.json")
        # One rank has no reshard group, nor a gather to offload the
        # parameters for; resharding and offload change no value.
        for flag in (HPZ[0], ALL[0]):
            if flag in settings:
                k = settings.index(flag)
                settings = settings[:k] + settings[k + 2:]
        run([self.fsdp_plan, cfg, "--world-size", "1", "--micro-batch", "1",
             "--grad-accum", str(2 * world * accum)] +
            self.model_inputs(model)[0] + settings + ["-o", plan])
        out = self.path(tag, "x-decomposed.jsonl")
        run([self.fsdp_run, plan, "--metrics", out, "--steps", str(STEPS), "--quiet"] + inputs)
        return out

    def launch(self, how, world, cmd, metrics_path, env=None):
        """Runs cmd on the emulated device, one process a rank; exit 0 or fail.
        Each rank's device writes what it saw of its memory to
        metrics_path.mem.PID (device_touched reads them)."""
        env = dict(env or self.emulated, FSDP_EMU_MEMORY_REPORT=metrics_path + ".mem")
        if how == "none":
            run(cmd + ["--metrics", metrics_path], env=env)
        elif how == "mpirun":
            mpi_env = dict(env, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
            run([self.mpirun, "-np", str(world), "--oversubscribe", "-x", "FSDP_NCCL_PLUGIN",
                 "-x", "FSDP_EMU_MEMORY_REPORT"] +
                cmd + ["--metrics", metrics_path], env=mpi_env)
        else:
            idf = metrics_path + ".id"
            cmds = [cmd + ["--rank", str(r), "--nccl-id-file", idf] for r in range(world)]
            cmds[0] += ["--metrics", metrics_path]
            for c, status, out in spawn_ranks(cmds, env):
                if status != 0:
                    sys.exit("FAILED (exit %d): %s\n%s" % (status, " ".join(c), out))

    def held(self, what, a, alternates, seed, b, arena, steps):
        """b's peaks are the arena; its losses within the bound; the control not."""
        got = metrics(b)
        if [m["step"] for m in got] != list(range(steps - len(got) + 1, steps + 1)) or not got:
            sys.exit("FAILED: %s: %s lists steps %s" % (what, b, [m["step"] for m in got]))
        for m in got:
            if not (m["peak_bytes"] == m["predicted_peak_bytes"] == arena):
                sys.exit("FAILED: %s step %d: device peak %d, predicted %d, plan's arena %d"
                         % (what, m["step"], m["peak_bytes"], m["predicted_peak_bytes"], arena))
            # --offload: the host pool's peak, measured, is the plan's.
            if m.get("host_peak_bytes") != m.get("predicted_host_peak_bytes"):
                sys.exit("FAILED: %s step %d: host pool peak %s, predicted %s"
                         % (what, m["step"], m.get("host_peak_bytes"),
                            m.get("predicted_host_peak_bytes")))
        device_touched(what, b, arena)

        # Within 4x the gap to some alternate is within 4x the largest gap;
        # outside for every alternate is outside the largest.
        def within(run_b):
            outs = [run([PY, COMPARE, "--metrics", a, run_b, "--spread-from", x], check=False)
                    for x in alternates]
            return any(o.returncode == 0 for o in outs), "\n".join(o.stdout for o in outs)

        ok, out = within(b)
        if not ok:
            sys.exit("FAILED: %s: the emulated device's losses differ from threads'\n%s"
                     % (what, out))
        control, out = within(seed)
        if control:
            sys.exit("FAILED: %s: the control (another seed) is within the bound: the "
                     "comparison cannot fail\n%s" % (what, out))


def device_touched(what, metrics_path, arena):
    """What each rank's device saw (FSDP_EMU_MEMORY_REPORT): an allocation of
    the plan's arena, read or written up to its last byte, not past it (the
    guard pages stop that): the peak measured apart from the runtime's count."""
    reports = glob.glob(metrics_path + ".mem.*")
    if not reports:
        sys.exit("FAILED: %s: no device memory report at %s.mem.*" % (what, metrics_path))
    for path in reports:
        uses = [json.loads(l) for l in open(path)]
        arenas = [u for u in uses if u["bytes"] == arena]
        if len(arenas) != 1 or arenas[0]["touched"] != arena:
            sys.exit("FAILED: %s: %s: the device's allocations %s: not one arena of %d bytes "
                     "touched to its end" % (what, path, uses, arena))


def refusals(ctx, plan, arena):
    """Each (environment, expected lines): exit 1, the lines, no metrics."""
    libm = sorted({l.split()[-1] for l in open("/proc/self/maps") if "/libm.so" in l})
    if not libm:
        sys.exit("FAILED: no libm mapped into this python to stand for a foreign library")
    missing = os.path.join(ctx.work, "missing.so")
    plugin = ctx.plugin
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
        env = dict(ctx.emulated)
        env.update(extra)
        out = os.path.join(ctx.work, "refused.jsonl")
        cmd = [ctx.fsdp_run, plan, "--backend", "nccl", "--steps", "1", "--metrics", out,
               "--synthetic-data"]
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


def spawn_ranks(cmds, env, envs=None):
    """Runs one process a rank (envs: one environment each, else env);
    returns [(cmd, exit status, output)]."""
    envs = envs or [env] * len(cmds)
    procs = [(cmd, subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True))
             for cmd, e in zip(cmds, envs)]
    return wait_ranks(procs)


def wait_ranks(procs):
    done = []
    for cmd, p in procs:
        try:
            out, _ = p.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for _, q in procs:
                q.kill()
            sys.exit("FAILED (hang): %s" % " ".join(cmd))
        done.append((cmd, p.returncode, counted(out)))
    return done


def matrix_group(ctx, group):
    runs, lines = 0, []
    done = {}  # (model, world, strategy, launch, settings, accum) -> the device's metrics
    for model, world, strategy, launch, settings, accum in CASES[group]:
        # Unique within the group: the memory reports are found by name.
        tag = "%s-w%d-%s-%s%s" % (model, world, strategy, launch,
                                  "-" + "-".join(settings[1::2])
                                  if LAST[0] in settings or HPZ[0] in settings or
                                  OFFLOAD[0] in settings else "")
        what = "%s world %d %s (%s) %s grad-accum %d" % (model, world, strategy, launch,
                                                         " ".join(settings), accum)
        cpu, cuda, arena = ctx.plans(tag, model, world, strategy, settings, accum)
        if launch == "none" and group == "switch":
            lines.append("FSDP_NCCL_PLUGIN and the emulated device's settings: %d refusals, "
                         "each naming the variable" % refusals(ctx, cuda, arena))
        train = ["--steps", str(STEPS), "--quiet"]
        train += ctx.model_inputs(model)[1]
        a, alternates, seed = ctx.references(tag, cpu, train)
        if "bf16" in settings:
            alternates.append(ctx.decomposition(tag, model, world, settings, accum,
                                                ctx.model_inputs(model)[1]))
        b = ctx.path(tag, "b.jsonl")
        ctx.launch(launch, world,
                   [ctx.fsdp_run, cuda, "--backend", "nccl", "--timeout", RUN_TIMEOUT] + train, b)
        ctx.held(what, a, alternates, seed, b, arena, STEPS)
        done[(model, world, strategy, launch, tuple(settings), accum)] = b
        # --offload: the host's AdamW rounds as the device's kernel does (no
        # contraction), the host's bf16 rounding as the device's, so the run
        # is the one without offload on the same device, bit for bit.
        if OFFLOAD[0] in settings:
            k = settings.index(OFFLOAD[0])
            key = (model, world, strategy, launch, tuple(settings[:k] + settings[k + 2:]), accum)
            if key not in done:
                sys.exit("FAILED: %s: no run without --offload to compare with" % what)
            same = [(m["loss"], m["grad_norm"]) for m in metrics(done[key])]
            if same != [(m["loss"], m["grad_norm"]) for m in metrics(b)]:
                sys.exit("FAILED: %s: the losses or gradient norms differ from the same run "
                         "without --offload on the device" % what)
            lines.append("%s: the same losses and gradient norms as without it, bit for bit"
                         % what)
        runs += 1
        print("%s: %d steps, losses within the bound of threads', peak %d bytes = the "
              "plan's arena, as the runtime and the device measured it" % (what, STEPS, arena))
    return runs, lines


def resume_group(ctx):
    """Emulated -> threads and threads -> emulated, 2 + 2 steps each."""
    model, world, half = "gpt2-tiny", 2, 2
    cpu, cuda, arena = ctx.plans("resume", model, world, "full-shard", [])
    train = ["--quiet", "--synthetic-data"]
    a, alternates, seed = ctx.references("resume", cpu, train + ["--steps", str(2 * half)])
    emu = [ctx.fsdp_run, cuda, "--backend", "nccl", "--timeout", RUN_TIMEOUT] + train
    thr = [ctx.fsdp_run, cpu] + train
    runs = 0
    for first, second in (("emulated", "threads"), ("threads", "emulated")):
        ck = ctx.path("resume", first, "ck")
        one, two = ctx.path("resume", first, "1.jsonl"), ctx.path("resume", first, "2.jsonl")
        legs = [(first, ["--steps", str(half), "--save", ck], one),
                (second, ["--steps", str(2 * half), "--resume", ck], two)]
        for side, flags, out in legs:
            if side == "threads":
                run(thr + flags + ["--metrics", out])
            else:
                ctx.launch("file", world, emu + flags, out)
                runs += 1
        # The emulated leg alone: its peaks are the plan's arena.
        emulated_leg = one if first == "emulated" else two
        for m in metrics(emulated_leg):
            if not (m["peak_bytes"] == m["predicted_peak_bytes"] == arena):
                sys.exit("FAILED: resume %s step %d: device peak %d, plan's arena %d"
                         % (first, m["step"], m["peak_bytes"], arena))
        device_touched("resume " + first, emulated_leg, arena)
        both = ctx.path("resume", first, "both.jsonl")
        with open(both, "w") as f:
            for m in metrics(one) + metrics(two):
                f.write(json.dumps(m) + "\n")
        what = "gpt2-tiny world 2: saved by %s after step %d, resumed on %s" % (first, half,
                                                                               second)
        check_joined(ctx, what, a, alternates, seed, both, 2 * half)
        print("%s: steps 1-%d losses within the bound of the uninterrupted threads run"
              % (what, 2 * half))
    return runs, []


def check_joined(ctx, what, a, alternates, seed, joined, steps):
    got = [m["step"] for m in metrics(joined)]
    if got != list(range(1, steps + 1)):
        sys.exit("FAILED: %s: the two legs list steps %s, not 1-%d" % (what, got, steps))
    ok = [run([PY, COMPARE, "--metrics", a, joined, "--spread-from", x], check=False)
          for x in alternates]
    if not any(o.returncode == 0 for o in ok):
        sys.exit("FAILED: %s: the losses differ from the uninterrupted run's\n%s"
                 % (what, "\n".join(o.stdout for o in ok)))
    control = [run([PY, COMPARE, "--metrics", a, seed, "--spread-from", x], check=False)
               for x in alternates]
    if any(o.returncode == 0 for o in control):
        sys.exit("FAILED: %s: the control (another seed) is within the bound" % what)


def rank_cmds(ctx, plan, idf, steps, extra=()):
    return [[ctx.fsdp_run, plan, "--backend", "nccl", "--steps", str(steps), "--timeout", "60",
             "--synthetic-data", "--rank", str(r), "--nccl-id-file", idf] + list(extra)
            for r in range(2)]


def expect_stopped(what, results, status_of=lambda r: 1, names_rank1=(0,)):
    for r, (cmd, status, out) in enumerate(results):
        if status != status_of(r) or out.count(HINT) > 1:
            sys.exit("FAILED: %s: rank %d: exit %d (%d expected), %d FSDP_CUDA_SYNC hints (at "
                     "most 1):\n%s\n%s" % (what, r, status, status_of(r), out.count(HINT),
                                           " ".join(cmd), out))
    for r in names_rank1:
        out = results[r][2]
        if "fsdp-run: error: " not in out or "rank 1" not in out:
            sys.exit("FAILED: %s: rank %d's error does not name rank 1:\n%s" % (what, r, out))


def faults_group(ctx):
    cpu, cuda, arena = ctx.plans("faults", "gpt2-tiny", 2, "full-shard", [])
    lines = []

    # An asynchronous NCCL error in rank 1's fifth collective, file bootstrap.
    fault = dict(ctx.emulated, FSDP_EMU_NCCL_FAULT="1:5")
    what = "FSDP_EMU_NCCL_FAULT=1:5 (--nccl-id-file)"
    expect_stopped(what, spawn_ranks(rank_cmds(ctx, cuda, ctx.path("fault-id"), 2,
                                               ["--quiet"]), fault))
    lines.append("%s: both ranks stopped, rank 0 naming rank 1" % what)

    # The same under mpirun: its output holds both ranks' lines.
    what = "FSDP_EMU_NCCL_FAULT=1:5 (mpirun)"
    r = run([ctx.mpirun, "-np", "2", "--oversubscribe", "-x", "FSDP_NCCL_PLUGIN", "-x",
             "FSDP_EMU_NCCL_FAULT", ctx.fsdp_run, cuda, "--backend", "nccl", "--steps", "2",
             "--quiet", "--timeout", "60", "--synthetic-data"],
            env=dict(fault, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"),
            check=False)
    if r.returncode == 0 or "fsdp-run: error: " not in r.stdout or "rank 1" not in r.stdout:
        sys.exit("FAILED: %s: exit %d, no error naming rank 1:\n%s" % (what, r.returncode,
                                                                        r.stdout))
    lines.append("%s: exit %d, naming rank 1" % (what, r.returncode))

    # Rank 1 killed with SIGKILL after its first step: rank 0 must stop (not
    # wait for ever), naming rank 1. Rank 0's metrics say when step 1 is done;
    # the outputs go to files so that no pipe fills while we wait.
    what = "rank 1 killed (SIGKILL) after step 1"
    m0 = ctx.path("kill-m0.jsonl")
    cmds = rank_cmds(ctx, cuda, ctx.path("kill-id"), 1000, ["--quiet"])
    cmds[0] += ["--metrics", m0]
    logs = [ctx.path("kill-out%d.txt" % r) for r in range(2)]
    procs = []
    for cmd, log in zip(cmds, logs):
        with open(log, "w") as f:
            procs.append(subprocess.Popen(cmd, env=ctx.emulated, stdout=f,
                                          stderr=subprocess.STDOUT))
    deadline = time.monotonic() + TIMEOUT_S
    while not (os.path.exists(m0) and os.path.getsize(m0) > 0):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            for p in procs:
                p.kill()
            sys.exit("FAILED: %s: step 1 never ended:\n%s" % (what, "".join(
                open(l).read() for l in logs)))
        time.sleep(0.05)
    procs[1].send_signal(signal.SIGKILL)
    try:
        procs[0].wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        procs[0].kill()
        sys.exit("FAILED (hang): %s: rank 0 did not stop" % what)
    procs[1].wait()
    out0 = open(logs[0]).read()
    if procs[0].returncode == 0 or "fsdp-run: error: " not in out0 or "rank 1" not in out0:
        sys.exit("FAILED: %s: rank 0 exit %d, no error naming rank 1:\n%s"
                 % (what, procs[0].returncode, out0))
    lines.append("%s: rank 0 stopped (exit %d), naming rank 1" % (what, procs[0].returncode))

    # Rank 1's device one byte smaller than the arena: before step 1, rank 1
    # says both sizes, rank 0 names rank 1, no metrics.
    what = "rank 1's FSDP_EMULATED_GPU_MEMORY one byte short of the arena"
    m0 = ctx.path("small-m0.jsonl")
    cmds = rank_cmds(ctx, cuda, ctx.path("small-id"), 1, ["--quiet"])
    cmds[0] += ["--metrics", m0]
    small = dict(ctx.emulated, FSDP_EMULATED_GPU_MEMORY=str(arena - 1))
    results = spawn_ranks(cmds, None, envs=[ctx.emulated, small])
    expect_stopped(what, results)
    sizes = "cudaMalloc of %d bytes: 0 of the device's %d bytes" % (arena, arena - 1)
    if sizes not in results[1][2]:
        sys.exit("FAILED: %s: rank 1 does not say '%s':\n%s" % (what, sizes, results[1][2]))
    # A progress line of step 1, not the words: a hang or peer report may
    # name "step 1" ("has not reached step 1 micro_step 1/1 ...").
    if any(re.search(r"(?m)^step 1/\d+ \|", out) for _, _, out in results) or (
            os.path.exists(m0) and os.path.getsize(m0) > 0):
        sys.exit("FAILED: %s: a step ran or metrics were written" % what)
    lines.append("%s: both stopped before step 1, both sizes said" % what)
    return 0, lines


def summary(work, races, groups):
    runs = reports = 0
    for g, path in [(g, os.path.join(work, g, "result.json")) for g in groups] + [
            ("races", races)]:
        if not os.path.isfile(path):
            sys.exit("FAILED: gpu-emulated-%s left no %s: it failed or did not run" % (g, path))
    for g in groups:
        result = json.load(open(os.path.join(work, g, "result.json")))
        runs += result["runs"]
        reports += result["stream_order_reports"]
    race = json.load(open(races))
    reports += race["normal_reports"]
    if reports or race["caught"] != race["waits"]:
        sys.exit("FAILED: %d stream-order reports, %d of %d dropped waits caught"
                 % (reports, race["caught"], race["waits"]))
    print("emulated device: %d runs, losses equal threads, peaks exact, %d stream-order reports, "
          "%d of %d dropped waits caught" % (runs, reports, race["caught"], race["waits"]))


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "--summary":
        return summary(sys.argv[2], sys.argv[3], sys.argv[4:])
    if len(sys.argv) != 6 or sys.argv[5] not in GROUPS:
        sys.exit(__doc__)
    bin_dir, plugin, models, work, group = sys.argv[1:]
    work = os.path.join(work, group)
    shutil.rmtree(work, ignore_errors=True)  # result.json of an earlier run too
    os.makedirs(work)
    if not os.path.isfile(plugin):
        sys.exit("FAILED: no emulated plugin at %s" % plugin)
    ctx = Ctx(bin_dir, plugin, models, work)
    if group == "resume":
        runs, lines = resume_group(ctx)
    elif group == "faults":
        runs, lines = faults_group(ctx)
    else:
        runs, lines = matrix_group(ctx, group)
    for line in lines:
        print(line)
    with open(os.path.join(work, "result.json"), "w") as f:
        json.dump({"runs": runs, "stream_order_reports": STREAM_ORDER_REPORTS[0]}, f)
    print("emulated device (%s): %d runs, losses equal threads, peaks exact" % (group, runs))


if __name__ == "__main__":
    main()
