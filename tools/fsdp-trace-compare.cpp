//===- fsdp-trace-compare.cpp - predicted against measured time -----------===//
//
//   fsdp-trace-compare PREDICTED.json MEASURED.json
//
// Reads the timeline fsdp-plan --trace predicted and the one fsdp-run
// --trace measured, and prints rank 0's compute time per phase and unit, and
// the step, side by side. The measured figures are per step, averaged over
// every step but the first (which warms caches and pages in the arena).
//
//===----------------------------------------------------------------------===//
#include "tools/Version.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>

using nlohmann::json;

struct Totals {
  std::map<std::pair<std::string, std::string>, double> byUnit; // (phase, unit) -> seconds
  double step = 0;
};

static bool load(const char *path, json &doc) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "fsdp-trace-compare: error: cannot read %s\n", path);
    return false;
  }
  try {
    doc = json::parse(in);
  } catch (const json::exception &e) {
    std::fprintf(stderr, "fsdp-trace-compare: error: %s: %s\n", path, e.what());
    return false;
  }
  if (!doc.contains("traceEvents")) {
    std::fprintf(stderr, "fsdp-trace-compare: error: %s: not a Chrome trace\n", path);
    return false;
  }
  return true;
}

static Totals totals(const json &doc, bool measured) {
  Totals t;
  std::map<int64_t, std::pair<double, double>> stepSpan; // step -> (first start, last end)
  // The steps present, first: step 0 (the warm-up) counts only when it is
  // the only one, wherever its events are in the file.
  std::set<int64_t> steps;
  for (const json &e : doc["traceEvents"])
    if (measured && e.value("ph", "") == "X" && e.value("pid", -1) == 0)
      steps.insert(e["args"].value("step", (int64_t)0));
  for (const json &e : doc["traceEvents"]) {
    if (e.value("ph", "") != "X" || e.value("pid", -1) != 0)
      continue;
    int64_t step = measured ? e["args"].value("step", (int64_t)0) : 0;
    double start = e["ts"].get<double>() / 1e6, dur = e["dur"].get<double>() / 1e6;
    auto &span = stepSpan.try_emplace(step, start, start + dur).first->second;
    span.first = std::min(span.first, start);
    span.second = std::max(span.second, start + dur);
    if (e.value("tid", 0) != 0 || (measured && step == 0 && steps.size() > 1))
      continue;
    t.byUnit[{e["args"].value("phase", ""), e["args"].value("unit", "")}] += dur;
  }
  if (measured) {
    // Average over the steps after the first.
    int64_t n = 0;
    double sum = 0;
    for (auto &[step, span] : stepSpan)
      if (step > 0 || stepSpan.size() == 1) {
        sum += span.second - span.first;
        ++n;
      }
    t.step = n ? sum / n : 0;
    std::map<std::pair<std::string, std::string>, double> avg;
    int64_t warm = stepSpan.size() > 1 ? (int64_t)stepSpan.size() - 1 : 1;
    for (auto &[k, v] : t.byUnit)
      avg[k] = v / warm;
    t.byUnit = avg;
  } else {
    t.step = doc["otherData"].value("step_time_s", 0.0);
  }
  return t;
}

static const char *kUsage =
    "usage: fsdp-trace-compare PREDICTED.json MEASURED.json\n"
    "Compares fsdp-plan --trace (the predicted timeline) with fsdp-run --trace (the\n"
    "measured one): milliseconds per phase and unit on rank 0, and their ratio.\n"
    "  --help, --version\n";

int main(int argc, char **argv) {
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("%s", kUsage);
    return 0;
  }
  if (argc == 2 && std::string(argv[1]) == "--version") {
    std::printf("fsdp-trace-compare (fsdp) %s\n", FSDP_VERSION);
    return 0;
  }
  if (argc != 3) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  json pred, meas;
  if (!load(argv[1], pred) || !load(argv[2], meas))
    return 1;
  Totals p = totals(pred, false), m = totals(meas, true);
  std::set<std::pair<std::string, std::string>> keys;
  for (auto &[k, v] : p.byUnit)
    keys.insert(k);
  for (auto &[k, v] : m.byUnit)
    keys.insert(k);
  std::printf("%-10s %-10s %14s %14s %10s\n", "phase", "unit", "predicted ms", "measured ms",
              "meas/pred");
  std::map<std::string, std::pair<double, double>> phases;
  for (const auto &k : keys) {
    double a = p.byUnit.count(k) ? p.byUnit[k] : 0, b = m.byUnit.count(k) ? m.byUnit[k] : 0;
    phases[k.first].first += a;
    phases[k.first].second += b;
    std::printf("%-10s %-10s %14.3f %14.3f %10.2f\n", k.first.c_str(), k.second.c_str(), a * 1e3,
                b * 1e3, a > 0 ? b / a : 0.0);
  }
  for (auto &[phase, v] : phases)
    std::printf("%-10s %-10s %14.3f %14.3f %10.2f\n", phase.c_str(), "(all)", v.first * 1e3,
                v.second * 1e3, v.first > 0 ? v.second / v.first : 0.0);
  std::printf("%-21s %14.3f %14.3f %10.2f\n", "step (rank 0)", p.step * 1e3, m.step * 1e3,
              p.step > 0 ? m.step / p.step : 0.0);
  return 0;
}
