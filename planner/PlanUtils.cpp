//===- PlanUtils.cpp ------------------------------------------------------===//
#include "planner/PlanUtils.h"

using namespace mlir;
using namespace fsdp;

plan::StepOp fsdp::getStep(ModuleOp module) {
  auto steps = module.getOps<plan::StepOp>();
  return steps.empty() ? plan::StepOp() : *steps.begin();
}

std::vector<plan::UnitOp> fsdp::getUnits(ModuleOp module) {
  std::vector<plan::UnitOp> units(module.getOps<plan::UnitOp>().begin(),
                                  module.getOps<plan::UnitOp>().end());
  llvm::stable_sort(units,
                    [](plan::UnitOp a, plan::UnitOp b) { return a.getIndex() < b.getIndex(); });
  return units;
}

llvm::StringMap<plan::UnitOp> fsdp::unitsByParam(ModuleOp module) {
  llvm::StringMap<plan::UnitOp> map;
  for (plan::UnitOp u : module.getOps<plan::UnitOp>())
    for (Attribute p : u.getParams())
      map[cast<StringAttr>(p).getValue()] = u;
  return map;
}

llvm::StringMap<plan::UnitOp> fsdp::unitsByName(ModuleOp module) {
  llvm::StringMap<plan::UnitOp> map;
  for (plan::UnitOp u : module.getOps<plan::UnitOp>())
    map[u.getSymName()] = u;
  return map;
}

plan::UnitOp fsdp::unitOfOp(Operation *op, const llvm::StringMap<plan::UnitOp> &byName) {
  auto ref = op->getAttrOfType<FlatSymbolRefAttr>("unit");
  if (!ref)
    return {};
  auto it = byName.find(ref.getValue());
  return it == byName.end() ? plan::UnitOp() : it->second;
}

plan::UnitOp fsdp::unitOfValue(Value v, const llvm::StringMap<plan::UnitOp> &units) {
  auto p = v.getDefiningOp<nn::ParamOp>();
  if (!p)
    return {};
  auto it = units.find(p.getName());
  return it == units.end() ? plan::UnitOp() : it->second;
}

std::string fsdp::unitNameOf(Operation *op, const llvm::StringMap<plan::UnitOp> &byParam,
                             StringRef blockPrefix) {
  for (Value v : op->getOperands()) {
    Value p = v;
    if (auto up = v.getDefiningOp<plan::CastOp>())
      p = up.getParam();
    if (plan::UnitOp u = unitOfValue(p, byParam))
      return u.getSymName().str();
  }
  if (auto ref = op->getAttrOfType<FlatSymbolRefAttr>("unit"))
    return ref.getValue().str();
  if (auto m = op->getAttrOfType<StringAttr>("module")) {
    StringRef path = m.getValue();
    if (!blockPrefix.empty() && path.consume_front(blockPrefix) && path.consume_front("."))
      return "block" + path.split('.').first.str();
  }
  return "root";
}

Operation *fsdp::backwardStart(plan::StepOp step) {
  // After the loss: the cross-entropy, and the load-balancing loss added
  // to it right after.
  for (Operation &op : step.getBody().front())
    if (isa<nn::CrossEntropyOp>(op)) {
      Operation *next = op.getNextNode();
      return next && isa<nn::MoeAuxLossOp>(next) ? next->getNextNode() : next;
    }
  return nullptr;
}

DenseMap<Operation *, int64_t> fsdp::positions(plan::StepOp step) {
  DenseMap<Operation *, int64_t> pos;
  int64_t i = 0;
  for (Operation &op : step.getBody().front())
    pos[&op] = i++;
  return pos;
}

int64_t fsdp::shardSizeOf(plan::Strategy strategy, int64_t worldSize, int64_t shardSize) {
  switch (strategy) {
  case plan::Strategy::FullShard:
  case plan::Strategy::ShardGradOp:
    return worldSize;
  case plan::Strategy::NoShard:
    return 1;
  case plan::Strategy::HybridShard:
    return shardSize > 0 ? shardSize : worldSize;
  }
  llvm_unreachable("a strategy without a shard group");
}

int64_t fsdp::collectiveElementBytes(Operation *op) {
  std::optional<plan::Dtype> dtype;
  if (auto g = dyn_cast<plan::AllGatherOp>(op))
    dtype = g.getDtype();
  else if (auto rs = dyn_cast<plan::ReduceScatterOp>(op))
    dtype = rs.getDtype();
  return dtype == plan::Dtype::BF16 ? 2 : 4;
}

int64_t fsdp::elementBytes(Type type) {
  Type e = isa<ShapedType>(type) ? cast<ShapedType>(type).getElementType() : type;
  return (e.getIntOrFloatBitWidth() + 7) / 8;
}

int64_t fsdp::tpPartialShardNumel(plan::UnitOp u) {
  std::optional<ArrayRef<bool>> partial = u.getTpPartial();
  if (!partial)
    return 0;
  // Each partial parameter's elements, counted in the shards they fall in.
  int64_t shard = u.getShardNumel(), most = 0;
  llvm::DenseMap<int64_t, int64_t> inShard;
  for (auto [k, isPartial] : llvm::enumerate(*partial)) {
    if (!isPartial)
      continue;
    int64_t begin = u.getOffsets()[k], end = begin + u.getSizes()[k];
    for (int64_t s = begin / shard; s * shard < end; ++s) {
      int64_t n = std::min(end, (s + 1) * shard) - std::max(begin, s * shard);
      most = std::max(most, inShard[s] += n);
    }
  }
  return most;
}
