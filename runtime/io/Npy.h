//===- Npy.h - NumPy .npy arrays (ViT images and labels) ---------*- C++ -*-===//
//
// A strict reader of NumPy's .npy format (versions 1.0, 2.0 and 3.0): the
// magic, the header's length, then a Python dict literal with exactly the
// keys 'descr', 'fortran_order' and 'shape'. Only what fsdp-run reads is
// accepted: little-endian (or byte-order free) unsigned 8-bit and signed 32-
// and 64-bit integers, C order, and data of exactly the shape's bytes. Every
// refusal names the file.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_IO_NPY_H
#define FSDP_RUNTIME_IO_NPY_H

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::io {

/// The element types fsdp reads from .npy files.
enum class NpyType { U8, I32, I64 };
const char *npyTypeName(NpyType t); // "uint8", "int32", "int64"
int npyTypeBytes(NpyType t);

/// A .npy array: its header, and the whole file with the data from `offset`.
struct NpyArray {
  int major = 0, minor = 0; // the format version
  NpyType type = NpyType::U8;
  std::vector<int64_t> shape;
  int64_t count = 0; // elements (the product of the shape)
  size_t offset = 0; // where the data starts in `bytes`
  std::vector<uint8_t> bytes;
  const uint8_t *data() const { return bytes.data() + offset; }
  /// Element i as an integer (any type); i < count.
  int64_t at(int64_t i) const;
};

/// Parses a whole .npy file held in memory: `name` stands for the file in
/// errors. Checks the magic, version, header, dtype, order, shape (at most 32
/// dimensions, each from 0, elements and bytes below 2^62) and that the data
/// is exactly the shape's bytes (neither cut short nor followed by more).
/// Fills `out` (its `bytes` left empty: the data is at data + out.offset).
/// Returns "" or the error, starting with `name`.
std::string parseNpy(const std::string &name, const uint8_t *data, size_t size, NpyArray &out);

/// Reads the .npy file `path` (a regular file; a FIFO or a folder is refused
/// without blocking) and parses it. Returns "" or the error, naming `path`.
std::string readNpy(const std::string &path, NpyArray &out);

} // namespace fsdp::io

#endif
