//===- Inputs.cpp - what a model takes as input ---------------------------===//
#include "support/Inputs.h"

using namespace fsdp::support;

const char *fsdp::support::inputKindName(InputKind k) {
  switch (k) {
  case InputKind::Tokens:
    return "tokens";
  case InputKind::MaskedTokens:
    return "masked_tokens";
  case InputKind::Images:
    return "images";
  }
  return "?";
}

std::optional<InputKind> fsdp::support::parseInputKind(const std::string &name) {
  for (InputKind k : {InputKind::Tokens, InputKind::MaskedTokens, InputKind::Images})
    if (name == inputKindName(k))
      return k;
  return std::nullopt;
}

bool fsdp::support::operator==(const ImageSpec &a, const ImageSpec &b) {
  return a.height == b.height && a.width == b.width && a.channels == b.channels &&
         a.patchHeight == b.patchHeight && a.patchWidth == b.patchWidth && a.classes == b.classes;
}
