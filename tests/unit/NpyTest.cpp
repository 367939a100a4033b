//===- NpyTest.cpp - the .npy reader and the image set (ViT data) ---------===//
//
// io::readNpy / io::parseNpy: files numpy wrote (tests/unit/Inputs/npy, made
// by numpy 1.24's format.write_array in versions 1.0, 2.0 and 3.0) and every
// refusal, each naming the file; data::ImageSet: images against the program's
// image, labels against the images and the classes (the first bad index).
//
//===----------------------------------------------------------------------===//
#include "runtime/io/Npy.h"
#include "runtime/data/Images.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace fsdp;
using namespace fsdp::io;
using namespace fsdp::data;

namespace {

std::string inputs(const std::string &name) {
  return std::string(FSDP_SOURCE_DIR) + "/tests/unit/Inputs/npy/" + name;
}

std::string tempPath(const std::string &stem) {
  static int count = 0;
  const char *tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/fsdp-npy-test-" + std::to_string(::getpid()) +
         "-" + std::to_string(count++) + "-" + stem;
}

std::string writeBytes(const std::string &bytes, const std::string &stem = "a.npy") {
  std::string path = tempPath(stem);
  FILE *f = std::fopen(path.c_str(), "wb");
  EXPECT_TRUE(f);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  return path;
}

/// A .npy file as numpy lays it out: magic, version, the header's length,
/// the header padded with spaces to a multiple of 64 bytes and ended by a
/// newline, then `data`.
std::string npy(const std::string &dict, const std::string &data, int major = 1) {
  std::string header = dict;
  size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(major);
  out += char(0);
  uint32_t len = (uint32_t)header.size();
  out += char(len & 0xff);
  out += char((len >> 8) & 0xff);
  if (major != 1) {
    out += char((len >> 16) & 0xff);
    out += char(len >> 24);
  }
  return out + header + data;
}

std::string dict(const std::string &descr, const std::string &shape,
                 const std::string &fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

std::string int64s(const std::vector<int64_t> &v) {
  std::string s;
  for (int64_t x : v)
    for (int k = 0; k < 8; ++k)
      s += char(((uint64_t)x >> (8 * k)) & 0xff);
  return s;
}

std::string int32s(const std::vector<int32_t> &v) {
  std::string s;
  for (int32_t x : v)
    for (int k = 0; k < 4; ++k)
      s += char(((uint32_t)x >> (8 * k)) & 0xff);
  return s;
}

/// readNpy's error on `bytes`, which must name the file.
std::string refusal(const std::string &bytes) {
  std::string path = writeBytes(bytes);
  NpyArray a;
  std::string err = readNpy(path, a);
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_TRUE(a.shape.empty() && a.bytes.empty());
  std::remove(path.c_str());
  return err;
}

program::ImageSpec spec(int64_t H, int64_t W, int64_t C, int64_t classes) {
  program::ImageSpec s;
  s.height = H, s.width = W, s.channels = C, s.patchHeight = 2, s.patchWidth = 2;
  s.classes = classes;
  return s;
}

} // namespace

// What numpy wrote: uint8 images in all three versions, int64 and int32
// labels; the elements as numpy holds them (np.arange for the images).
TEST(Npy, ReadsWhatNumpyWrites) {
  for (const char *name : {"images-v1.npy", "images-v2.npy", "images-v3.npy"}) {
    NpyArray a;
    ASSERT_EQ(readNpy(inputs(name), a), "") << name;
    EXPECT_EQ(a.type, NpyType::U8);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 4, 6, 3}));
    EXPECT_EQ(a.count, 144);
    for (int64_t i = 0; i < a.count; ++i)
      ASSERT_EQ(a.at(i), i) << name << " element " << i;
    EXPECT_EQ(a.major, name[8] - '0');
  }
  NpyArray a;
  ASSERT_EQ(readNpy(inputs("labels-i8-v1.npy"), a), "");
  EXPECT_EQ(a.type, NpyType::I64);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ((std::vector<int64_t>{a.at(0), a.at(1), a.at(2)}), (std::vector<int64_t>{3, 0, 2}));
  ASSERT_EQ(readNpy(inputs("labels-i4-v2.npy"), a), "");
  EXPECT_EQ(a.type, NpyType::I32);
  EXPECT_EQ((std::vector<int64_t>{a.at(0), a.at(1), a.at(2)}), (std::vector<int64_t>{1, 2, 0}));
  ASSERT_EQ(readNpy(inputs("labels-i4-v3.npy"), a), "");
  EXPECT_EQ(a.major, 3);
  EXPECT_EQ((std::vector<int64_t>{a.at(0), a.at(1), a.at(2)}),
            (std::vector<int64_t>{-5, 7, 2147483647}));
}

// Dict literals numpy's reader (ast.literal_eval) takes: double quotes, keys
// in any order, no trailing comma, spaces, a 0-d array, an empty dimension;
// 1-byte types with any byte-order mark.
TEST(Npy, AcceptsOtherSpellingsOfTheHeader) {
  NpyArray a;
  std::string path = writeBytes(
      npy("{\"shape\":(2,),\"fortran_order\":False,\"descr\":\"<i8\"}", int64s({-1, 9})));
  ASSERT_EQ(readNpy(path, a), "");
  EXPECT_EQ(a.at(0), -1);
  EXPECT_EQ(a.at(1), 9);
  path = writeBytes(npy(dict("<i8", "()"), int64s({42})));
  ASSERT_EQ(readNpy(path, a), "");
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.count, 1);
  path = writeBytes(npy(dict("<i4", "(0, 3)"), ""));
  ASSERT_EQ(readNpy(path, a), "");
  EXPECT_EQ(a.count, 0);
  for (const char *descr : {"|u1", "<u1", ">u1", "u1"}) {
    path = writeBytes(npy(dict(descr, "( 1 , 2 , )"), "\x07\xff"));
    ASSERT_EQ(readNpy(path, a), "") << descr;
    EXPECT_EQ(a.at(1), 255);
  }
}

TEST(Npy, RefusesWhatItDoesNotRead) {
  std::string good = npy(dict("<i8", "(2,)"), int64s({1, 2}));
  // The magic and the version.
  EXPECT_NE(refusal("PK\x03\x04 not numpy at all").find("not a NumPy .npy file"),
            std::string::npos);
  EXPECT_NE(refusal("").find("not a NumPy .npy file"), std::string::npos);
  std::string v4 = good;
  v4[6] = 4;
  EXPECT_NE(refusal(v4).find(".npy format version 4.0 is not supported"), std::string::npos);
  std::string minor = good;
  minor[7] = 1;
  EXPECT_NE(refusal(minor).find("version 1.1 is not supported"), std::string::npos);
  // The header: cut short, too long for the file, not text, no newline.
  EXPECT_NE(refusal(good.substr(0, 9)).find("not a NumPy .npy file"), std::string::npos);
  EXPECT_NE(refusal(good.substr(0, 40))
                .find("the .npy header says it is 118 bytes, but the file "
                      "has 30"),
            std::string::npos);
  EXPECT_NE(refusal(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), 'x\xe9': 1}",
                        int64s({1, 2})))
                .find("not ASCII text"),
            std::string::npos);
  std::string noNewline = good;
  noNewline[127] = ' ';
  EXPECT_NE(refusal(noNewline).find("does not end with a newline"), std::string::npos);
  // The dict.
  EXPECT_NE(refusal(npy("['descr', '<i8']", "")).find("malformed .npy header: expected '{'"),
            std::string::npos);
  EXPECT_NE(refusal(npy(dict("<i8", "(2,)") + " x", "")).find("text after the dict"),
            std::string::npos);
  EXPECT_NE(refusal(npy("{'descr': '<i8', 'shape': (2,)}", int64s({1, 2})))
                .find("missing 'fortran_order'"),
            std::string::npos);
  EXPECT_NE(refusal(npy("{'descr': '<i8', 'descr': '<i8', 'fortran_order': False, 'shape': "
                        "(2,)}",
                        ""))
                .find("the key 'descr' is given twice"),
            std::string::npos);
  EXPECT_NE(refusal(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), 'order': 1}", ""))
                .find("unexpected key 'order'"),
            std::string::npos);
  EXPECT_NE(refusal(npy(dict("<i8", "(2)"), int64s({1, 2})))
                .find("a one-dimensional shape is written (N,)"),
            std::string::npos);
  EXPECT_NE(refusal(npy(dict("<i8", "(-2,)"), "")).find("expected a non-negative integer"),
            std::string::npos);
  EXPECT_NE(refusal(npy(dict("<i8", "(02,)"), "")).find("leading zero"), std::string::npos);
  EXPECT_NE(refusal(npy(dict("<i8", "(2.0,)"), "")).find("expected an integer"), std::string::npos);
  EXPECT_NE(refusal(npy(dict("<i8", "(99999999999999999999,)"), "")).find("dimension too large"),
            std::string::npos);
  EXPECT_NE(refusal(npy(dict("<i8", "(2,)", "0"), "")).find("expected True or False"),
            std::string::npos);
  // The dtype, its byte order, the order of the array.
  EXPECT_NE(refusal(npy(dict("<f4", "(2,)"), std::string(8, '\0')))
                .find("dtype '<f4' is not supported: fsdp reads uint8 ('|u1') images and int32 "
                      "('<i4') or int64 ('<i8') labels"),
            std::string::npos);
  EXPECT_NE(refusal(npy(dict(">i8", "(2,)"), int64s({1, 2})))
                .find("dtype '>i8' is big-endian; fsdp reads '<i8'"),
            std::string::npos);
  EXPECT_NE(refusal(npy(dict("|i4", "(2,)"), int32s({1, 2}))).find("not marked little-endian"),
            std::string::npos);
  EXPECT_NE(refusal(npy(dict("|u1", "(2, 2)", "True"), "abcd")).find("in Fortran order"),
            std::string::npos);
  // The data: cut short, or more than the shape.
  EXPECT_NE(refusal(good.substr(0, good.size() - 1))
                .find("the data is cut short: the shape needs 16 bytes (2 int64), the file holds "
                      "15 after the header"),
            std::string::npos);
  EXPECT_NE(refusal(good + "x").find("1 bytes follow the array's data"), std::string::npos);
  EXPECT_NE(refusal(npy(dict("<i8", "(576460752303423489,)"), ""))
                .find("the array's data passes 2^62 bytes"),
            std::string::npos);
  EXPECT_NE(
      refusal(npy(dict("|u1", "(4294967296, 4294967296)"), "")).find("more than 2^62 elements"),
      std::string::npos);
}

// Not a regular file: refused without blocking (a FIFO) and named.
TEST(Npy, RefusesFoldersAndFifos) {
  NpyArray a;
  std::string dir = tempPath("dir");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  std::string err = readNpy(dir, a);
  EXPECT_NE(err.find(dir + ": cannot read the array: a directory, not a regular file"),
            std::string::npos)
      << err;
  std::string fifo = tempPath("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  err = readNpy(fifo, a);
  EXPECT_NE(err.find(fifo + ": cannot read the array: a FIFO, not a regular file"),
            std::string::npos)
      << err;
  std::string missing = tempPath("missing.npy");
  err = readNpy(missing, a);
  EXPECT_NE(err.find(missing + ": cannot read the array: No such file or directory"),
            std::string::npos)
      << err;
  ::rmdir(dir.c_str());
  std::remove(fifo.c_str());
}

// The images numpy wrote (np.arange over [2, 4, 6, 3]) with labels of each
// width: image i's bytes in (y, x, c) order, its label.
TEST(ImageSet, OpensImagesAndLabelsThatFit) {
  std::string images = inputs("images-v2.npy");
  std::string labels64 = writeBytes(npy(dict("<i8", "(2,)"), int64s({2, 0})));
  std::string labels32 = writeBytes(npy(dict("<i4", "(2,)"), int32s({1, 1}), 3));
  ImageSet set;
  ASSERT_EQ(set.open(images, labels64, spec(4, 6, 3, 3)), "");
  EXPECT_EQ(set.size(), 2);
  EXPECT_EQ(set.image(1)[0], 72); // [1, 0, 0, 0] of arange(144).reshape(2, 4, 6, 3)
  EXPECT_EQ(set.image(1)[(2 * 6 + 5) * 3 + 1], 72 + (2 * 6 + 5) * 3 + 1);
  EXPECT_EQ(set.label(0), 2);
  EXPECT_EQ(set.label(1), 0);
  ASSERT_EQ(set.open(images, labels32, spec(4, 6, 3, 2)), "");
  EXPECT_EQ(set.label(1), 1);
}

TEST(ImageSet, RefusesImagesOrLabelsThatDoNotFit) {
  std::string images = inputs("images-v1.npy");
  std::string labels = writeBytes(npy(dict("<i8", "(2,)"), int64s({2, 0})));
  ImageSet set;
  auto err = [&](const std::string &im, const std::string &lb, program::ImageSpec s) {
    std::string e = set.open(im, lb, s);
    EXPECT_EQ(set.size(), 0);
    return e;
  };
  // Missing files: the flags to give.
  EXPECT_EQ(err("", labels, spec(4, 6, 3, 3)),
            "the model takes images: give them with --data IMAGES.npy (uint8 [N, 4, 6, 3])");
  EXPECT_EQ(err(images, "", spec(4, 6, 3, 3)),
            "--data " + images + " needs its labels: --labels LABELS.npy (int64 or int32 [N])");
  EXPECT_EQ(set.open(images, "", spec(4, 6, 3, 3), "--eval-data", "--eval-labels"),
            "--eval-data " + images +
                " needs its labels: --eval-labels LABELS.npy (int64 or int32 [N])");
  // The images: their dtype, rank, size, count.
  EXPECT_EQ(err(labels, labels, spec(4, 6, 3, 3)), labels + ": images must be uint8, not int64");
  std::string flat = writeBytes(npy(dict("|u1", "(2, 4, 18)"), std::string(144, '\0')));
  EXPECT_EQ(err(flat, labels, spec(4, 6, 3, 3)),
            flat + ": images must be [N, height, width, channels], not [2, 4, 18]");
  EXPECT_EQ(err(images, labels, spec(6, 4, 3, 3)),
            images + ": images of 4 x 6 x 3 (height x width x channels); the model takes 6 x 4 "
                     "x 3");
  EXPECT_EQ(err(images, labels, spec(4, 6, 1, 3)),
            images + ": images of 4 x 6 x 3 (height x width x channels); the model takes 4 x 6 "
                     "x 1");
  std::string none = writeBytes(npy(dict("|u1", "(0, 4, 6, 3)"), ""));
  EXPECT_EQ(err(none, labels, spec(4, 6, 3, 3)), none + ": holds no images");
  // The labels: dtype, rank, count, range (the first bad index).
  EXPECT_EQ(err(images, images, spec(4, 6, 3, 3)),
            images + ": labels must be int64 or int32, not uint8");
  std::string column = writeBytes(npy(dict("<i8", "(2, 1)"), int64s({0, 1})));
  EXPECT_EQ(err(images, column, spec(4, 6, 3, 3)), column + ": labels must be [N], not [2, 1]");
  std::string three = inputs("labels-i8-v1.npy");
  EXPECT_EQ(err(images, three, spec(4, 6, 3, 4)),
            three + ": 3 labels for the 2 images of " + images);
  EXPECT_EQ(err(images, labels, spec(4, 6, 3, 2)),
            labels + ": label 2 at index 0 is outside the model's 2 classes [0, 2)");
  std::string negative = writeBytes(npy(dict("<i4", "(2,)"), int32s({1, -1})));
  EXPECT_EQ(err(images, negative, spec(4, 6, 3, 2)),
            negative + ": label -1 at index 1 is outside the model's 2 classes [0, 2)");
  // A file the reader refuses: its error.
  std::string cut = writeBytes(npy(dict("<i8", "(2,)"), int64s({1}) + "abc"));
  EXPECT_EQ(err(images, cut, spec(4, 6, 3, 2)),
            cut + ": the data is cut short: the shape needs 16 bytes (2 int64), the file holds 11 "
                  "after the header");
}
