//===- Batches.cpp --------------------------------------------------------===//
#include "runtime/data/Batches.h"

using namespace fsdp;
using namespace fsdp::data;

namespace {
/// (t G + g) mod m for t, G, g >= 0 and m >= 1, without overflow.
int64_t stepSampleMod(int64_t step, int64_t G, int64_t g, int64_t m) {
  using u128 = unsigned __int128;
  u128 s = (u128)(step % m) * (u128)(G % m) % (u128)m;
  return (int64_t)((s + (u128)(g % m)) % (u128)m);
}
} // namespace

int64_t fsdp::data::windowStart(int64_t n, int64_t S, int64_t G, int64_t step, int64_t g) {
  using u128 = unsigned __int128;
  int64_t w = n - S - 1;
  return (int64_t)((u128)stepSampleMod(step, G, g, w) * (u128)(S % w) % (u128)w);
}

int64_t fsdp::data::sampleStart(const Dataset &data, int64_t S, int64_t G, int64_t step,
                                int64_t g) {
  if (!data.isShuffled())
    return windowStart(data.size(), S, G, step, g);
  using u128 = unsigned __int128;
  Dataset::EpochPlace e = data.epochOf(S, (int64_t)((u128)step * (u128)G + (u128)g));
  return (int64_t)shuffledWindow(data.seed(), uint64_t(e.epoch), uint64_t(e.position),
                                 uint64_t(e.samples)) *
         S;
}

int64_t fsdp::data::imageIndex(int64_t n, int64_t G, int64_t step, int64_t g) {
  return stepSampleMod(step, G, g, n);
}

void fsdp::data::fillMaskedTokens(const Dataset &data, int64_t S, const BatchLayout &l,
                                  int64_t rank, int64_t step, int64_t micro, int64_t maskTokenId,
                                  int64_t *tokens, int64_t *targets) {
  for (int64_t b = 0; b < l.microBatch; ++b) {
    int64_t start = sampleStart(data, S, l.global(), step, l.sample(micro, rank, b));
    for (int64_t s = 0; s < S; ++s) {
      int64_t p = start + s, token = data.token(p);
      bool selected = maskSelected((uint64_t)p);
      tokens[b * S + s] = selected ? maskTokenId : token;
      targets[b * S + s] = selected ? token : kernels::kIgnoreIndex;
    }
  }
}

int64_t fsdp::data::maskedCount(const Dataset &data, int64_t S, const BatchLayout &l,
                                int64_t step) {
  int64_t count = 0, G = l.global();
  for (int64_t g = 0; g < G; ++g) {
    int64_t start = sampleStart(data, S, G, step, g);
    for (int64_t s = 0; s < S; ++s)
      count += maskSelected((uint64_t)(start + s));
  }
  return count;
}

int64_t fsdp::data::maskedMicroCount(const Dataset &data, int64_t S, const BatchLayout &l,
                                     int64_t rank, int64_t step, int64_t micro, int64_t lo,
                                     int64_t hi) {
  int64_t count = 0;
  for (int64_t b = 0; b < l.microBatch; ++b) {
    int64_t start = sampleStart(data, S, l.global(), step, l.sample(micro, rank, b));
    for (int64_t s = std::max<int64_t>(0, lo - b * S); s < S && b * S + s < hi; ++s)
      count += maskSelected((uint64_t)(start + s));
  }
  return count;
}

void fsdp::data::patchify(const uint8_t *image, const program::ImageSpec &spec, float *patches) {
  const int64_t H = spec.height, W = spec.width, C = spec.channels;
  const int64_t ph = spec.patchHeight, pw = spec.patchWidth;
  const int64_t across = W / pw, down = H / ph, K = C * ph * pw;
  for (int64_t py = 0; py < down; ++py)
    for (int64_t px = 0; px < across; ++px) {
      float *out = patches + (py * across + px) * K;
      for (int64_t c = 0; c < C; ++c)
        for (int64_t dy = 0; dy < ph; ++dy)
          for (int64_t dx = 0; dx < pw; ++dx)
            out[(c * ph + dy) * pw + dx] =
                pixelValue(image[((py * ph + dy) * W + (px * pw + dx)) * C + c]);
    }
}

void fsdp::data::fillImages(const ImageSet &data, const program::ImageSpec &spec,
                            const BatchLayout &l, int64_t rank, int64_t step, int64_t micro,
                            float *patches, int64_t *targets) {
  int64_t per = spec.patches() * spec.patchValues();
  for (int64_t b = 0; b < l.microBatch; ++b) {
    int64_t i = imageIndex(data.size(), l.global(), step, l.sample(micro, rank, b));
    patchify(data.image(i), spec, patches + b * per);
    targets[b] = data.label(i);
  }
}
