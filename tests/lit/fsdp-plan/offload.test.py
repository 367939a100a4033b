"""offload.test's checks of the programs, reports and runs, and its faulty
programs and cluster files."""
import copy
import json
import os
import sys

ALIGN = 64


def load(path):
    return json.load(open(path))


def align(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


if sys.argv[1] == "--tail":
    whole, *resumed = ([json.loads(l) for l in open(p) if l.strip()] for p in sys.argv[2:])
    want = [(m["loss"], m["grad_norm"]) for m in whole if m["step"] > 2]
    for r in resumed:
        got = [(m["loss"], m["grad_norm"]) for m in r]
        assert [m["step"] for m in r] == [3, 4] and got == want, (got, want)
    print("steps 3-4 resumed across --offload: the uninterrupted run's losses and gradient "
          "norms, bit for bit")
    sys.exit(0)

if sys.argv[1] == "--clusters":
    base, out = load(sys.argv[2]), sys.argv[3]
    none = {k: v for k, v in base.items() if k not in ("host_link", "host")}
    json.dump(none, open(os.path.join(out, "no-host.json"), "w"))
    small = copy.deepcopy(base)
    small["host"]["memory_bytes"] = 1 << 20
    json.dump(small, open(os.path.join(out, "small-host.json"), "w"))
    half = copy.deepcopy(base)
    del half["host"]
    json.dump(half, open(os.path.join(out, "half-host.json"), "w"), indent=1)
    sys.exit(0)

if sys.argv[1] == "--faults":
    out = sys.argv[2]
    off, none = load(os.path.join(out, "off.json")), load(os.path.join(out, "none.json"))

    def write(name, program, edit):
        p = copy.deepcopy(program)
        edit(p)
        json.dump(p, open(os.path.join(out, name + ".json"), "w"))

    write("f-word", off, lambda p: p.update(offload="everything"))
    write("f-no-pool", off, lambda p: p.pop("host_bytes"))
    write("f-stray-pool", none, lambda p: p.update(host_bytes=64))
    write("f-past", off, lambda p: p["units"][2].update(host_grad_offset=p["host_bytes"] - 4))
    write("f-stray-offsets", none, lambda p: p["units"][0].update(host_shard_offset=0,
                                                                   host_grad_offset=0))
    alls, allb = load(os.path.join(out, "all.json")), load(os.path.join(out, "all-bf16.json"))
    write("f-all-shard", alls, lambda p: p["units"][0].update(shard_offset=0))
    write("f-all-nocopy", allb, lambda p: p["units"][0].pop("host_gather_offset"))
    write("f-all-noshard", alls, lambda p: p.update(world_size=1, shard_size=1))
    sys.exit(0)

if sys.argv[1] == "--all":
    d = sys.argv[2]
    off, alls = load(os.path.join(d, "off.json")), load(os.path.join(d, "all.json"))
    allb = load(os.path.join(d, "all-bf16.json"))
    shards = sum(align(u["shard_numel"] * 4) for u in off["units"])
    assert alls["offload"] == "all" and all("shard_offset" not in u for u in alls["units"])
    assert off["arena_bytes"] - alls["arena_bytes"] == shards, (off["arena_bytes"],
                                                                alls["arena_bytes"], shards)
    assert alls["host_bytes"] == off["host_bytes"]
    for u in allb["units"]:
        o = u["host_gather_offset"]
        assert 0 <= o and o + 2 * u["shard_numel"] <= allb["host_bytes"], u["name"]
    print("all: no parameter shard in the arena (its bytes less than optimizer's), the shards "
          "the host pool's; bf16: each unit's bf16 copy in the pool")
    ro, ra = load(os.path.join(d, "off.report.json")), load(os.path.join(d, "all.report.json"))
    po, pa = ro["predicted"], ra["predicted"]
    assert pa["micro_step_time_s"] > po["micro_step_time_s"], (po, pa)
    assert pa["optimizer_time_s"] < po["optimizer_time_s"], (po, pa)
    print("all: every gather priced with its shard's copy from the host, the optimizer step "
          "without the copy back")
    sys.exit(0)

d = sys.argv[1]
off, none = load(os.path.join(d, "off.json")), load(os.path.join(d, "none.json"))
assert off["offload"] == "optimizer" and "offload" not in none and "host_bytes" not in none
host = off["host_bytes"]
ranges = []
for u in off["units"]:
    n = u["shard_numel"] * 4
    for key in ("exp_avg_offset", "exp_avg_sq_offset", "host_shard_offset", "host_grad_offset"):
        assert 0 <= u[key] and u[key] + n <= host, (u["name"], key)
        ranges.append((u[key], u[key] + n))
ranges.sort()
assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])), ranges
assert ranges[-1][1] == host
print("program: offload optimizer, host_bytes %d; each unit's moments, master shard and "
      "gradient copy within the host pool, disjoint" % host)

moments = sum(2 * align(u["shard_numel"] * 4) for u in none["units"])
assert none["arena_bytes"] - off["arena_bytes"] == moments, (none["arena_bytes"], off["arena_bytes"])
assert off["memory"]["optimizer_bytes"] == 0 and off["memory"]["host_bytes"] == host
# The same instructions, and every buffer above the shards where it was, the
# moments' bytes lower.
def shifted(i):
    i = dict(i)
    for key in ("dst", "src", "scratch"):
        if key in i and i[key] >= 0:
            i[key] -= moments
    return i


for phase in ("micro_step", "optimizer"):
    for a, b in zip(off[phase]["compute"] + off[phase]["comm"],
                    none[phase]["compute"] + none[phase]["comm"]):
        assert a == shifted(b), (phase, a, b)
assert [t["offset"] for t in off["tensors"]] == [t["offset"] - moments for t in none["tensors"]]
print("arena: the moments' %d bytes less than without offload, every other buffer as it was"
      % moments)

ro, rn = load(os.path.join(d, "off.report.json")), load(os.path.join(d, "none.report.json"))
hm = ro["host_memory"]
assert ro["offload"] == "optimizer" and rn["offload"] == "none" and "host_memory" not in rn
assert hm == {"host_bytes": host, "optimizer_bytes": 313728, "master_params_bytes": 156864,
              "grads_bytes": 156864, "gather_copies_bytes": 0, "fits": True}, hm
print("report: offload optimizer, host_memory the summary's figures; without: offload none, "
      "no host_memory")

po, pn = ro["predicted"], rn["predicted"]
assert po["optimizer_time_s"] > pn["optimizer_time_s"], (po, pn)
assert po["micro_step_time_s"] == pn["micro_step_time_s"], (po, pn)
print("prediction: the optimizer step slower offloaded (the copies and the host's AdamW), the "
      "micro-step the same")
