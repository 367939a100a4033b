//===- Random.h - the one pseudo-random function of fsdp ----------*- C++ -*-===//
//
// splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", 2014; Vigna's constants), all mod 2^64: a bijection of 64-bit
// integers whose outputs pass BigCrush. fsdp draws everything from it as a
// function of indices (the initial weights of an element, whether a token
// is masked), so that no draw depends on the world size or on the order
// ranks run in.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SUPPORT_RANDOM_H
#define FSDP_SUPPORT_RANDOM_H

#include <cstdint>

namespace fsdp::support {

inline uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

} // namespace fsdp::support

#endif
