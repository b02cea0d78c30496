"""The worker process of the elastic runtime (``python -m causalkit.systems.elastic.worker``).

A worker trains its shard of the model in the active world and, at step boundaries, obeys the
control word that world rank 0 reads from the control store and all-reduces to everyone:

* ``PREPARE g`` -- a background thread (the companion) builds the shadow world of generation
  ``g`` (transfer group over old and new workers, the new world's TP/DP groups), computes the plan
  and preallocates the destination shards, then counts itself READY; training goes on meanwhile.
* ``CUT g`` -- once every member is READY: the pipeline is drained, so the step boundary is a
  consistent cut. TRANSFER (bounded staging), VERIFY (CRC32 of every piece, sender vs receiver),
  report status, then wait for the coordinator's COMMIT or ABORT. On commit the new world takes over
  at the same step; on abort the shadow is discarded and the old world trains on, untouched.
* ``CHECKPOINT g`` -- the checkpoint/restart baseline: save with torch.distributed.checkpoint and
  exit; the coordinator relaunches the new world with torchrun, and it loads with resharding.

Joining workers start cold, warm up their stage against :class:`~.comm.MockComm` (isolated
bootstrap), then join the shadow world.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sys
import threading
import time

T_START = time.time()

import torch  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402

from .comm import MockComm, build_group, connect_store  # noqa: E402
from .layout import ModelSpec, ParallelLayout  # noqa: E402
from .model import Stage  # noqa: E402
from .optim import ZeroAdam  # noqa: E402
from .plan import holdings, relative_slices, reshard_plan  # noqa: E402
from .schedule import train_step  # noqa: E402
from .state import box_key, execute_plan, local_state, save_npz  # noqa: E402

T_IMPORTED = time.time()

OP_NONE, OP_PREPARE, OP_CUT, OP_CHECKPOINT = 0, 1, 2, 3


class World:
    """One generation's groups for one worker: world, TP group, DP group and its stage."""

    def __init__(self, store, gen: int, layout: ParallelLayout, members: list[int], wid: int,
                 timeout_s: float):
        self.gen, self.layout, self.members = gen, layout, list(members)
        self.rank = self.members.index(wid)
        c = layout.coords(self.rank)
        w = lambda ranks: [self.members[r] for r in ranks]  # noqa: E731
        self.world = build_group(store, f"g{gen}/world/", self.members, wid, timeout_s)
        self.tp = build_group(store, f"g{gen}/tp/{c.pp}.{c.dp}/", w(layout.tp_group(self.rank)),
                              wid, timeout_s)
        self.dp = build_group(store, f"g{gen}/dp/{c.pp}.{c.tp}/", w(layout.dp_group(self.rank)),
                              wid, timeout_s)

    def comms(self):
        return (self.world, self.tp, self.dp)


class Worker:
    def __init__(self, port: int, wid: int, run_dir: str):
        self.wid, self.run_dir = wid, run_dir
        self.store = connect_store(port)
        cfg = json.loads(self.store.get("run").decode())
        self.spec = ModelSpec(**cfg["spec"])
        self.steps, self.timeout_s = cfg["steps"], cfg["timeout_s"]
        self.dump = cfg["dump_state"]
        # one log file for the life of the process (closed in exit)
        self.log_file = open(os.path.join(run_dir, f"w{wid}-p{os.getpid()}.jsonl"),  # noqa: SIM115
                             "a")
        self.keep = []  # retired groups are kept referenced (gloo objects must not die mid-run)
        self.stage = self.opt = self.active = None
        self.step = 0
        self.next_cmd = 0
        self.pending = None  # (gen, thread, result dict)

    # -- bookkeeping -------------------------------------------------------------------------
    def log(self, ev: str, **kw) -> None:
        kw.update(ev=ev, wid=self.wid, t=kw.get("t", time.time()))
        self.log_file.write(json.dumps(kw) + "\n")
        self.log_file.flush()

    def gen_spec(self, gen: int) -> dict:
        return json.loads(self.store.get(f"g{gen}/spec").decode())

    def exit(self, code: int = 0) -> None:
        self.log("exit", maxrss_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        self.log_file.close()
        os._exit(code)

    def make_stage(self, layout, rank, tp_comm, dp_comm, init):
        stage = Stage(self.spec, layout, rank, tp_comm, init=init)
        c = layout.coords(rank)
        return stage, ZeroAdam(stage, dp_comm, layout.dp, c.dp, self.spec.lr)

    # -- entry points ------------------------------------------------------------------------
    def start(self, gen: int) -> None:
        """Initial member of generation ``gen``: fresh parameters, train."""
        g = self.gen_spec(gen)
        layout = ParallelLayout(**g["layout"])
        self.active = World(self.store, gen, layout, g["members"], self.wid, self.timeout_s)
        self.stage, self.opt = self.make_stage(layout, self.active.rank, self.active.tp,
                                               self.active.dp, init=True)
        self.log("world_built", gen=gen)
        self.train()

    def join(self, gen: int) -> None:
        """Joining worker: isolated warm-up against mock groups, then the shadow world."""
        self.log("imported", gen=gen, t_start=T_START, t=T_IMPORTED)
        g = self.gen_spec(gen)
        layout = ParallelLayout(**g["layout"])
        rank = g["members"].index(self.wid)
        c = layout.coords(rank)
        stage, opt = self.make_stage(layout, rank, MockComm(layout.tp, c.tp),
                                     MockComm(layout.dp, c.dp), init=False)
        train_step(stage, opt, MockComm(layout.world_size, rank), MockComm(layout.dp, c.dp), 0)
        with torch.no_grad():
            for t, _ in local_state(stage, opt).values():
                t.zero_()
        self.log("warmed_up", gen=gen)
        self.store.set(f"g{gen}/joined/{self.wid}", "1")
        result = self.prepare(gen, stage=stage, opt=opt)
        self.store.add(f"g{gen}/ready", 1)
        self.wait_keys([f"g{gen}/cut"])
        if self.transfer_and_commit(gen, result):
            self.train()
        self.exit(0)

    def restart(self, gen: int) -> None:
        """Relaunched by torchrun after a checkpoint: rebuild the world, load with resharding."""
        self.log("imported", gen=gen, t_start=T_START, t=T_IMPORTED)
        g = self.gen_spec(gen)
        layout = ParallelLayout(**g["layout"])
        self.active = World(self.store, gen, layout, g["members"], self.wid, self.timeout_s)
        self.log("world_built", gen=gen)
        self.stage, self.opt = self.make_stage(layout, self.active.rank, self.active.tp,
                                               self.active.dp, init=False)
        place_s = self.load_checkpoint(g, layout)
        meta = json.loads(self.store.get(f"g{gen}/train_state").decode())
        self.step, self.next_cmd = meta["step"], meta["next_cmd"]
        self.log("loaded", gen=gen, place_s=place_s)
        self.train()

    # -- training loop -----------------------------------------------------------------------
    def train(self) -> None:
        while self.step < self.steps:
            t0 = time.time()
            loss = train_step(self.stage, self.opt, self.active.world, self.active.dp, self.step)
            t1 = time.time()
            c = self.stage.coords
            report = loss if (c.dp == 0 and c.tp == 0 and self.stage.last) else None
            self.log("step", gen=self.active.gen, step=self.step, t0=t0, t=t1, loss=report,
                     layout=str(self.active.layout), preparing=self.pending is not None)
            self.step += 1
            if self.active.rank == 0:
                self.store.set("progress", str(self.step))
            op, gen = self.control()
            if op == OP_PREPARE:
                result: dict = {}
                thread = threading.Thread(target=self._companion, args=(gen, result), daemon=True)
                self.pending = (gen, thread, result)
                thread.start()
            elif op == OP_CUT:
                gen, thread, result = self.pending
                self.pending = None
                thread.join()
                if self.active.rank == 0:
                    self.store.set(f"g{gen}/next_cmd", str(self.next_cmd))
                    self.store.set(f"g{gen}/cut", str(self.step))
                if not self.transfer_and_commit(gen, result):
                    continue
            elif op == OP_CHECKPOINT:
                self.save_checkpoint(gen)
                self.exit(0)
        self.log("done", step=self.step)
        self.exit(0)

    def control(self) -> tuple[int, int]:
        """World rank 0 decides the next control word ``(op, gen, stop_at)``; an all-reduce
        makes everyone agree (and adopt the same final step count)."""
        word = torch.zeros(3, dtype=torch.int64)
        if self.active.rank == 0:
            if self.store.check(["stop_at"]):
                word[2] = int(self.store.get("stop_at").decode())
            if self.pending is not None:
                gen = self.pending[0]
                union = len(set(self.active.members) | set(self.gen_spec(gen)["members"]))
                # cut when everyone is ready, or when the coordinator already aborted
                if (self.store.add(f"g{gen}/ready", 0) == union
                        or self.store.check([f"g{gen}/decision"])):
                    word[:2] = torch.tensor([OP_CUT, gen])
            elif self.store.check([f"cmd/{self.next_cmd}"]):
                cmd = json.loads(self.store.get(f"cmd/{self.next_cmd}").decode())
                self.next_cmd += 1
                op = OP_PREPARE if cmd["op"] == "prepare" else OP_CHECKPOINT
                word[:2] = torch.tensor([op, cmd["gen"]])
        self.active.world.all_reduce(word)
        if word[2] > 0:
            self.steps = max(int(word[2]), self.step)
        return int(word[0]), int(word[1])

    # -- live resize -------------------------------------------------------------------------
    def _companion(self, gen: int, result: dict) -> None:
        try:
            result.update(self.prepare(gen))
        except Exception as exc:  # reported at the cut; the coordinator aborts
            result["error"] = repr(exc)
        self.store.add(f"g{gen}/ready", 1)

    def prepare(self, gen: int, stage=None, opt=None) -> dict:
        """Build the shadow world of ``gen`` and everything the transfer needs."""
        self.log("prepare_start", gen=gen)
        g = self.gen_spec(gen)
        old_layout, new_layout = ParallelLayout(**g["old_layout"]), ParallelLayout(**g["layout"])
        union = sorted(set(g["old_members"]) | set(g["members"]))
        # groups are built only once every joiner is up: a slow start never hits a gloo timeout
        joiners = [w for w in g["members"] if w not in g["old_members"]]
        self.wait_keys([f"g{gen}/joined/{w}" for w in joiners], abort_key=f"g{gen}/decision")
        xfer = build_group(self.store, f"g{gen}/xfer/", union, self.wid, self.timeout_s)
        out = {"xfer": xfer, "union": union, "world": None, "stage": stage, "opt": opt}
        if self.wid in g["members"]:
            world = World(self.store, gen, new_layout, g["members"], self.wid, self.timeout_s)
            if stage is None:
                stage, opt = self.make_stage(new_layout, world.rank, world.tp, world.dp, False)
            stage.tp_comm, opt.dp_comm = world.tp, world.dp
            out.update(world=world, stage=stage, opt=opt)
        out["plan"] = reshard_plan(old_layout, new_layout, self.spec,
                                   old_workers=g["old_members"], new_workers=g["members"],
                                   staging_bytes=g["staging_bytes"])
        self.log("prepare_end", gen=gen)
        return out

    def transfer_and_commit(self, gen: int, res: dict) -> bool:
        """TRANSFER, VERIFY, report, obey the decision. Returns True if the world changed."""
        g = self.gen_spec(gen)
        self.log("transfer_start", gen=gen, step=self.step)
        status, stats = "ok", {}
        try:
            if "error" in res:
                raise RuntimeError(res["error"])
            src = local_state(self.stage, self.opt) if self.stage is not None else {}
            if self.dump and src:
                save_npz(os.path.join(self.run_dir, f"dump-g{gen}-before-w{self.wid}.npz"), src)
            dst = local_state(res["stage"], res["opt"]) if res["stage"] is not None else {}
            fault = g.get("fault") or {}
            on_batch = None
            if fault.get("kill_worker") == self.wid:
                def on_batch(b):
                    if b + 1 >= fault.get("after_batches", 1):
                        self.log("fault_kill", gen=gen, batch=b)
                        os.kill(os.getpid(), signal.SIGKILL)
            ranks = {w: i for i, w in enumerate(res["union"])}
            stats = execute_plan(res["plan"], self.wid, res["xfer"], ranks, src, dst, on_batch)
            self.log("transfer_end", gen=gen, peak_staging_bytes=stats["peak_staging_bytes"],
                     place_s=stats["place_s"])
            self.verify(gen, res, stats)
            if self.dump and dst:
                save_npz(os.path.join(self.run_dir, f"dump-g{gen}-after-w{self.wid}.npz"), dst)
            self.log("verify_end", gen=gen)
        except Exception as exc:
            status = f"fail: {exc!r}"[:500]
            self.log("transfer_failed", gen=gen, error=status)
            res["xfer"].abort()
        self.store.set(f"g{gen}/status/{self.wid}", status)
        decision = self.wait_keys([f"g{gen}/decision"])[0]
        self.log("decision", gen=gen, decision=decision)
        if decision != "commit":
            for comm in (res["xfer"],) + (res["world"].comms() if res["world"] else ()):
                comm.abort()
            self.keep.append(res)
            if self.active is None:  # a joiner: nothing to go back to
                self.exit(0)
            return False
        if res["world"] is None:  # leaving the job: its shards are already sent
            self.exit(0)
        self.keep.append(self.active)
        self.active, self.stage, self.opt = res["world"], res["stage"], res["opt"]
        self.keep.append(res["xfer"])
        self.step = int(self.store.get(f"g{gen}/cut").decode())
        self.next_cmd = int(self.store.get(f"g{gen}/next_cmd").decode())
        self.log("switched", gen=gen)
        if self.active.rank == 0:
            self.store.set("progress", str(self.step))
        return True

    def verify(self, gen: int, res: dict, stats: dict) -> None:
        """Compare the CRC32 of every received piece with the sender's."""
        for dst, crcs in stats["sent"].items():
            self.store.set(f"g{gen}/crc/{self.wid}-{dst}", json.dumps(crcs))
        sources = sorted({src for src, _ in stats["received"].values()})
        keys = [f"g{gen}/crc/{src}-{self.wid}" for src in sources]
        sent = {}
        for value in self.wait_keys(keys, abort_key=f"g{gen}/decision"):
            sent.update({int(k): v for k, v in json.loads(value).items()})
        bad = [task for task, (_, crc) in stats["received"].items() if sent.get(task) != crc]
        if bad:
            raise RuntimeError(f"checksum mismatch in {len(bad)} transfers (first: {bad[:5]})")

    def wait_keys(self, keys: list[str], abort_key: str | None = None) -> list[str]:
        """Poll the store until every key exists (or ``abort_key`` appears: raise)."""
        deadline = time.time() + 10 * self.timeout_s
        while not (not keys or self.store.check(keys)):
            if abort_key is not None and self.store.check([abort_key]):
                raise RuntimeError("resize aborted by the coordinator")
            if time.time() > deadline:
                raise TimeoutError(f"timed out waiting for {keys[:3]}")
            time.sleep(0.002)
        return [self.store.get(k).decode() for k in keys]

    # -- checkpoint / restart baseline -------------------------------------------------------
    def save_checkpoint(self, gen: int) -> None:
        self.log("save_start", gen=gen, step=self.step)
        layout, rank = self.active.layout, self.active.rank
        primary = {}
        for h in holdings(layout, self.spec):
            primary.setdefault((h.kind, h.name, h.box), h.rank)
        state = {box_key(kind, name, box): t.detach()
                 for (kind, name), (t, box) in local_state(self.stage, self.opt).items()
                 if primary[(kind, name, box)] == rank}
        path = os.path.join(self.run_dir, f"ckpt-g{gen}", f"rank{rank}")
        dcp.save(state, checkpoint_id=path, no_dist=True)
        if rank == 0:
            self.store.set(f"g{gen}/train_state",
                           json.dumps({"step": self.step, "next_cmd": self.next_cmd}))
        self.log("save_end", gen=gen)

    def load_checkpoint(self, g: dict, layout: ParallelLayout) -> float:
        """Read this rank's pieces of the checkpoint of ``g`` and write them into the new
        layout's shards; returns the seconds spent on the writing (the re-layout)."""
        place_s = 0.0
        old_layout = ParallelLayout(**g["old_layout"])
        plan = reshard_plan(old_layout, layout, self.spec, staging_bytes=1 << 40,
                            source="primary")
        dst = local_state(self.stage, self.opt)
        mine = [t for t in plan.transfers if t.dst == self.active.rank]
        for src in sorted({t.src for t in mine}):
            pieces = [t for t in mine if t.src == src]
            wanted = {box_key(t.kind, t.name, t.src_box): t.src_box for t in pieces}
            state = {k: torch.empty([b - a for a, b in box], dtype=self.stage_dtype())
                     for k, box in wanted.items()}
            dcp.load(state, checkpoint_id=os.path.join(self.run_dir, f"ckpt-g{g['gen']}",
                                                       f"rank{src}"), no_dist=True)
            t0 = time.perf_counter()
            with torch.no_grad():
                for t in pieces:
                    tensor, dst_box = dst[(t.kind, t.name)]
                    piece = state[box_key(t.kind, t.name, t.src_box)]
                    tensor[relative_slices(t.box, dst_box)] = piece[relative_slices(t.box,
                                                                                    t.src_box)]
            place_s += time.perf_counter() - t0
        return place_s

    def stage_dtype(self):
        return next(iter(self.stage.params.values())).dtype


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="causalkit elastic worker (internal)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--gen", type=int, required=True)
    parser.add_argument("--role", choices=["start", "join", "restart"], required=True)
    parser.add_argument("--wid", type=int, default=None,
                        help="worker id (default: members[RANK] of the generation, for torchrun)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    wid = args.wid
    if wid is None:
        store = connect_store(args.port)
        members = json.loads(store.get(f"g{args.gen}/spec").decode())["members"]
        wid = members[int(os.environ["RANK"])]
    worker = Worker(args.port, wid, args.run_dir)
    try:
        getattr(worker, args.role)(args.gen)
    except Exception as exc:
        worker.log("crash", error=repr(exc)[:1000])
        worker.log_file.flush()
        os._exit(3)


if __name__ == "__main__":
    main(sys.argv[1:])
