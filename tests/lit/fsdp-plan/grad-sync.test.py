"""grad-sync.test's checks of the programs and reports, and of two runs'
metrics (--same-losses A B)."""
import json
import sys

if sys.argv[1] == "--same-losses":
    a, b = ([json.loads(l) for l in open(p) if l.strip()] for p in sys.argv[2:4])
    same = [(x["loss"], x["grad_norm"]) for x in a] == [(y["loss"], y["grad_norm"]) for y in b]
    exact = all(x["peak_bytes"] == x["predicted_peak_bytes"] for x in a + b)
    # --offload: the host pool's measured peak is the plan's too.
    exact = exact and all(x.get("host_peak_bytes") == x.get("predicted_host_peak_bytes")
                          for x in a + b)
    assert same and exact and len(a) == len(b), (a, b)
    print("the same losses and gradient norms, bit for bit, and every peak the predicted one")
    sys.exit(0)

if sys.argv[1] == "--faults":
    # Faulty copies of the two programs, for the loader to refuse.
    import copy
    import os
    last, every, out = json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), sys.argv[4]

    def write(name, program, edit):
        p = copy.deepcopy(program)
        edit(p)
        json.dump(p, open(os.path.join(out, name + ".json"), "w"))

    def first_accumulate(p):
        return next(i for i in p["micro_step"]["compute"] if i["op"] == "accumulate")

    write("sync-word", last, lambda p: p.update(grad_sync="sometimes"))
    write("no-last-phase", last, lambda p: p.pop("last_micro_step"))
    write("stray-last-phase", every, lambda p: p.update(last_micro_step=p["micro_step"]))
    write("stray-sum", every, lambda p: p["units"][0].update(accumulated_offset=0))
    write("wrong-sum", last, lambda p: first_accumulate(p).update(
        dst=first_accumulate(p)["dst"] + 4))
    write("accumulate-in-every", every, lambda p: p["micro_step"]["compute"].append(
        {"op": "accumulate", "unit": 0, "src": 0, "dst": 0}))
    def first_reduction(p):
        return next(i for i in p["last_micro_step"]["comm"] if i["op"] == "reduce_scatter")

    write("reduce-elsewhere", last, lambda p: first_reduction(p).update(
        src=first_reduction(p)["src"] + 4))
    write("sum-past-arena", last, lambda p: p["units"][0].update(
        accumulated_offset=p["arena_bytes"] - 4))
    sys.exit(0)

last, every, last_report, every_report = (json.load(open(p)) for p in sys.argv[1:5])
units = last["units"]
assert last["grad_sync"] == "last"
sums = {}
for u in units:
    off = u["accumulated_offset"]
    assert 0 <= off and off + 4 * u["padded_numel"] <= last["arena_bytes"], u
    sums[off] = u
# The sums do not overlap one another.
ends = sorted((off, off + 4 * u["padded_numel"]) for off, u in sums.items())
assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:])), ends
print("grad_sync last; every unit has an f32 accumulation buffer of its padded size")


def ops(phase, stream, op):
    return [i for i in last[phase][stream] if i["op"] == op]


micro, final = last["micro_step"], last["last_micro_step"]
assert not ops("micro_step", "comm", "reduce_scatter") and not ops("micro_step", "comm", "all_reduce")
acc = ops("micro_step", "compute", "accumulate")
assert sorted(i["unit"] for i in acc) == list(range(len(units))), acc
allocs = {i["unit"]: i["dst"] for i in ops("micro_step", "compute", "alloc")}
for i in acc:
    assert i["src"] == allocs[i["unit"]] and i["dst"] == units[i["unit"]]["accumulated_offset"], i
print("micro_step: no reduction; each unit accumulated once, from its gradient buffer into its sum")

rs = ops("last_micro_step", "comm", "reduce_scatter")
assert sorted(i["unit"] for i in rs) == list(range(len(units))), rs
for i in rs:
    assert i["src"] == units[i["unit"]]["accumulated_offset"], i
# Without the reductions, their events and waits, it is micro_step.
strip = lambda l: [{k: v for k, v in i.items() if k != "event"} for i in l
                   if i["op"] not in ("reduce_scatter", "record", "wait")]
assert strip(final["compute"]) == strip(micro["compute"])
assert strip(final["comm"]) == strip(micro["comm"])
print("last_micro_step: micro_step with a reduce_scatter per unit, reading its sum")

assert "grad_sync" not in every and "last_micro_step" not in every
assert all("accumulated_offset" not in u for u in every["units"])
assert not [i for i in every["micro_step"]["compute"] if i["op"] == "accumulate"]
print("every: no grad_sync, last_micro_step, accumulated_offset or accumulate")

sum_bytes = sum(4 * u["padded_numel"] for u in units)
assert last["memory"]["grads_bytes"] == every["memory"]["grads_bytes"] + sum_bytes, (
    last["memory"], every["memory"], sum_bytes)
print("memory: last's grads_bytes are every's and the sums'")
assert last_report["grad_sync"] == "last" and every_report["grad_sync"] == "every"
print("report: grad_sync last and every")
