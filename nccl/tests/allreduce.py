# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""torch.distributed all_reduce over NCCL, for gpu-allreduce.sh.

  torchrun --nproc_per_node 2 allreduce.py run OUT.json SIZE[,SIZE...]
      every rank: all_reduce(SUM) of float32 tensors of each size, checked
      element by element, then timed; rank 0 writes OUT.json.
  allreduce.py annotate RUN.json CONFIG ROUND ok|failed EVIDENCE.txt [WHY...]
      record what the script found about a run (its NCCL log lines).
  allreduce.py report OUT.md CONTEXT.json RUN.json...
      the markdown table of bus bandwidth per size and configuration.
"""
import json
import os
import sys
import time


def run(out, sizes):
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    rows = []
    for nbytes in sizes:
        n = nbytes // 4
        base = (torch.arange(n, device=dev, dtype=torch.int64) % 251).float()
        x = base * (rank + 1)
        dist.all_reduce(x)
        # each rank contributed (rank + 1) * base: exact in float32
        want = base * (world * (world + 1) // 2)
        bad = int((x != want).sum().item())
        bad_t = torch.tensor([bad], device=dev, dtype=torch.int64)
        dist.all_reduce(bad_t)
        iters = max(5, min(50, (2 << 30) // nbytes))
        y = torch.ones(n, device=dev)
        for _ in range(3):
            dist.all_reduce(y)
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(y)
        torch.cuda.synchronize()
        dt = torch.tensor([(time.perf_counter() - t0) / iters], device=dev,
                          dtype=torch.float64)
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)
        algbw = nbytes / dt.item() / 1e9
        rows.append({
            "bytes": nbytes,
            "iters": iters,
            "time_us": dt.item() * 1e6,
            "algbw_gbs": algbw,
            "busbw_gbs": algbw * 2 * (world - 1) / world,
            "bad_elements": int(bad_t.item()),
        })
    if rank == 0:
        with open(out, "w") as f:
            json.dump({
                "world": world,
                "torch": torch.__version__,
                "nccl": ".".join(str(v) for v in torch.cuda.nccl.version()),
                "gpu": torch.cuda.get_device_name(dev),
                "rows": rows,
            }, f, indent=1)
    dist.destroy_process_group()


def cell_missing(cfg_runs):
    """A size a configuration has no figure for: "failed" when one of its
    runs failed, "-" when none was asked to run it (a smaller size list)."""
    return "failed" if any(not r["ok"] for r in cfg_runs) or not cfg_runs else "-"


def fmt_size(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def report(out, ctx_file, run_files):
    with open(ctx_file) as f:
        ctx = json.load(f)
    runs = []
    for path in run_files:
        with open(path) as f:
            runs.append(json.load(f))
    by_cfg = {}
    for r in runs:
        by_cfg.setdefault(r["config"], []).append(r)
    sizes = sorted({row["bytes"] for r in runs if r.get("rows") for row in r["rows"]})
    first = next((r for r in runs if r.get("rows")), {})
    lines = [
        "# NCCL all-reduce: libnccl-net-devmemtcp against NCCL's socket transport",
        "",
        f"- date: {ctx['date']}; host: {ctx['host']}",
        f"- GPUs: {first.get('world', '?')} x {first.get('gpu', '?')}; "
        f"PyTorch {first.get('torch', '?')}, NCCL {first.get('nccl', '?')}",
        "- torch.distributed all_reduce (SUM, float32), 2 ranks on one host, "
        "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 so every byte crosses the "
        "network transport; interface lo for both transports",
        "- bus bandwidth = algbw x 2(n-1)/n (= algbw for 2 ranks); best of "
        f"{ctx['rounds']} alternating runs per configuration, "
        "time per all_reduce is the slowest rank's mean",
        "- every run checks the reduced tensor element by element first",
        "",
    ]
    for cfg, desc in ctx["configs"].items():
        lines.append(f"- **{cfg}**: {desc}")
    lines += ["", "Bus bandwidth, GB/s:", ""]
    cfgs = list(ctx["configs"])
    lines.append("| size | " + " | ".join(cfgs) + " | plugin / socket |")
    lines.append("|---|" + "---|" * len(cfgs) + "---|")
    for size in sizes:
        best = {}
        for cfg in cfgs:
            vals = [row["busbw_gbs"] for r in by_cfg.get(cfg, []) if r.get("rows")
                    for row in r["rows"] if row["bytes"] == size]
            best[cfg] = max(vals) if vals else None
        cells = [f"{best[c]:.2f}" if best[c] is not None else cell_missing(by_cfg.get(c, []))
                 for c in cfgs]
        ratio = ""
        if best.get("plugin") and best.get("socket"):
            ratio = f"{best['plugin'] / best['socket']:.2f}"
        lines.append(f"| {fmt_size(size)} | " + " | ".join(cells) + f" | {ratio} |")
    lines += ["", "Runs:", ""]
    for r in runs:
        status = "ok" if r["ok"] else "FAILED"
        bad = sum(row["bad_elements"] for row in r.get("rows", []))
        per = ", ".join(f"{fmt_size(row['bytes'])} {row['busbw_gbs']:.2f}"
                        for row in r.get("rows", []))
        lines.append(f"- {r['config']} round {r['round']}: {status}, "
                     f"{bad} wrong elements; busbw GB/s: {per or '-'}")
        for why in r.get("why", []):
            lines.append(f"  - {why}")
    lines += ["", "NCCL's log (NCCL_DEBUG=INFO), first run of each configuration:", ""]
    for cfg in cfgs:
        r = next((r for r in by_cfg.get(cfg, [])), None)
        if not r:
            continue
        lines.append(f"{cfg}:")
        lines.append("```")
        lines += r.get("evidence", []) or ["(no matching lines)"]
        lines.append("```")
    lines += ["", "Not exercised here: the devmem paths (no devmem-capable NIC on this "
              "machine; NCCL_DEVMEMTCP_ENABLE is not set, so the plugin leaves the NIC "
              "alone). Devmem RX and TX run end to end in the vm suite over the "
              "simulated NIC with host memory; the GPU gather of received fragments "
              "under NCCL needs a devmem NIC.", ""]
    with open(out, "w") as f:
        f.write("\n".join(lines))


def annotate(path, cfg, rnd, status, evidence_file, why):
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, ValueError):
        r = {}
    with open(evidence_file) as f:
        evidence = [line.rstrip("\n") for line in f]
    bad = sum(row["bad_elements"] for row in r.get("rows", []))
    if not r.get("rows"):
        why = why + ["the run produced no results (see its output)"]
    if bad:
        why = why + [f"{bad} elements of the reduced tensors were wrong"]
    r.update(config=cfg, round=int(rnd), evidence=evidence, why=why,
             ok=status == "ok" and not why)
    with open(path, "w") as f:
        json.dump(r, f, indent=1)
    return 0 if r["ok"] else 1


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "run":
        run(sys.argv[2], [int(s) for s in sys.argv[3].split(",")])
    elif len(sys.argv) >= 7 and sys.argv[1] == "annotate":
        sys.exit(annotate(*sys.argv[2:7], sys.argv[7:]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
