"""reshard-after-forward.test's checks of the programs and reports in DIR,
and its faulty programs (--faults DIR); two runs' metrics are
grad-sync.test.py's --same-losses."""
import copy
import json
import os
import sys


def load(d, name):
    return json.load(open(os.path.join(d, name)))


if sys.argv[1] == "--faults":
    out = sys.argv[2]
    hpz, full = load(out, "hpz.json"), load(out, "full.json")

    def write(name, program, edit):
        p = copy.deepcopy(program)
        edit(p)
        json.dump(p, open(os.path.join(out, name + ".json"), "w"))

    def comm(p, pred):
        return next(i for i in p["micro_step"]["comm"] if pred(i))

    over = lambda i: i.get("group") == "reshard"
    write("no-group", hpz, lambda p: p.pop("reshard_after_forward"))
    write("bad-n", hpz, lambda p: p.update(reshard_after_forward=3))
    write("bad-group", hpz, lambda p: comm(p, over).update(group="node"))
    write("rs-group", hpz,
          lambda p: comm(p, lambda i: i["op"] == "reduce_scatter").update(group="reshard"))
    copy_op = lambda p: next(i for i in p["micro_step"]["compute"] if i["op"] == "reshard")
    write("copy-past", hpz, lambda p: copy_op(p).update(dst=p["arena_bytes"] - 8))
    sys.exit(0)

d = sys.argv[1]
hpz, full, bf16 = load(d, "hpz.json"), load(d, "full.json"), load(d, "hpz-bf16.json")
assert hpz["reshard_after_forward"] == 2 and "reshard_after_forward" not in full
units = hpz["units"]
root = next(k for k, u in enumerate(units) if u["name"] == "root")


def instructions(p, stream):
    return p["micro_step"][stream]


for p, elem in ((hpz, 4), (bf16, 2)):
    copies = [i for i in instructions(p, "compute") if i["op"] == "reshard"]
    over = [i for i in instructions(p, "comm") if i["op"] == "all_gather" and i.get("group")]
    assert sorted(i["unit"] for i in copies) == [k for k in range(len(units)) if k != root]
    assert sorted(i["unit"] for i in over) == sorted(i["unit"] for i in copies)
    # The root: gathered over the shard group, once (kept from forward to backward).
    assert [i["unit"] for i in instructions(p, "comm")
            if i["op"] == "all_gather" and not i.get("group")].count(root) == 1
    for c in copies:
        g = next(i for i in over if i["unit"] == c["unit"])
        assert g["src"] == c["dst"] and g.get("dtype") == c.get("dtype"), (g, c)
        frees = [i for i in instructions(p, "compute")
                 if i["op"] == "free" and i["unit"] == c["unit"] and i["kind"] == "resharded"]
        assert len(frees) == 1
if True:
    print("hpz: every unit but the root resharded after forward and gathered over the reshard "
          "group in backward; the root gathered over the shard group")
print("hpz: each copy 1/2 of the gathered bytes (f32 and bf16), alive from its reshard to its "
      "backward gather")

r, fr, zr = load(d, "hpz.report.json"), load(d, "full.report.json"), load(d, "false.report.json")
assert r["reshard_after_forward"] == 2 and fr["reshard_after_forward"] is True
assert zr["reshard_after_forward"] is False and zr["strategy"] == "shard-grad-op"
backward = sum(4 * units[i["unit"]]["padded_numel"] for i in instructions(hpz, "comm")
               if i["op"] == "all_gather" and i.get("group"))
assert r["comm"]["all_gather_reshard"] == backward, (r["comm"], backward)
assert r["comm"]["all_gather"] == fr["comm"]["all_gather"]
print("report: reshard_after_forward 2, all_gather_reshard the backward gathers' bytes; "
      "full-shard's true, shard-grad-op's false")

assert load(d, "false.json") == load(d, "zero2.json")
print("--reshard-after-forward false: the same program as --strategy shard-grad-op")
