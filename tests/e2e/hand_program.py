"""The skeleton of a hand-written one-unit program (docs/program-format.md)
for fsdp-run tests that come before the planner writes such programs
(make_image_program.py, make_masked_program.py): one parameter (or a few,
`more`) in one full-shard unit padded to R shards, its arena laid out in
16-byte steps, the gather and reduce-scatter on the comm stream joined by
events 0-3, then the global norm and AdamW (events 4-5).
"""
import json


class OneUnit:
    def __init__(self, module, param, shape, world, more=()):
        """`more`: further (name, shape) parameters after the first, each
        2-D or more (decayed); `at[name]` is the arena offset of a
        parameter's gathered view and `grad_at[name]` of its gradient."""
        params, numel = [], 0
        for name, dims in [(param, shape)] + list(more):
            n = 1
            for d in dims:
                n *= d
            params.append({"name": name, "shape": list(dims), "offset": numel, "numel": n,
                           "decay": True})
            numel += n
        padded = -(-numel // world) * world
        shard = padded // world
        self.numel, self.world, self.offset = numel, world, 0
        self.unit = {"name": "unit0", "module": module, "numel": numel, "padded_numel": padded,
                     "shard_size": world, "shard_numel": shard}
        for key in ("shard_offset", "grad_shard_offset", "exp_avg_offset", "exp_avg_sq_offset"):
            self.unit[key] = self.take(shard * 4)
        self.unit["params"] = params
        self.gathered = self.take(padded * 4)  # the gathered parameters
        self.grads = self.take(padded * 4)     # their unsharded gradient
        self.at = {p["name"]: self.gathered + p["offset"] * 4 for p in params}
        self.grad_at = {p["name"]: self.grads + p["offset"] * 4 for p in params}

    def take(self, nbytes):
        """The arena offset of a buffer of nbytes, 16-byte aligned."""
        at = self.offset
        self.offset += (nbytes + 15) // 16 * 16
        return at

    def write(self, path, model, micro_batch, seq_len, inputs, tensors, compute):
        """Writes the program: `tensors` (ids given in order; the loss is
        tensor 2) and the micro-step's `compute` list, which records event 0
        before the gather, waits for 1 after it, records 2 before the
        reduce-scatter and waits for 3 after it."""
        for i, t in enumerate(tensors):
            t["id"] = i
        comm = [
            {"op": "wait", "event": 0},
            {"op": "all_gather", "unit": 0, "dst": self.gathered, "phase": "forward"},
            {"op": "record", "event": 1},
            {"op": "wait", "event": 2},
            {"op": "reduce_scatter", "unit": 0, "src": self.grads, "phase": "backward"},
            {"op": "record", "event": 3},
        ]
        program = {
            "format": "fsdp-program", "version": 1,
            "model": dict(model, parameters=self.numel),
            "world_size": self.world, "strategy": "full-shard", "shard_size": self.world,
            "micro_batch": micro_batch, "seq_len": seq_len, "arena_bytes": self.offset,
            "memory": {"peak_bytes": self.offset}, "events": 6,
            "inputs": inputs,
            "loss": 2, "units": [self.unit], "tensors": tensors,
            "micro_step": {"compute": compute, "comm": comm},
            "optimizer": {"compute": [{"op": "record", "event": 4},
                                      {"op": "wait", "event": 5, "phase": "optimizer"},
                                      {"op": "optimizer_step", "unit": 0, "phase": "optimizer"}],
                          "comm": [{"op": "wait", "event": 4},
                                   {"op": "grad_norm", "phase": "optimizer"},
                                   {"op": "record", "event": 5}]},
        }
        with open(path, "w") as f:
            json.dump(program, f, indent=1)
            f.write("\n")
