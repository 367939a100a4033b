"""tensor-parallel.test's checks of the programs in DIR (--program DIR), its
faulty programs (--faults DIR), a checkpoint's meta.json (--meta FILE), a
resumed run's last step against the uninterrupted run's (--same WHOLE
RESUMED) and its runs' peaks (--peaks RUN...)."""
import copy
import json
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def instructions(p, phase, stream, op):
    return [i for i in p[phase][stream] if i["op"] == op]


if sys.argv[1] == "--program":
    d = sys.argv[2]
    p = load(os.path.join(d, "tp2.json"))
    assert p["tp"] == 2 and p["sequence_parallel"] is True, (p.get("tp"), p.get("sequence_parallel"))
    params = {prm["name"]: prm for u in p["units"] for prm in u["params"]}
    for name, prm in params.items():
        proj = name.split(".")[-2]
        if proj in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"):
            assert (prm["tp_dim"], prm["tp_pieces"]) == (0, 2) and "tp_partial" not in prm, prm
        elif proj in ("o_proj", "down_proj"):
            assert (prm["tp_dim"], prm["tp_pieces"]) == (1, 2) and "tp_partial" not in prm, prm
        else:  # embeddings, norms, head: whole, their gradients partial under SP
            assert "tp_dim" not in prm and prm.get("tp_partial") is True, prm
    chunks = instructions(p, "micro_step", "compute", "tp_chunk")
    assert sorted(i["in"][0] for i in chunks)[0] == p["inputs"]["targets"] or \
        p["inputs"]["targets"] in [i["in"][0] for i in chunks]
    assert len(chunks) == 2, chunks  # the embeddings' output and the targets
    blocks = sum(1 for u in p["units"] if u["name"].startswith("block"))
    for op in ("tp_all_gather", "tp_reduce_scatter"):
        # Attention and MLP in forward (2 a block) and the mirror in backward.
        assert len(instructions(p, "micro_step", "compute", op)) == 4 * blocks, op
    sums = instructions(p, "last_micro_step", "comm", "all_reduce")
    assert sorted(i["unit"] for i in sums if i.get("group") == "tp") == list(range(len(p["units"])))
    assert not [i for i in p["micro_step"]["comm"] if i["op"] == "all_reduce"]
    print("tp2: tp 2 with sequence parallelism; q, k, v, gate, up cut along dim 0, o and down "
          "along dim 1; norms whole with partial gradients; tp_chunk of the embeddings and the "
          "targets; %d tp_all_gather and %d tp_reduce_scatter a micro-step; one all_reduce over "
          "tp a unit, in last_micro_step" % (4 * blocks, 4 * blocks))
    p = load(os.path.join(d, "tp4.json"))
    assert p["tp"] == 4 and p["sequence_parallel"] is False
    params = {prm["name"]: prm for u in p["units"] for prm in u["params"]}
    kv = [prm for n, prm in params.items() if n.split(".")[-2] in ("k_proj", "v_proj")]
    assert kv and all(prm["tp_pieces"] == 2 and prm.get("tp_partial") for prm in kv), kv
    assert not instructions(p, "micro_step", "compute", "tp_chunk")
    n = len(instructions(p, "micro_step", "compute", "tp_all_reduce"))
    assert n == 4 * blocks, n
    print("tp4: tp 4 without sequence parallelism: 2 kv pieces shared by 2 ranks each, partial; "
          "%d tp_all_reduce a micro-step" % n)
    sys.exit(0)

if sys.argv[1] == "--faults":
    d = sys.argv[2]
    tp2 = load(os.path.join(d, "tp2.json"))

    def write(name, edit):
        p = copy.deepcopy(tp2)
        edit(p)
        with open(os.path.join(d, name + ".json"), "w") as f:
            json.dump(p, f)

    def first_cut(p):
        return next(prm for u in p["units"] for prm in u["params"] if "tp_dim" in prm)

    def first(p, op):
        return next(i for i in p["micro_step"]["compute"] if i["op"] == op)

    write("tp3", lambda p: p.update(tp=3))
    write("sp-only", lambda p: p.pop("tp"))
    write("cut-dim", lambda p: first_cut(p).update(tp_dim=2))
    write("gather-tp", lambda p: next(i for i in p["micro_step"]["comm"]
                                      if i["op"] == "all_gather").update(group="tp"))
    # A gather whose whole output is its part's size.
    write("whole", lambda p: first(p, "tp_all_gather").update(out=first(p, "tp_all_gather")["in"]))
    write("no-sp", lambda p: p.update(sequence_parallel=False))
    sys.exit(0)

if sys.argv[1] == "--meta":
    m = load(sys.argv[2])
    params = {q["name"]: q for u in m["units"] for q in u["params"]}

    def said(name):
        q = params[name]
        cut = ("cut along dim %d in %d pieces" % (q["tp_dim"], q["tp_pieces"])
               if "tp_dim" in q else "whole")
        return "%s %s %s" % (name, q["shape"], cut)
    print("tp %d, %d shard files; %s; %s" % (m["tp"], m["shard_files"],
                                             said("model.layers.0.self_attn.k_proj.weight"),
                                             said("model.norm.weight")))
    sys.exit(0)

if sys.argv[1] == "--same":
    whole, resumed = ([json.loads(l) for l in open(p) if l.strip()] for p in sys.argv[2:4])
    a, b = whole[-1], resumed[-1]
    assert a["step"] == b["step"] and (a["loss"], a["grad_norm"]) == (b["loss"], b["grad_norm"]), (a, b)
    print("step %d: the resumed run's loss and grad norm are the uninterrupted run's, bit for bit"
          % a["step"])
    sys.exit(0)

assert sys.argv[1] == "--peaks"
for path in sys.argv[2:]:
    run = [json.loads(l) for l in open(path) if l.strip()]
    assert run and all(x["peak_bytes"] == x["predicted_peak_bytes"] for x in run), run
    print("%s: %d steps, every peak the predicted one" % (os.path.basename(path), len(run)))
