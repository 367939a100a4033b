//===- RopeScaling.cpp - RoPE's frequency scaling --------------------------===//
#include "support/RopeScaling.h"

#include <cmath>
#include <cstdio>

using namespace fsdp::support;

namespace {
constexpr RopeScalingKind kKinds[] = {RopeScalingKind::Linear, RopeScalingKind::Dynamic,
                                      RopeScalingKind::Yarn, RopeScalingKind::Llama3};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
} // namespace

bool fsdp::support::operator==(const RopeScaling &a, const RopeScaling &b) {
  return a.kind == b.kind && a.factor == b.factor &&
         a.originalMaxPosition == b.originalMaxPosition && a.lowFreqFactor == b.lowFreqFactor &&
         a.highFreqFactor == b.highFreqFactor && a.betaFast == b.betaFast &&
         a.betaSlow == b.betaSlow && a.truncate == b.truncate &&
         a.attentionFactor == b.attentionFactor;
}

const char *fsdp::support::ropeScalingName(RopeScalingKind k) {
  switch (k) {
  case RopeScalingKind::Linear:
    return "linear";
  case RopeScalingKind::Dynamic:
    return "dynamic";
  case RopeScalingKind::Yarn:
    return "yarn";
  case RopeScalingKind::Llama3:
    return "llama3";
  }
  return "?";
}

std::optional<RopeScalingKind> fsdp::support::parseRopeScalingKind(const std::string &name) {
  for (RopeScalingKind k : kKinds)
    if (name == ropeScalingName(k))
      return k;
  return std::nullopt;
}

std::string fsdp::support::ropeScalingNames() {
  std::string s;
  for (RopeScalingKind k : kKinds)
    s += (s.empty() ? "" : ", ") + std::string(ropeScalingName(k));
  return s;
}

const std::vector<RopeScalingField> &fsdp::support::ropeScalingFields() {
  using T = RopeScalingField::Type;
  static const std::vector<RopeScalingField> fields = {
      {"scaling_factor", T::F64, &RopeScaling::factor},
      {"original_max_position", T::I64, nullptr, &RopeScaling::originalMaxPosition},
      {"low_freq_factor", T::F64, &RopeScaling::lowFreqFactor},
      {"high_freq_factor", T::F64, &RopeScaling::highFreqFactor},
      {"beta_fast", T::F64, &RopeScaling::betaFast},
      {"beta_slow", T::F64, &RopeScaling::betaSlow},
      {"truncate", T::Bool, nullptr, nullptr, &RopeScaling::truncate},
      {"attention_factor", T::F64, &RopeScaling::attentionFactor},
  };
  return fields;
}

bool fsdp::support::ropeScalingReads(RopeScalingKind k, const std::string &name) {
  if (name == "scaling_factor")
    return true;
  if (name == "original_max_position")
    return k != RopeScalingKind::Linear;
  if (name == "low_freq_factor" || name == "high_freq_factor")
    return k == RopeScalingKind::Llama3;
  if (name == "beta_fast" || name == "beta_slow" || name == "truncate" ||
      name == "attention_factor")
    return k == RopeScalingKind::Yarn;
  return false;
}

std::string fsdp::support::ropeScalingFieldList(RopeScalingKind k) {
  std::vector<std::string> names;
  for (const RopeScalingField &f : ropeScalingFields())
    if (ropeScalingReads(k, f.name))
      names.push_back(f.name);
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return s;
}

std::string fsdp::support::checkRopeScaling(const RopeScaling &s) {
  const std::string kind = ropeScalingName(s.kind);
  if (!std::isfinite(s.factor) || !(s.factor > 0))
    return kind + " scaling needs a finite scaling_factor > 0, but it is " + num(s.factor);
  if (s.kind != RopeScalingKind::Linear && s.originalMaxPosition <= 0)
    return kind + " scaling needs original_max_position > 0, but it is " +
           std::to_string(s.originalMaxPosition);
  switch (s.kind) {
  case RopeScalingKind::Linear:
  case RopeScalingKind::Dynamic:
    break;
  case RopeScalingKind::Yarn:
    // find_correction_dim takes log(original_max_position / (beta 2 pi)).
    if (!std::isfinite(s.betaFast) || !std::isfinite(s.betaSlow) || !(s.betaSlow > 0) ||
        !(s.betaFast >= s.betaSlow))
      return "yarn scaling needs finite 0 < beta_slow <= beta_fast, but they are " +
             num(s.betaSlow) + " and " + num(s.betaFast);
    if (!std::isfinite(s.attentionFactor) || !(s.attentionFactor > 0))
      return "yarn scaling needs a finite attention_factor > 0, but it is " +
             num(s.attentionFactor);
    break;
  case RopeScalingKind::Llama3:
    if (!std::isfinite(s.lowFreqFactor) || !std::isfinite(s.highFreqFactor) ||
        !(s.lowFreqFactor > 0) || !(s.highFreqFactor > s.lowFreqFactor))
      return "llama3 scaling needs finite 0 < low_freq_factor < high_freq_factor, but they are " +
             num(s.lowFreqFactor) + " and " + num(s.highFreqFactor);
    break;
  }
  return "";
}
