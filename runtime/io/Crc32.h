//===- Crc32.h - the CRC-32 of checkpoints and weights files ----*- C++ -*-===//
//
// One CRC-32 (IEEE 802.3, zlib's) for everything fsdp-run verifies on read:
// checkpoint shards and the safetensors files it writes.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_IO_CRC32_H
#define FSDP_RUNTIME_IO_CRC32_H

#include <cstddef>
#include <cstdint>

namespace fsdp::io {

/// The CRC-32 of [data, data + n), continuing `crc` (0 to start).
uint32_t crc32(const void *data, size_t n, uint32_t crc = 0);

} // namespace fsdp::io

#endif
