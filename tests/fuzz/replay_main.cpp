//===- replay_main.cpp - run a fuzz harness on saved inputs ----------------===//
//
// Every fuzz harness (LLVMFuzzerTestOneInput) is linked with this driver in
// the ordinary build: it runs the harness once on each file named, or on each
// file of each folder named (sorted, so a failure is reproducible), and
// prints how many ran. A crash, an abort or a harness-detected violation fails
// the run. A folder with no inputs is an error too, so a replay that tests
// nothing cannot pass. With -DFSDP_FUZZ=ON the harness links libFuzzer
// instead (scripts/fuzz.sh).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    fs::path p(argv[i]);
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> inDir;
      for (const auto &e : fs::directory_iterator(p, ec))
        if (e.is_regular_file())
          inDir.push_back(e.path());
      if (inDir.empty()) {
        std::fprintf(stderr, "replay: %s: no inputs in this folder\n", argv[i]);
        return 2;
      }
      std::sort(inDir.begin(), inDir.end());
      inputs.insert(inputs.end(), inDir.begin(), inDir.end());
    } else if (fs::is_regular_file(p, ec)) {
      inputs.push_back(p);
    } else {
      std::fprintf(stderr, "replay: %s: not a file or folder\n", argv[i]);
      return 2;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "usage: %s FILE_OR_FOLDER...\n", argv[0]);
    return 2;
  }
  for (const fs::path &p : inputs) {
    std::ifstream in(p, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", p.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  }
  std::printf("replay: %zu inputs ran\n", inputs.size());
  return 0;
}
