//===- WrapUnits.cpp - parameters grouped into wrap units -----------------===//
#include "planner/Passes.h"
#include "planner/PlanUtils.h"

#include "llvm/ADT/StringExtras.h"

#include <map>
#include <optional>

namespace fsdp {
#define GEN_PASS_DEF_WRAPUNITS
#include "planner/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

struct Group {
  std::string name, module;
  std::vector<nn::ParamOp> params;
  int64_t numel = 0;
};

struct WrapUnitsPass : public fsdp::impl::WrapUnitsBase<WrapUnitsPass> {
  using WrapUnitsBase::WrapUnitsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    plan::StepOp step = getStep(module);
    if (!step) {
      module.emitError() << "fsdp-wrap-units needs the training step (run fsdp-training-step)";
      return signalPassFailure();
    }
    if (!module.getOps<plan::UnitOp>().empty()) {
      module.emitError() << "the module already has wrap units";
      return signalPassFailure();
    }
    if (shardSize < 1) {
      module.emitError() << "shard-size must be at least 1, but is " << (int64_t)shardSize;
      return signalPassFailure();
    }
    std::vector<nn::ParamOp> params;
    for (auto p : step.getBody().getOps<nn::ParamOp>())
      params.push_back(p);

    std::vector<Group> groups;
    StringRef pol = policy;
    if (pol == "block" || pol == "experts") {
      groups = byBlock(step, params, pol == "experts");
    } else if (pol == "none") {
      groups.push_back({"all", "", params, 0});
    } else if (pol.consume_front("size:")) {
      int64_t minSize;
      if (pol.getAsInteger(10, minSize) || minSize <= 0) {
        module.emitError() << "wrap policy 'size:N' needs a positive N, got '" << policy << "'";
        return signalPassFailure();
      }
      groups = bySize(step, params, minSize);
    } else {
      module.emitError() << "unknown wrap policy '" << policy
                         << "'; expected block, experts, size:N or none";
      return signalPassFailure();
    }

    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    // Tensor parallelism (fsdp-tensor-parallel ran): every unit says how
    // each of its parameters is cut.
    bool tensorParallel = llvm::any_of(params, [](nn::ParamOp p) { return p.getTpPieces(); });
    int64_t index = 0;
    for (Group &g : groups) {
      if (g.params.empty())
        continue;
      SmallVector<Attribute> names;
      SmallVector<int64_t> offsets, sizes, dims, pieces, sections;
      SmallVector<bool> partial;
      int64_t offset = 0;
      for (nn::ParamOp p : g.params) {
        names.push_back(p.getNameAttr());
        offsets.push_back(offset);
        sizes.push_back(p.getNumElements());
        offset += p.getNumElements();
        dims.push_back(p.getTpDimOrNone());
        pieces.push_back(p.getTpPiecesOr1());
        sections.push_back(p.getTpSectionsOr1());
        partial.push_back(p.getTpPartial());
      }
      // Padding makes the flat size divide evenly into shards.
      int64_t padded = (offset + shardSize - 1) / shardSize * shardSize;
      auto unit = b.create<plan::UnitOp>(
          step.getLoc(), g.name, index++, g.module, b.getArrayAttr(names), offsets, sizes, offset,
          padded, shardSize,
          /*arena offsets, which the memory plan sets:*/ IntegerAttr(), IntegerAttr(),
          IntegerAttr(), IntegerAttr(), IntegerAttr(), IntegerAttr(), IntegerAttr(), IntegerAttr(),
          DenseI64ArrayAttr(), DenseI64ArrayAttr(), DenseI64ArrayAttr(), DenseBoolArrayAttr());
      if (tensorParallel) {
        unit.setTpDims(dims);
        unit.setTpPieces(pieces);
        unit.setTpSections(sections);
        unit.setTpPartial(partial);
      }
      ++numUnits;
    }
  }

  // FSDP's transformer wrapping: a unit per block, the rest in the root;
  // with `experts`, a block's experts (`<block>.<module>.experts.*`) in a
  // unit of their own after the block's.
  std::vector<Group> byBlock(plan::StepOp step, ArrayRef<nn::ParamOp> params,
                             bool experts = false) {
    StringRef prefix = step.getBlockPrefix().value_or("");
    int64_t numBlocks = step.getNumBlocks().value_or(0);
    std::vector<Group> groups(numBlocks + 1);
    groups[0].name = "root";
    groups[0].module = "";
    for (int64_t i = 0; i < numBlocks; ++i) {
      groups[i + 1].name = "block" + std::to_string(i);
      groups[i + 1].module = (prefix + "." + std::to_string(i)).str();
    }
    std::vector<Group> expertGroups(numBlocks);
    for (nn::ParamOp p : params) {
      StringRef name = p.getName();
      int64_t block = -1;
      if (!prefix.empty() && name.starts_with(prefix) && name.size() > prefix.size() &&
          name[prefix.size()] == '.') {
        StringRef idx = name.drop_front(prefix.size() + 1).split('.').first;
        if (idx.getAsInteger(10, block) || block < 0 || block >= numBlocks)
          block = -1;
      }
      size_t at = name.find(".experts.");
      if (experts && block >= 0 && at != StringRef::npos) {
        Group &g = expertGroups[block];
        g.name = "block" + std::to_string(block) + "_experts";
        g.module = name.take_front(at + 8).str(); // "<block>.<module>.experts"
        g.params.push_back(p);
        continue;
      }
      groups[block + 1].params.push_back(p);
    }
    if (!experts)
      return groups;
    std::vector<Group> out = {groups[0]};
    for (int64_t i = 0; i < numBlocks; ++i) {
      out.push_back(groups[i + 1]);
      out.push_back(expertGroups[i]); // empty for a dense block: no unit
    }
    return out;
  }

  // Contiguous groups of at least `minSize` elements; a short tail joins
  // the group before it.
  std::vector<Group> bySize(plan::StepOp step, ArrayRef<nn::ParamOp> params, int64_t minSize) {
    std::vector<Group> groups;
    Group cur;
    for (nn::ParamOp p : params) {
      cur.params.push_back(p);
      cur.numel += p.getNumElements();
      if (cur.numel >= minSize) {
        groups.push_back(cur);
        cur = Group();
      }
    }
    if (!cur.params.empty()) {
      if (groups.empty()) {
        groups.push_back(cur);
      } else {
        for (nn::ParamOp p : cur.params)
          groups.back().params.push_back(p);
      }
    }
    std::map<int64_t, int64_t> blockParams; // a block's parameter count
    for (nn::ParamOp p : params)
      if (std::optional<int64_t> b = blockOf(step, p))
        ++blockParams[*b];
    for (size_t i = 0; i < groups.size(); ++i) {
      groups[i].name = "unit" + std::to_string(i);
      groups[i].module = spanName(step, groups[i].params, blockParams);
    }
    return groups;
  }

  // The block a parameter is in, if it is in one.
  static std::optional<int64_t> blockOf(plan::StepOp step, nn::ParamOp p) {
    StringRef prefix = step.getBlockPrefix().value_or("");
    StringRef name = p.getName();
    int64_t block;
    if (prefix.empty() || !name.consume_front(prefix) || !name.consume_front(".") ||
        name.split('.').first.getAsInteger(10, block) || block < 0 ||
        block >= step.getNumBlocks().value_or(0))
      return std::nullopt;
    return block;
  }

  // What a unit spans, in parameter order, joined by ",": a run of whole
  // blocks as "model.layers.0-3" (one: "model.layers.0"), every other module
  // (and those of a block the unit holds only part of) by its path.
  static std::string spanName(plan::StepOp step, ArrayRef<nn::ParamOp> params,
                              const std::map<int64_t, int64_t> &blockParams) {
    std::map<int64_t, int64_t> held;
    for (nn::ParamOp p : params)
      if (std::optional<int64_t> b = blockOf(step, p))
        ++held[*b];
    std::string prefix = step.getBlockPrefix().value_or("").str();
    std::vector<std::string> parts;
    int64_t first = -1, last = -1; // the run of whole blocks being named
    auto closeRun = [&] {
      if (first >= 0)
        parts.push_back(prefix + "." + std::to_string(first) +
                        (last > first ? "-" + std::to_string(last) : ""));
      first = last = -1;
    };
    for (nn::ParamOp p : params) {
      std::optional<int64_t> b = blockOf(step, p);
      if (b && held[*b] == blockParams.at(*b)) {
        if (*b == last)
          continue;
        if (first >= 0 && *b != last + 1)
          closeRun();
        if (first < 0)
          first = *b;
        last = *b;
        continue;
      }
      closeRun();
      std::string module = p.getModulePath().str();
      if (parts.empty() || parts.back() != module)
        parts.push_back(module);
    }
    closeRun();
    return llvm::join(parts, ",");
  }
};

} // namespace
