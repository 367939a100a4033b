// The emulator's stand-in for the CUDA runtime API's header (tests/cuda-emu):
// only the emulated builds put this folder on their include path.
#ifndef FSDP_TESTS_CUDA_EMU_CUDA_RUNTIME_API_H
#define FSDP_TESTS_CUDA_EMU_CUDA_RUNTIME_API_H
#include "../cuda_emu.h"
#endif
