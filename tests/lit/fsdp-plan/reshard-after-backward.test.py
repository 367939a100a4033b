"""reshard-after-backward.test's checks of the programs and its faulty
programs (--faults); two runs' metrics are grad-sync.test.py's
--same-losses."""
import copy
import json
import os
import sys

if sys.argv[1] == "--faults":
    kept, zero2, out = json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), sys.argv[4]

    def write(name, program, edit):
        p = copy.deepcopy(program)
        edit(p)
        json.dump(p, open(os.path.join(out, name + ".json"), "w"))

    write("no-first", kept, lambda p: p.pop("first_micro_step"))
    write("stray-first", zero2, lambda p: p.update(first_micro_step=p["micro_step"]))
    sys.exit(0)

kept, kept_last, zero2 = (json.load(open(p)) for p in sys.argv[1:4])
n = len(kept["units"])


def ops(program, phase, op):
    return [i for i in program[phase]["comm"] if i["op"] == op]


assert kept["reshard_after_backward"] is False and "grad_sync" not in kept
assert sorted(i["unit"] for i in ops(kept, "first_micro_step", "all_gather")) == list(range(n))
assert not ops(kept, "micro_step", "all_gather")
assert len(ops(kept, "first_micro_step", "reduce_scatter")) == n
assert len(ops(kept, "micro_step", "reduce_scatter")) == n
assert "last_micro_step" not in kept
print("kept: first_micro_step gathers every unit once and reduces; micro_step gathers nothing "
      "and reduces")

acc = lambda phase: [i for i in kept_last[phase]["compute"] if i["op"] == "accumulate"]
assert kept_last["grad_sync"] == "last" and kept_last["reshard_after_backward"] is False
assert len(ops(kept_last, "first_micro_step", "all_gather")) == n
for phase in ("micro_step", "last_micro_step"):
    assert not ops(kept_last, phase, "all_gather"), phase
for phase in ("first_micro_step", "micro_step"):
    assert not ops(kept_last, phase, "reduce_scatter") and len(acc(phase)) == n, phase
assert len(ops(kept_last, "last_micro_step", "reduce_scatter")) == n
print("kept-last: first_micro_step gathers and accumulates; micro_step accumulates; "
      "last_micro_step reduces; neither gathers")

# shard-grad-op keeps every unit gathered from its gather to its backward:
# its unsharded peak holds them all; kept, they are alive the whole step.
gathered = sum(4 * u["padded_numel"] for u in kept["units"])
assert kept["memory"]["unsharded_bytes"] >= gathered, (kept["memory"], gathered)
assert kept["memory"]["params_bytes"] == zero2["memory"]["params_bytes"]
print("the gathered buffers are the unsharded bytes of shard-grad-op's plan, alive all step")
