#!/usr/bin/env python3
"""Variants of Alibaba's openb pod list, for `berth sim packing`.

FGD's artifact ships variants of the default trace (more GPU sharing,
more multi-GPU tasks, tasks pinned to GPU models, other CPU demand);
they are not beside this repository, so this script draws variants in
their spirit from the default list, reproducibly (fixed seed):

  gpushareX  X% of GPU tasks (by count) ask for a fraction of a GPU
  multigpuX  X% of GPU demand comes from multi-GPU tasks
  gpuspecX   X% of GPU tasks are pinned to a GPU model (or two), drawn
             in proportion to the fleet's GPUs of each
  cpuX       every task's CPU request scaled to X%

Usage: scripts/openb-variants.py POD_LIST OUT_DIR
then:  berth sim packing --pods OUT_DIR/gpuspec33.csv --nodes ... --policy fgd,berth
"""
import csv
import os
import random
import sys


def main(src, out):
    rows = list(csv.DictReader(open(src)))
    fields = list(rows[0].keys())
    gpus = lambda r: int(r["num_gpu"])
    milli = lambda r: int(r["gpu_milli"])
    demand = lambda r: gpus(r) * milli(r)
    cpu = [r for r in rows if gpus(r) == 0]
    share = [r for r in rows if gpus(r) == 1 and milli(r) < 1000]
    one = [r for r in rows if gpus(r) == 1 and milli(r) == 1000]
    multi = [r for r in rows if gpus(r) > 1]
    gpu = [r for r in rows if gpus(r) > 0]
    os.makedirs(out, exist_ok=True)

    def write(name, pods):
        with open(os.path.join(out, name + ".csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fields)
            w.writeheader()
            for i, r in enumerate(pods):
                r = dict(r)
                r["name"] = "%s-%05d" % (name, i)
                w.writerow(r)

    rnd = random.Random(1)
    for x in (20, 40, 60, 80):
        k = len(gpu) * x // 100
        write("gpushare%d" % x, cpu + [rnd.choice(share) for _ in range(k)]
              + [rnd.choice(one + multi) for _ in range(len(gpu) - k)])
    total = sum(demand(r) for r in gpu)
    for x in (20, 30, 50):
        pods, m, s = list(cpu), 0, 0
        while m < total * x / 100:
            r = rnd.choice(multi)
            pods.append(r)
            m += demand(r)
        while s < total * (100 - x) / 100:
            r = rnd.choice(share + one)
            pods.append(r)
            s += demand(r)
        write("multigpu%d" % x, pods)
    models = ["G2", "T4", "G3", "P100", "V100M32", "V100M16", "G2|G3", "V100M16|V100M32"]
    weights = [4392, 842, 312, 265, 204, 195, 400, 200]
    for x in (10, 20, 33):
        pods = []
        for r in rows:
            r = dict(r)
            if gpus(r) > 0 and rnd.random() < x / 100:
                r["gpu_spec"] = rnd.choices(models, weights)[0]
            pods.append(r)
        write("gpuspec%d" % x, pods)
    for x in (50, 200):
        pods = []
        for r in rows:
            r = dict(r)
            r["cpu_milli"] = str(int(int(r["cpu_milli"]) * x / 100))
            pods.append(r)
        write("cpu%d" % x, pods)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
