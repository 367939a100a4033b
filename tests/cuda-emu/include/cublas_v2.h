// The emulator's stand-in for cuBLAS (tests/cuda-emu): what cuda.cu and the
// kernel tests call. cublasGemmEx is a reference column-major GEMM over f32
// or bf16 (CUDA_R_16BF) operands with CUBLAS_COMPUTE_32F that refuses what
// cuBLAS refuses, and any other combination, and checks its operands' extents.
#ifndef FSDP_TESTS_CUDA_EMU_CUBLAS_V2_H
#define FSDP_TESTS_CUDA_EMU_CUBLAS_V2_H
#include "../cuda_emu.h"

typedef struct cublasContext *cublasHandle_t;

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace, size_t bytes);
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t *stream);
const char *cublasGetStatusString(cublasStatus_t status);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType_t Atype, int lda, const void *B,
                            cudaDataType_t Btype, int ldb, const void *beta, void *C,
                            cudaDataType_t Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo);
#endif
