// runtime/kernels/cuda.cu, host wrappers and kernels, compiled as C++ over the
// emulator (tests/cuda-emu/include stands in for CUDA's headers).
#include "runtime/kernels/cuda.cu"
