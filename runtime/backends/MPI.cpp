//===- MPI.cpp - one process a rank, collectives through OpenMPI ----------===//
//
// Shard and replica groups are MPI communicators split from the world. The
// comm stream's thread makes the collectives; the compute thread makes only
// the step's bookkeeping reductions, between phases, so MPI is never entered
// by both at once. A rank that fails says why and aborts the job: mpirun then
// stops every rank, naming the one that aborted.
//
//===----------------------------------------------------------------------===//
#include "runtime/Backend.h"
#include "runtime/kernels/cpu.h"

// The C API only; OpenMPI would otherwise pull in its deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <vector>

using namespace fsdp::runtime;

namespace {

// Sums bf16 values pairwise in f32, rounding each partial sum to bf16, as a
// bf16 reduction does.
void sumBf16(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = fsdp::kernels::floatToBf16(fsdp::kernels::bf16ToFloat(a[i]) +
                                      fsdp::kernels::bf16ToFloat(b[i]));
}

class MPICommunicator : public Communicator {
public:
  MPICommunicator(int shardSize) : Communicator(shardSize) {
    MPI_Comm_rank(MPI_COMM_WORLD, &myRank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_dup(MPI_COMM_WORLD, &world);
    MPI_Comm_split(MPI_COMM_WORLD, myRank / shardSize, myRank % shardSize, &shard);
    MPI_Comm_split(MPI_COMM_WORLD, myRank % shardSize, myRank / shardSize, &replica);
    MPI_Op_create(&sumBf16, /*commute=*/1, &bf16Sum);
  }
  ~MPICommunicator() override {
    MPI_Op_free(&bf16Sum);
    MPI_Comm_free(&replica);
    MPI_Comm_free(&shard);
    MPI_Comm_free(&world);
  }

  int rank() const override { return myRank; }
  int worldSize() const override { return size; }

  bool allGather(Group g, const void *src, void *dst, int64_t bytes) override {
    int me = memberIndex(g);
    bool inPlace = static_cast<const char *>(src) == static_cast<char *>(dst) + me * bytes;
    return check(MPI_Allgather(inPlace ? MPI_IN_PLACE : src, (int)bytes, MPI_BYTE, dst,
                               (int)bytes, MPI_BYTE, comm(g)));
  }

  bool reduceScatterAdd(Group g, const float *src, float *dst, int64_t count) override {
    grow(count * 4);
    float *part = reinterpret_cast<float *>(staging.data());
    if (!check(MPI_Reduce_scatter_block(src, part, (int)count, MPI_FLOAT, MPI_SUM, comm(g))))
      return false;
    for (int64_t k = 0; k < count; ++k)
      dst[k] += part[k];
    return true;
  }

  bool reduceScatterAddBf16(Group g, const uint16_t *src, float *dst, int64_t count) override {
    grow(count * 2);
    uint16_t *part = reinterpret_cast<uint16_t *>(staging.data());
    if (!check(MPI_Reduce_scatter_block(src, part, (int)count, MPI_UINT16_T, bf16Sum, comm(g))))
      return false;
    for (int64_t k = 0; k < count; ++k)
      dst[k] += fsdp::kernels::bf16ToFloat(part[k]);
    return true;
  }

  bool allReduce(Group g, float *buf, int64_t count) override {
    return check(MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, comm(g)));
  }

  bool allReduceScalar(Group g, double *value) override {
    return check(MPI_Allreduce(MPI_IN_PLACE, value, 1, MPI_DOUBLE, MPI_SUM, comm(g)));
  }

  void abort(const std::string &why) override {
    std::fprintf(stderr, "fsdp-run: error: %s\n", why.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::string error() const override { return reason; }
  int64_t stagingBytes() const override { return staging.capacity(); }

private:
  MPI_Comm comm(Group g) const {
    return g == Group::Shard ? shard : g == Group::Replica ? replica : world;
  }
  void grow(int64_t bytes) {
    if ((int64_t)staging.size() < bytes)
      staging.resize(bytes);
  }
  bool check(int rc) {
    if (rc == MPI_SUCCESS)
      return true;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    reason = std::string("MPI: ") + std::string(text, len);
    return false;
  }

  int myRank = 0, size = 1;
  MPI_Comm world, shard, replica;
  MPI_Op bf16Sum;
  std::vector<char> staging;
  std::string reason;
};

} // namespace

bool fsdp::runtime::initMPI(int *argc, char ***argv, int *rank, int *size) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    return false;
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  return provided >= MPI_THREAD_SERIALIZED;
}

void fsdp::runtime::finalizeMPI() { MPI_Finalize(); }

void fsdp::runtime::abortMPI() { MPI_Abort(MPI_COMM_WORLD, 1); }

std::unique_ptr<Communicator> fsdp::runtime::mpiCommunicator(int shardSize) {
  return std::make_unique<MPICommunicator>(shardSize);
}
