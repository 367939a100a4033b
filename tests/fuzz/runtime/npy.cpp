//===- npy.cpp - fuzz the .npy reader (fsdp-run --data/--labels of ViT) ---===//
//
// The input is one byte, then a .npy file. The byte says how the file is
// used and the program it is opened for:
//
//   bit 0      0: the file is the images (--data), with labels the harness
//              writes (every label 0); 1: the file is the labels (--labels)
//              of images the harness writes (all pixels 0)
//   bits 1-3   patch height and width - 1 (1 to 8, each; the image size
//              is the file's when it divides, else the program is not run)
//   bits 4-7   classes - 1 (1 to 16)
//
// io::readNpy must refuse the file with a message naming it, or accept it;
// in memory (io::parseNpy) it must say the same. What it accepts must hold
// exactly the shape's elements of a supported dtype. Then data::ImageSet must
// open the pair exactly when the images are uint8 [N, H, W, C] with N >= 1
// and the labels int32 or int64 [N] within the classes, naming the file (and
// for a label, its first bad index) otherwise; and each rank's batches of
// two steps (data::fillImages) must be image (t G + g) mod N, in patches, with
// its label.
//
//===----------------------------------------------------------------------===//
#include "RuntimeFuzz.h"

#include "runtime/data/Batches.h"
#include "runtime/data/Images.h"
#include "runtime/io/Npy.h"

#include <cstring>
#include <exception>
#include <vector>

using namespace fsdp;
using fsdp::fuzz::violation;

namespace {

/// A .npy (version 1.0) of `descr` and `shape` holding `data`.
std::string npyBytes(const std::string &descr, const std::string &shape, const std::string &data) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  return out + header + data;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s;
  for (int64_t d : shape)
    s += std::to_string(d) + ", ";
  return "(" + s + ")";
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  const uint8_t mode = data[0];
  const bool asLabels = mode & 1;
  const int64_t patch = 1 + ((mode >> 1) & 7), classes = 1 + (mode >> 4);
  const uint8_t *file = data + 1;
  const size_t fileSize = size - 1;
  const std::string path = fuzz::scratchDir() + "/input.npy";
  fuzz::writeFile(path, file, fileSize);

  try {
    io::NpyArray a, b;
    std::string err = io::readNpy(path, a);
    std::string inMemory = io::parseNpy(path, file, fileSize, b);
    if (err != inMemory)
      violation("readNpy and parseNpy disagree: '" + err + "' and '" + inMemory + "'");
    if (!err.empty()) {
      fuzz::checkError(err, path, "readNpy");
      if (!a.shape.empty() || !a.bytes.empty() || a.count != 0)
        violation("a refused file left an array behind");
    } else {
      int64_t count = 1;
      for (int64_t d : a.shape) {
        if (d < 0)
          violation("accepted a negative dimension");
        count *= d; // bounded: the data holds them all
      }
      int width = io::npyTypeBytes(a.type);
      if (count != a.count || (uint64_t)count * width != fileSize - a.offset ||
          a.bytes.size() != fileSize || a.offset > fileSize || a.offset != b.offset)
        violation("accepted " + std::to_string(fileSize) + " bytes as " + std::to_string(a.count) +
                  " elements of " + std::to_string(width) + " bytes at " +
                  std::to_string(a.offset));
      if (a.major < 1 || a.major > 3 || a.minor != 0)
        violation("accepted version " + std::to_string(a.major) + "." + std::to_string(a.minor));
      if (std::memcmp(file, "\x93NUMPY", 6) != 0)
        violation("accepted a file without the magic");
      for (int64_t i = 0; i < a.count; ++i) {
        int64_t v = a.at(i);
        if (a.type == io::NpyType::U8 && (v < 0 || v > 255))
          violation("a uint8 element read as " + std::to_string(v));
        if (a.type == io::NpyType::I32 && (v < INT32_MIN || v > INT32_MAX))
          violation("an int32 element read as " + std::to_string(v));
      }
    }

    // The file as images or labels, its partner written by the harness.
    program::ImageSpec spec;
    spec.patchHeight = spec.patchWidth = patch;
    spec.classes = classes;
    const std::string partner = fuzz::scratchDir() + "/partner.npy";
    std::string images = path, labels = partner;
    int64_t n = 0;
    bool mayOpen = err.empty();
    if (!asLabels) {
      bool shaped = err.empty() && a.shape.size() == 4;
      spec.height = shaped ? a.shape[1] : 4;
      spec.width = shaped ? a.shape[2] : 4;
      spec.channels = shaped ? a.shape[3] : 1;
      n = shaped ? a.shape[0] : 1;
      mayOpen = shaped && a.type == io::NpyType::U8 && n >= 1;
      std::string zeros((size_t)(n > 0 && n < 4096 ? n : 1) * 8, '\0');
      std::string text = npyBytes("<i8", "(" + std::to_string(zeros.size() / 8) + ",)", zeros);
      fuzz::writeFile(partner, text.data(), text.size());
      mayOpen = mayOpen && (int64_t)(zeros.size() / 8) == n;
    } else {
      bool shaped = err.empty() && a.shape.size() == 1;
      n = shaped ? a.shape[0] : 1;
      spec.height = spec.width = patch, spec.channels = 1;
      int64_t imagesWritten = n > 0 && n < 4096 ? n : 1;
      std::string pixels((size_t)(imagesWritten * patch * patch), '\0');
      std::string text = npyBytes("|u1", shapeText({imagesWritten, patch, patch, 1}), pixels);
      fuzz::writeFile(partner, text.data(), text.size());
      images = partner, labels = path;
      mayOpen = shaped && a.type != io::NpyType::U8 && n == imagesWritten;
      // The first label outside the classes is named.
      for (int64_t i = 0; mayOpen && i < n; ++i)
        if (a.at(i) < 0 || a.at(i) >= classes) {
          std::string want = path + ": label " + std::to_string(a.at(i)) + " at index " +
                             std::to_string(i) + " is outside the model's " +
                             std::to_string(classes) + " classes";
          data::ImageSet set;
          std::string e = set.open(images, labels, spec);
          if (e.compare(0, want.size(), want) != 0)
            violation("a bad label was not named first: '" + e + "', not '" + want + "'");
          return 0;
        }
    }
    data::ImageSet set;
    std::string e = set.open(images, labels, spec);
    if (!e.empty()) {
      fuzz::checkError(e, path, "ImageSet::open");
      if (mayOpen && spec.height % patch == 0 && spec.width % patch == 0)
        violation("refused images and labels that fit: " + e);
      return 0;
    }
    if (!mayOpen)
      violation("ImageSet::open accepted what does not fit");
    if (set.size() != n)
      violation("opened " + std::to_string(set.size()) + " images of " + std::to_string(n));
    if (spec.height % patch != 0 || spec.width % patch != 0 ||
        spec.height * spec.width * spec.channels > (1 << 16))
      return 0; // a program the loader would refuse, or too large to batch here
    data::BatchLayout l{2, 2, 2};
    std::vector<float> patches(2 * spec.patches() * spec.patchValues());
    std::vector<int64_t> targets(2);
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t micro = 0; micro < 2; ++micro)
        for (int64_t rank = 0; rank < 2; ++rank) {
          data::fillImages(set, spec, l, rank, t, micro, patches.data(), targets.data());
          for (int64_t row = 0; row < 2; ++row) {
            int64_t i = (t * 8 + l.sample(micro, rank, row)) % n;
            const uint8_t *img = set.image(i);
            if (targets[row] != set.label(i) || targets[row] < 0 || targets[row] >= classes)
              violation("the target of image " + std::to_string(i) + " is not its label");
            // Patch q, value (c, dy, dx) is pixel (py p + dy, px p + dx) of channel c.
            int64_t across = spec.width / patch, K = spec.patchValues();
            for (int64_t q = 0; q < spec.patches(); ++q)
              for (int64_t k = 0; k < K; ++k) {
                int64_t c = k / (patch * patch), dy = k / patch % patch, dx = k % patch;
                int64_t y = q / across * patch + dy, x = q % across * patch + dx;
                float want = data::pixelValue(img[(y * spec.width + x) * spec.channels + c]);
                if (patches[(row * spec.patches() + q) * K + k] != want)
                  violation("patch " + std::to_string(q) + " value " + std::to_string(k) +
                            " of image " + std::to_string(i) + " is not its pixel");
              }
          }
        }
  } catch (const std::exception &e) {
    violation(std::string("the .npy reader threw: ") + e.what());
  } catch (...) {
    violation("the .npy reader threw something");
  }
  return 0;
}
