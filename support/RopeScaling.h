//===- RopeScaling.h - RoPE's frequency scaling ------------------*- C++ -*-===//
//
// An HF config's `rope_scaling` as transformers' modeling_rope_utils
// computes it (its _compute_*_parameters): a word of the IR (nn.rope's
// scaling attributes, checked by its verifier), of the program (its rope
// instructions, read by the loader) and of the kernels (which compute the
// frequencies from it), so it lives here, below all three: the dialect
// includes nothing of the runtime, and the runtime nothing of MLIR. The
// kernels use the struct alone (this header); the names and the checks are
// in RopeScaling.cpp (FSDPSupport).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SUPPORT_ROPESCALING_H
#define FSDP_SUPPORT_ROPESCALING_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fsdp::support {

/// transformers' rope_type, for the kinds fsdp computes:
/// - Linear: every inverse frequency divided by `factor`;
/// - Dynamic: dynamic NTK, at sequences of at most `originalMaxPosition`
///   (max_position_embeddings), where transformers keeps the frequencies it
///   computed at that length (dynamic_rope_update changes them only for a
///   longer sequence, which fsdp refuses);
/// - Yarn: YaRN's blend of interpolated and extrapolated frequencies, with
///   `attentionFactor` scaling cos and sin;
/// - Llama3: Llama 3.1's three bands of wavelengths.
enum class RopeScalingKind { Linear, Dynamic, Yarn, Llama3 };

/// The parameters of a kind, resolved as transformers resolves them (a
/// default or a derived value filled in: yarn's beta_fast and beta_slow
/// defaults and its attention factor from mscale): what the kernels read.
/// A kind reads only its fields (ropeScalingFields); the others keep these
/// values.
struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::Linear;
  double factor = 1.0;             // every kind
  int64_t originalMaxPosition = 0; // dynamic (max_position_embeddings), yarn, llama3
  double lowFreqFactor = 0.0, highFreqFactor = 0.0; // llama3
  double betaFast = 32.0, betaSlow = 1.0;           // yarn
  bool truncate = true;                             // yarn: floor and ceil the ramp's ends
  double attentionFactor = 1.0; // yarn: multiplies cos and sin; 1 for the others
};
bool operator==(const RopeScaling &a, const RopeScaling &b);
inline bool operator!=(const RopeScaling &a, const RopeScaling &b) { return !(a == b); }

/// "linear", "dynamic", "yarn", "llama3": transformers' names.
const char *ropeScalingName(RopeScalingKind k);
std::optional<RopeScalingKind> parseRopeScalingKind(const std::string &name);
/// "linear, dynamic, yarn, llama3", for messages.
std::string ropeScalingNames();

/// The kind's name is the value of `scaling` (nn.rope's attribute, the
/// program's key); each parameter has a name of its own there, a type and
/// its member of RopeScaling.
inline constexpr const char *kRopeScalingKey = "scaling";
struct RopeScalingField {
  enum class Type { F64, I64, Bool };
  const char *name;
  Type type;
  double RopeScaling::*f64 = nullptr;   // Type::F64
  int64_t RopeScaling::*i64 = nullptr;  // Type::I64
  bool RopeScaling::*boolean = nullptr; // Type::Bool
};
/// Every parameter: scaling_factor, original_max_position,
/// low_freq_factor, high_freq_factor, beta_fast, beta_slow, truncate,
/// attention_factor.
const std::vector<RopeScalingField> &ropeScalingFields();
/// Whether kind `k` reads the parameter `name`. A kind's parameters are all
/// required, and no other may be given.
bool ropeScalingReads(RopeScalingKind k, const std::string &name);
/// The names of the parameters `k` reads, "a, b and c", for messages.
std::string ropeScalingFieldList(RopeScalingKind k);

/// "" if the kernels compute `s` (its fields finite and in range), else why
/// not, naming the field.
std::string checkRopeScaling(const RopeScaling &s);

} // namespace fsdp::support

#endif
