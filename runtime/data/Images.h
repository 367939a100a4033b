//===- Images.h - images and labels of an image classifier (ViT) -*- C++ -*-===//
#ifndef FSDP_RUNTIME_DATA_IMAGES_H
#define FSDP_RUNTIME_DATA_IMAGES_H

#include "runtime/Program.h"
#include "runtime/io/Npy.h"

#include <cstdint>
#include <string>

namespace fsdp::data {

/// Images (uint8 [N, H, W, C] .npy, C order) and their labels (int64 or
/// int32 [N] .npy), checked whole against the program's image before the
/// first step: H, W and C must be the program's, N the labels' length, and
/// every label in [0, classes).
class ImageSet {
public:
  /// `imagesFlag`, `labelsFlag`: the flags that named the files
  /// ("--data", "--labels"), for the errors about a missing one.
  std::string open(const std::string &images, const std::string &labels,
                   const program::ImageSpec &spec, const char *imagesFlag = "--data",
                   const char *labelsFlag = "--labels");
  int64_t size() const { return n; }
  /// Image i: H x W x C bytes, row-major, channels last.
  const uint8_t *image(int64_t i) const { return pixels.data() + i * imageBytes; }
  int64_t label(int64_t i) const { return labels.at(i); }
  int64_t bytes() const { return (int64_t)(pixels.bytes.size() + labels.bytes.size()); }

private:
  io::NpyArray pixels, labels;
  int64_t n = 0, imageBytes = 0;
};

} // namespace fsdp::data

#endif
