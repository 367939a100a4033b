"""Finding an MPI job's rank processes through /proc, for the drivers that
stop one (stop-rank.py, hang-nccl.py)."""
import os


def descendants(root):
    """The pids below `root`, from /proc's parent links."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0")[0]
    except OSError:
        return None
    # By its command line: fsdp-run may run re-executed (its comm is "exe").
    if not argv0.endswith(b"fsdp-run"):
        return None
    for item in env:
        if item.startswith(b"OMPI_COMM_WORLD_RANK="):
            return int(item.split(b"=", 1)[1])
    return None
