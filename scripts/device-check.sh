#!/bin/bash
# berth device check, for a machine with an NVIDIA GPU and its driver:
# NVML discovery (berth agent gpus), MIG mode (read, never changed), and a
# real server and agent running two shares of GPU 0 side by side while a
# whole-GPU job waits. Build the binary beside this script first:
#   CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" go build -o scripts/berth ./cmd/berth
# Everything it prints also goes to $OUT/check.log (default /tmp/out).
B="$(cd "$(dirname "$0")" && pwd)/berth"
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee $OUT/check.log) 2>&1
echo "== nvidia-smi"; nvidia-smi -L
nvidia-smi --query-gpu=name,uuid,memory.total,mig.mode.current,compute_mode,driver_version --format=csv
echo "== mps: $(command -v nvidia-cuda-mps-control || echo none)"
echo "== berth agent gpus"; $B agent gpus; $B agent gpus -o json > $OUT/gpus.json; echo "rc=$?"
D=$(mktemp -d)
$B server --data-dir $D/srv --listen 127.0.0.1:7070 > $OUT/server.log 2>&1 &
SRV=$!
for i in $(seq 50); do [ -s $D/srv/admin.token ] && break; sleep 0.2; done
export BERTH_ADDR=127.0.0.1:7070 BERTH_TOKEN=$(cat $D/srv/admin.token)
T=$($B token create --role agent:h200 -o json | sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p;s/.*"token": *"\([^"]*\)".*/\1/p' | head -1)
$B agent --node-id h200 --token "$T" --state-dir $D/agent --pool sharing --heartbeat-interval 1s > $OUT/agent.log 2>&1 &
AG=$!
sleep 4
echo "== nodes"; $B nodes ls; $B topology
JOB='env | grep -E "^(CUDA|NVIDIA|BERTH_GPU|BERTH_MIG)" | sort; nvidia-smi -L; python3 -c "import torch; x=torch.ones(1024,1024,device=\"cuda\"); print(\"cuda ok\", torch.cuda.get_device_name(0), float((x@x).sum()))" 2>&1 | tail -1; sleep 15'
$B job submit --name share-a --gpus 1 --gpu-milli 300 -- /bin/sh -c "$JOB"
$B job submit --name share-b --gpus 1 --gpu-milli 500 -- /bin/sh -c "$JOB"
$B job submit --name whole --gpus 1 -- /bin/sh -c "echo should wait"
sleep 8
echo "== jobs"; $B job ls; $B topology -o json > $OUT/topology.json; $B topology
for f in $(find $D/agent -name stdout.log); do echo "== $f"; cat $f; done
for f in $(find $D/agent -name stderr.log); do echo "== $f"; tail -5 $f; done
echo "== agent log (warnings)"; grep -iE "warn|error|nvml|xid" $OUT/agent.log | head -20
kill $AG; sleep 2; kill $SRV; wait $AG $SRV
echo done
