// The emulator's stand-in for the CUDA runtime's header (tests/cuda-emu):
// only the emulated test puts this folder on its include path.
#ifndef FSDP_TESTS_CUDA_EMU_CUDA_RUNTIME_H
#define FSDP_TESTS_CUDA_EMU_CUDA_RUNTIME_H
#include "../cuda_emu.h"
#endif
