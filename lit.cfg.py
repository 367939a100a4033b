# lit configuration for fsdp: FileCheck tests of the tools, passes and dialects.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "fsdp"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.join(config.fsdp_src_root, "tests", "lit")
config.test_exec_root = os.path.join(config.fsdp_obj_root, "tests", "lit")
config.excludes = ["Inputs"]

config.substitutions.append(("%models", os.path.join(config.fsdp_src_root, "models")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%e2e", os.path.join(config.fsdp_src_root, "tests", "e2e")))
# Debian's interpreter, which has torch; the first python3 on PATH may not.
config.substitutions.append(("%python", "/usr/bin/python3"))
# OpenMPI refuses root unless told; CI runs as root.
config.substitutions.append(
    ("%mpirun", "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun"))

# "nccl": fsdp-run was built with --backend nccl (CUDA and NCCL found);
# "gpu": this machine has an NVIDIA GPU (nvidia-smi lists one).
if getattr(config, "fsdp_have_nccl", False):
    config.available_features.add("nccl")
try:
    import subprocess
    listed = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, timeout=30)
    if listed.returncode == 0 and b"GPU" in listed.stdout:
        config.available_features.add("gpu")
except (OSError, subprocess.SubprocessError):
    pass

# "mount-namespace": this process may mount a tmpfs in a private mount
# namespace (root), as the full-disk checkpoint test does.
try:
    ns = subprocess.run(["unshare", "-m", "sh", "-c",
                         "d=$(mktemp -d) && mount -t tmpfs -o size=64k fsdp-probe $d && umount $d && rmdir $d"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    if ns.returncode == 0:
        config.available_features.add("mount-namespace")
except (OSError, subprocess.SubprocessError):
    pass

llvm_config.use_default_substitutions()
# OpenBLAS's and torch's kernel choice passes through, so that a test's bounds
# can be checked under another CPU's kernels (tests/e2e/cross_cpu.sh).
llvm_config.with_system_environment(["PATH", "HOME", "TMPDIR", "OPENBLAS_CORETYPE",
                                     "ATEN_CPU_CAPABILITY", "DNNL_MAX_CPU_ISA"])
llvm_config.with_environment(
    "PATH", [config.fsdp_tools_dir, config.llvm_tools_dir], append_path=True)
tools = ["fsdp-opt", "fsdp-plan", "fsdp-translate", "fsdp-run", "fsdp-calibrate", "fsdp-trace-compare", "fsdp-sgemm-bench", "fsdp-tokenize", "FileCheck", "not", "count", "split-file"]
llvm_config.add_tool_substitutions(tools, [config.fsdp_tools_dir, config.llvm_tools_dir])
