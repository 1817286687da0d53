#!/usr/bin/env python3
"""Reads bench_compress --benchmark_format=json (file or stdin), prints each
benchmark's GB/s of input bytes next to memcpy of the same size from the same
run, and checks the floor sparq holds its compressors to, on 16M floats:
  threshold-mask-pack, 4-bit row-wise quantize and dequantize >= 25% of memcpy;
  DCT-DP step at L=1000 <= 1/5 of the step at L=1.
Rates use CPU time (the machine may be shared); real time is printed too.
Exits 1 if a threshold is missed."""
import json
import sys

M16 = 16777216


def main():
    data = json.load(open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin)
    runs = [b for b in data["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
    by_name = {b["name"]: b for b in runs}
    memcpy = {int(b["name"].split("/")[1]): b["bytes_per_second"] for b in runs if b["name"].startswith("BM_Memcpy/")}
    print(f"{'benchmark':50} {'cpu ms':>9} {'real ms':>9} {'GB/s':>7} {'x memcpy':>8}")
    for b in runs:
        parts = b["name"].split("/")
        size = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
        gbs = b.get("bytes_per_second", 0) / 1e9
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
        ratio = f"{b['bytes_per_second'] / memcpy[size]:.2f}" if size in memcpy and "bytes_per_second" in b else "-"
        print(f"{b['name']:50} {b['cpu_time'] * scale:9.3f} {b['real_time'] * scale:9.3f} {gbs:7.2f} {ratio:>8}")

    ok = True
    print()
    for name in (f"BM_ThresholdMaskPack/{M16}", f"BM_RowwiseQuantize/{M16}/4", f"BM_RowwiseDequantize/{M16}/4"):
        r = by_name[name]["bytes_per_second"] / memcpy[M16]
        ok &= r >= 0.25
        print(f"{name:50} {r:.2f} of memcpy (need >= 0.25): {'ok' if r >= 0.25 else 'MISSED'}")
    l1 = by_name[f"BM_DctDpStep/{M16}/1/0"]["cpu_time"]
    l1000 = by_name[f"BM_DctDpStep/{M16}/1000/0/iterations:1000"]["cpu_time"]
    ok &= l1000 <= l1 / 5
    print(f"{'DCT-DP step L=1000 / L=1 at 16M':50} {l1000 / l1:.3f} (need <= 0.2): {'ok' if l1000 <= l1 / 5 else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
