//===- Images.cpp ---------------------------------------------------------===//
#include "runtime/data/Images.h"

using namespace fsdp::data;

namespace {
std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}
} // namespace

std::string ImageSet::open(const std::string &imagesPath, const std::string &labelsPath,
                           const fsdp::program::ImageSpec &spec, const char *imagesFlag,
                           const char *labelsFlag) {
  pixels = io::NpyArray();
  labels = io::NpyArray();
  n = imageBytes = 0;
  if (imagesPath.empty())
    return std::string("the model takes images: give them with ") + imagesFlag +
           " IMAGES.npy (uint8 [N, " + std::to_string(spec.height) + ", " +
           std::to_string(spec.width) + ", " + std::to_string(spec.channels) + "])";
  if (labelsPath.empty())
    return std::string(imagesFlag) + " " + imagesPath + " needs its labels: " + labelsFlag +
           " LABELS.npy (int64 or int32 [N])";
  std::string err = io::readNpy(imagesPath, pixels);
  if (err.empty() && pixels.type != io::NpyType::U8)
    err = imagesPath + ": images must be uint8, not " + io::npyTypeName(pixels.type);
  if (err.empty() && pixels.shape.size() != 4)
    err = imagesPath + ": images must be [N, height, width, channels], not " +
          shapeText(pixels.shape);
  if (err.empty() && (pixels.shape[1] != spec.height || pixels.shape[2] != spec.width ||
                      pixels.shape[3] != spec.channels))
    err = imagesPath + ": images of " + std::to_string(pixels.shape[1]) + " x " +
          std::to_string(pixels.shape[2]) + " x " + std::to_string(pixels.shape[3]) +
          " (height x width x channels); the model takes " + std::to_string(spec.height) + " x " +
          std::to_string(spec.width) + " x " + std::to_string(spec.channels);
  if (err.empty() && pixels.shape[0] < 1)
    err = imagesPath + ": holds no images";
  // (So each image's bytes are at most the file's: no product below overflows.)
  if (err.empty() && pixels.count == 0)
    err = imagesPath + ": its images hold no pixels";
  if (!err.empty()) {
    pixels = io::NpyArray();
    return err;
  }
  err = io::readNpy(labelsPath, labels);
  if (err.empty() && labels.type == io::NpyType::U8)
    err = labelsPath + ": labels must be int64 or int32, not uint8";
  if (err.empty() && labels.shape.size() != 1)
    err = labelsPath + ": labels must be [N], not " + shapeText(labels.shape);
  if (err.empty() && labels.shape[0] != pixels.shape[0])
    err = labelsPath + ": " + std::to_string(labels.shape[0]) + " labels for the " +
          std::to_string(pixels.shape[0]) + " images of " + imagesPath;
  for (int64_t i = 0; err.empty() && i < labels.count; ++i) {
    int64_t y = labels.at(i);
    if (y < 0 || y >= spec.classes)
      err = labelsPath + ": label " + std::to_string(y) + " at index " + std::to_string(i) +
            " is outside the model's " + std::to_string(spec.classes) + " classes [0, " +
            std::to_string(spec.classes) + ")";
  }
  if (!err.empty()) {
    pixels = io::NpyArray();
    labels = io::NpyArray();
    return err;
  }
  n = pixels.shape[0];
  imageBytes = spec.height * spec.width * spec.channels;
  return "";
}
