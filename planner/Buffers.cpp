//===- Buffers.cpp --------------------------------------------------------===//
#include "planner/Buffers.h"
#include "planner/KernelScratch.h"
#include "runtime/Scratch.h"

using namespace mlir;
using namespace fsdp;

std::optional<int64_t> fsdp::recordedOffset(const Buffer &b, plan::StepOp step) {
  switch (b.role) {
  case BufferRole::UnitShard:
    return cast<plan::UnitOp>(b.owner).getShardOffset();
  case BufferRole::UnitGradShard:
    return cast<plan::UnitOp>(b.owner).getGradShardOffset();
  case BufferRole::UnitExpAvg:
    return cast<plan::UnitOp>(b.owner).getExpAvgOffset();
  case BufferRole::UnitExpAvgSq:
    return cast<plan::UnitOp>(b.owner).getExpAvgSqOffset();
  case BufferRole::UnitAccumulated:
    return cast<plan::UnitOp>(b.owner).getAccumulatedOffset();
  case BufferRole::UnitHostShard:
    return cast<plan::UnitOp>(b.owner).getHostShardOffset();
  case BufferRole::UnitHostGrad:
    return cast<plan::UnitOp>(b.owner).getHostGradOffset();
  case BufferRole::UnitHostGather:
    return cast<plan::UnitOp>(b.owner).getHostGatherOffset();
  case BufferRole::Gathered:
    return cast<plan::AllGatherOp>(b.owner).getOffset();
  case BufferRole::Resharded:
    return cast<plan::ReshardOp>(b.owner).getOffset();
  case BufferRole::GradsFull:
    return cast<plan::AllocOp>(b.owner).getOffset();
  case BufferRole::Input:
    return b.index == 0 ? step.getTokensOffset() : step.getTargetsOffset();
  case BufferRole::Scratch:
    if (auto rs = dyn_cast<plan::ReduceScatterOp>(b.owner))
      return rs.getScratchOffset();
    if (auto g = dyn_cast<plan::GradNormOp>(b.owner))
      return g.getScratchOffset();
    if (auto s = dyn_cast<plan::StepOp>(b.owner))
      return s.getWorkspaceOffset();
    if (auto a = b.owner->getAttrOfType<IntegerAttr>("scratch_offset"))
      return a.getInt();
    return std::nullopt;
  case BufferRole::Value: {
    auto offs = b.owner->getAttrOfType<DenseI64ArrayAttr>("offsets");
    if (offs && b.index < (int64_t)offs.size() && offs[b.index] >= 0)
      return offs[b.index];
    return std::nullopt;
  }
  }
  return std::nullopt;
}

const char *fsdp::categoryName(BufferCategory c) {
  switch (c) {
  case BufferCategory::Params:
    return "params";
  case BufferCategory::Grads:
    return "grads";
  case BufferCategory::Optimizer:
    return "optimizer";
  case BufferCategory::Unsharded:
    return "unsharded";
  case BufferCategory::Activations:
    return "activations";
  }
  return "?";
}

SmallVector<int64_t> fsdp::concreteShape(Type type, int64_t B, int64_t S) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape;
  int dyn = 0;
  for (int64_t d : t.getShape())
    shape.push_back(ShapedType::isDynamic(d) ? (dyn++ == 0 ? B : S) : d);
  // Sequence parallelism: the rank's part of the B x S tokens, one block
  // of rows (the memory plan refuses B x S that the parts do not divide).
  if (auto shard = dyn_cast_or_null<plan::TokenShardAttr>(t.getEncoding());
      shard && shape.size() >= 2) {
    shape[1] = shape[0] * shape[1] / shard.getParts();
    shape[0] = 1;
  }
  return shape;
}

int64_t fsdp::tensorBytes(Type type, int64_t B, int64_t S) {
  int64_t n = 1;
  for (int64_t d : concreteShape(type, B, S))
    n *= d;
  return n * elementBytes(type);
}

program::Target fsdp::kernelTarget(plan::StepOp step) {
  return step.getTargetOrCpu() == plan::Target::Cuda ? program::Target::Cuda : program::Target::Cpu;
}

FailureOr<int64_t> fsdp::scratchBytes(Operation *op, int64_t B, int64_t S) {
  auto step = op->getParentOfType<plan::StepOp>();
  if (!step || !op->hasTrait<nn::ComputeOp>())
    return 0;
  // Without the model the plan would give the kernel no scratch, and the
  // runtime would refuse the program: say which registration is missing.
  auto k = dyn_cast<KernelScratchOpInterface>(op);
  if (!k)
    return op->emitOpError() << "has no kernel-scratch model: the tool must register it "
                                "(fsdp::registerPlannerDialects, planner/KernelScratch.h)";
  return k.getScratchBytes(kernelTarget(step), B, S);
}

bool fsdp::producesTensors(Operation *op) {
  return isa<plan::CastOp, plan::TpAllReduceOp, plan::TpAllGatherOp, plan::TpReduceScatterOp,
             plan::TpChunkOp, plan::TpUnchunkOp>(op) ||
         (op->getDialect() && op->getDialect()->getNamespace() == "nn" && !isa<nn::ParamOp>(op));
}

bool fsdp::castIsGatheredValue(plan::CastOp c, const llvm::StringMap<plan::UnitOp> &byParam) {
  plan::UnitOp u = unitOfValue(c.getParam(), byParam);
  auto step = c->getParentOfType<plan::StepOp>();
  return u && u.getShardSize() > 1 && step.getParamDtypeOrF32() == plan::Dtype::BF16 &&
         cast<ShapedType>(c.getType()).getElementType().isBF16();
}

int64_t fsdp::reduceScatterStagingBytes(plan::ReduceScatterOp rs, plan::UnitOp u) {
  auto step = rs->getParentOfType<plan::StepOp>();
  return program::reduceScatterScratchBytes(
      kernelTarget(step), u.getPaddedNumel(), u.getShardNumel(), reducedElementBytes(step) == 2,
      rs.getDtype().value_or(plan::Dtype::F32) == plan::Dtype::BF16);
}

int64_t fsdp::gatheredElementBytes(plan::StepOp step) {
  return step.getParamDtypeOrF32() == plan::Dtype::BF16 ? 2 : 4;
}

int64_t fsdp::gradElementBytes(plan::StepOp step) {
  return step.getComputeDtypeOrF32() == plan::Dtype::BF16 ? 2 : 4;
}

int64_t fsdp::reducedElementBytes(plan::StepOp step) {
  return step.syncsAtLastMicroStep() ? 4 : gradElementBytes(step);
}

bool fsdp::isPersistent(BufferRole role) {
  return role == BufferRole::UnitShard || role == BufferRole::UnitGradShard ||
         role == BufferRole::UnitExpAvg || role == BufferRole::UnitExpAvgSq ||
         role == BufferRole::UnitAccumulated || role == BufferRole::UnitHostShard ||
         role == BufferRole::UnitHostGrad || role == BufferRole::UnitHostGather;
}

namespace {

/// The most bytes all of a plan's buffers may need together: the offsets,
/// peaks and sums derived from them (aligned) then fit in 64 bits.
constexpr int64_t kMaxPlanBytes = int64_t(1) << 60;

/// tensorBytes, or nullopt if it is over kMaxPlanBytes (without overflowing).
std::optional<int64_t> boundedTensorBytes(Type type, int64_t B, int64_t S) {
  int64_t n = elementBytes(type);
  for (int64_t d : concreteShape(type, B, S)) {
    if (d < 0 || (d > 0 && n > kMaxPlanBytes / d))
      return std::nullopt;
    n *= d;
  }
  return n;
}

} // namespace

FailureOr<BufferModel> fsdp::collectBuffers(ModuleOp module, int64_t B, int64_t S) {
  BufferModel model;
  model.microBatch = B;
  model.seqLen = S;
  plan::StepOp step = getStep(module);
  if (!step)
    return module.emitError() << "no training step to plan memory for";
  // Sequence parallelism: each rank of a tp group holds an equal part of
  // the micro-batch's tokens.
  WalkResult parts = step.walk([&](plan::TpChunkOp c) {
    auto shard =
        cast<plan::TokenShardAttr>(cast<RankedTensorType>(c.getResult().getType()).getEncoding());
    if ((B * S) % shard.getParts() == 0)
      return WalkResult::advance();
    c.emitOpError() << "parts the micro-batch's " << B << " x " << S << " = " << B * S
                    << " tokens among " << shard.getParts()
                    << " tensor-parallel ranks, which do not divide them evenly";
    return WalkResult::interrupt();
  });
  if (parts.wasInterrupted())
    return failure();
  auto pos = positions(step);
  Block &block = step.getBody().front();
  model.numPositions = block.getOperations().size();
  int64_t last = model.numPositions - 1;

  for (plan::UnitOp u : getUnits(module)) {
    int64_t bytes = u.getShardNumel() * 4;
    std::string n = u.getSymName().str();
    // offload = all: the host's master copy (below) is the parameter shard.
    if (!step.offloadsParams())
      model.buffers.push_back(
          {n + ".shard", BufferCategory::Params, BufferRole::UnitShard, bytes, 0, last, u, 0});
    model.buffers.push_back({n + ".grad_shard", BufferCategory::Grads, BufferRole::UnitGradShard,
                             bytes, 0, last, u, 0});
    model.buffers.push_back(
        {n + ".exp_avg", BufferCategory::Optimizer, BufferRole::UnitExpAvg, bytes, 0, last, u, 0});
    model.buffers.push_back({n + ".exp_avg_sq", BufferCategory::Optimizer, BufferRole::UnitExpAvgSq,
                             bytes, 0, last, u, 0});
    // offload = optimizer: the moments move to the host pool, beside the
    // master copy of the parameter shard and the gradient shard's copy
    // that AdamW reads there.
    if (step.offloadsOptimizer()) {
      model.buffers.end()[-1].host = model.buffers.end()[-2].host = true;
      model.buffers.push_back({n + ".host_shard", BufferCategory::Params, BufferRole::UnitHostShard,
                               bytes, 0, last, u, 0, -1, true});
      model.buffers.push_back({n + ".host_grad", BufferCategory::Grads, BufferRole::UnitHostGrad,
                               bytes, 0, last, u, 0, -1, true});
      // offload = all with bf16 gathers: the master shard's bf16 copy,
      // which the gathers send (rounded on the host after each update).
      if (step.offloadsParams() && gatheredElementBytes(step) == 2)
        model.buffers.push_back({n + ".host_gather", BufferCategory::Params,
                                 BufferRole::UnitHostGather, u.getShardNumel() * 2, 0, last, u, 0,
                                 -1, true});
    }
  }

  // grad_sync = last: each unit that accumulates has its f32 accumulation
  // buffer for the whole step (it carries the sum across micro-steps).
  {
    auto byName = unitsByName(module);
    for (auto a : step.getBody().getOps<plan::AccumulateOp>()) {
      plan::UnitOp u = unitOfOp(a, byName);
      if (!u)
        return a.emitOpError() << "names unknown unit " << a->getAttr("unit");
      if (llvm::any_of(model.buffers, [&](const Buffer &b) {
            return b.role == BufferRole::UnitAccumulated && b.owner == u.getOperation();
          }))
        continue;
      model.buffers.push_back({(u.getSymName() + ".accumulated").str(), BufferCategory::Grads,
                               BufferRole::UnitAccumulated, u.getPaddedNumel() * 4, 0, last, u, 0});
    }
  }

  auto lastUse = [&](Value v, int64_t def) {
    int64_t end = def;
    for (Operation *user : v.getUsers())
      end = std::max(end, pos[user]);
    return end;
  };

  // Sizes grow with the micro-batch and the sequence: refuse those whose
  // bytes would not fit in 64 bits, at the op that needs them.
  auto tooLarge = [&](InFlightDiagnostic diag) -> InFlightDiagnostic {
    diag << " needs more than 2^60 bytes at a micro-batch of " << B << " and " << S
         << " tokens a sequence";
    return diag;
  };
  if (B < 1 || S < 1)
    return module.emitError() << "the micro-batch and the sequence length must be positive, "
                                 "but are "
                              << B << " and " << S;
  if (S > kMaxPlanBytes / (2 * 64 * 4)) // attention's scratch
    return tooLarge(module.emitError() << "the plan");
  for (BlockArgument arg : block.getArguments()) {
    auto bytes = boundedTensorBytes(arg.getType(), B, S);
    if (!bytes)
      return tooLarge(module.emitError()
                      << "the step's " << (arg.getArgNumber() == 0 ? "tokens" : "targets"));
    model.buffers.push_back({arg.getArgNumber() == 0 ? "tokens" : "targets",
                             BufferCategory::Activations, BufferRole::Input, *bytes, 0,
                             lastUse(arg, 0), nullptr, arg.getArgNumber()});
  }

  // cuda: cuBLAS's workspace, the whole step's.
  if (int64_t bytes = program::stepWorkspaceBytes(kernelTarget(step)))
    model.buffers.push_back({"cublas_workspace", BufferCategory::Activations, BufferRole::Scratch,
                             bytes, 0, last, step, 0});

  // Values stored in a unit's gradient buffer have no buffer of their own.
  DenseSet<Value> inGradBuffer;
  for (auto g : block.getOps<plan::GradOp>())
    inGradBuffer.insert(g.getGrad());

  // A unit's gathered parameters live from the gather to the next free of
  // its parameters; its unsharded gradients from the alloc to the next free.
  auto byName = unitsByName(module);
  auto byParamMap = unitsByParam(module);
  llvm::StringMap<size_t> openParams, openGrads, openResharded;
  for (Operation &op : block) {
    int64_t p = pos[&op];
    // reshard_after_forward = N: this rank's 1/N of the gathered
    // parameters, from the reshard to the free of the resharded copy.
    if (auto r = dyn_cast<plan::ReshardOp>(op)) {
      plan::UnitOp u = unitOfOp(&op, byName);
      if (!u)
        return op.emitOpError() << "names unknown unit " << op.getAttr("unit");
      openResharded[u.getSymName()] = model.buffers.size();
      model.buffers.push_back(
          {(u.getSymName() + ".resharded").str(), BufferCategory::Unsharded, BufferRole::Resharded,
           u.getPaddedNumel() / step.getReshardSizeOr0() * gatheredElementBytes(step), p, last, &op,
           0});
      continue;
    }
    if (isa<plan::AllGatherOp, plan::AllocOp>(op)) {
      plan::UnitOp u = unitOfOp(&op, byName);
      if (!u)
        return op.emitOpError() << "names unknown unit " << op.getAttr("unit");
      bool gather = isa<plan::AllGatherOp>(op);
      // Gathered parameters are bf16 under mixed precision; gradients are
      // in the compute dtype.
      int64_t elem = gather ? collectiveElementBytes(&op) : gradElementBytes(step);
      // reshard_after_backward = false: gathered at the first micro-step and
      // kept across the step's micro-steps, so alive for all of the step.
      if (gather && step.keepsGatheredAcrossMicroSteps()) {
        model.buffers.push_back(
            {(u.getSymName() + ".params").str(), BufferCategory::Unsharded, BufferRole::Gathered,
             u.getPaddedNumel() * collectiveElementBytes(&op), 0, last, &op, 0});
        continue;
      }
      (gather ? openParams : openGrads)[u.getSymName()] = model.buffers.size();
      model.buffers.push_back({(u.getSymName() + (gather ? ".params" : ".grads")).str(),
                               BufferCategory::Unsharded,
                               gather ? BufferRole::Gathered : BufferRole::GradsFull,
                               u.getPaddedNumel() * elem, p, last, &op, 0});
      continue;
    }
    if (auto rs = dyn_cast<plan::ReduceScatterOp>(op)) {
      plan::UnitOp u = unitOfOp(&op, byName);
      if (int64_t bytes = u ? reduceScatterStagingBytes(rs, u) : 0) {
        // The comm stream's, until the compute stream waits for the reduction.
        int64_t end = p;
        for (Operation *user : rs.getEvent().getUsers())
          end = std::max(end, pos[user]);
        model.buffers.push_back(
            {"", BufferCategory::Unsharded, BufferRole::Scratch, bytes, p, end, &op, 0});
      }
      continue;
    }
    if (auto g = dyn_cast<plan::GradNormOp>(op)) {
      int64_t bytes =
          program::gradNormScratchBytes(kernelTarget(step), (int64_t)getUnits(module).size());
      if (bytes) {
        int64_t end = p;
        for (Operation *user : g.getEvent().getUsers())
          end = std::max(end, pos[user]);
        model.buffers.push_back(
            {"", BufferCategory::Activations, BufferRole::Scratch, bytes, p, end, &op, 0});
      }
      continue;
    }
    if (auto f = dyn_cast<plan::FreeOp>(op)) {
      auto &open = f.getKind() == plan::BufferKind::params      ? openParams
                   : f.getKind() == plan::BufferKind::resharded ? openResharded
                                                                : openGrads;
      auto it = open.find(f.getUnit());
      if (it != open.end()) {
        model.buffers[it->second].end = p;
        open.erase(it);
      }
      continue;
    }
    if (isa<nn::ParamOp>(op) || !producesTensors(&op))
      continue;
    if (auto c = dyn_cast<plan::CastOp>(op); c && castIsGatheredValue(c, byParamMap))
      continue;
    // A widened bf16 parameter is parameter memory, if short-lived.
    BufferCategory cat =
        isa<plan::CastOp>(op) ? BufferCategory::Unsharded : BufferCategory::Activations;
    for (OpResult r : op.getResults()) {
      if (inGradBuffer.contains(r))
        continue;
      auto bytes = boundedTensorBytes(r.getType(), B, S);
      if (!bytes)
        return tooLarge(op.emitOpError()
                        << "result #" << r.getResultNumber() << " of type " << r.getType());
      model.buffers.push_back(
          {"", cat, BufferRole::Value, *bytes, p, lastUse(r, p), &op, r.getResultNumber()});
    }
    FailureOr<int64_t> s = scratchBytes(&op, B, S);
    if (failed(s))
      return failure();
    if (*s)
      model.buffers.push_back(
          {"", BufferCategory::Activations, BufferRole::Scratch, *s, p, p, &op, 0});
  }
  // Each buffer is at most kMaxPlanBytes, so the sum cannot overflow before
  // it passes the limit.
  int64_t total = 0;
  for (const Buffer &buf : model.buffers) {
    total += alignUp(buf.bytes);
    if (total > kMaxPlanBytes)
      return tooLarge(module.emitError() << "the plan's buffers together") << " per rank";
  }
  return model;
}
