#!/usr/bin/env bash
# The CUDA measurements in docs/results/h200_session.md as one prepared run on one GPU: the Mahjong
# base sweep, device- vs host-fed steps, the StyleGAN3 T-256 step, one-device training with real
# data (about 11 minutes on an H200), and the study's Node vs VM figure with `trainspeed serve` on
# the GPU over loopback (about 4 more minutes).
# Usage on the GPU host, from the repository root:  OUT=/some/dir bash benchmarks/gpu_session.sh
# Each stage has its own time caps (together 1010 s); every script appends rows as it measures, so a
# capped stage keeps what it measured. STAGES picks stages, so the session also fits commands of at
# most 10 minutes: STAGES="bench feed" (caps 520 s), then STAGES="stylegan3 train" (caps 210 s), then
# STAGES=remote (cap 280 s), with the same OUT (the log is appended to). The remote stage needs
# grpcio >= 1.85.1 and protobuf >= 7.35.1 (major 7); where the image has older ones, carry wheels of
# grpcio==1.85.3 and protobuf==7.36.2 in .whl (see the device notes on carrying wheels).
# Results land in $OUT and are committed under docs/results/.
set -u
OUT=${OUT:-results/gpu}
STAGES=${STAGES:-bench feed stylegan3 train remote}
stage() { case " $STAGES " in *" $1 "*) return 0 ;; esac; return 1; }
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then  # riichienv is not in the device image: carried as a wheel
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
echo "== stages: $STAGES" | tee -a "$OUT/gpu_session.log"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$OUT/gpu_session.log"
python3 -c "import torch; print('torch', torch.__version__)" | tee -a "$OUT/gpu_session.log"

if stage bench; then
  echo "== mahjong base on CUDA targets" | tee -a "$OUT/gpu_session.log"
  timeout 150 python3 -m trainspeed bench --workload mahjong --size base --no-progress --no-plot \
    --targets cuda:eager:fp32,cuda:eager:tf32,cuda:eager:bf16 --batch-sizes 2^6..2^14 \
    --windows 3 --min-window-s 0.2 --out "$OUT/bench_h200_mahjong_base.jsonl" 2>&1 | tail -n 25 | tee -a "$OUT/gpu_session.log"
  timeout 170 python3 -m trainspeed bench --workload mahjong --size base --no-progress --no-plot \
    --targets cuda:compile:bf16,cuda:cudagraphs:bf16 --batch-sizes 256,4096,16384 \
    --windows 3 --min-window-s 0.2 --out "$OUT/bench_h200_mahjong_base.jsonl" 2>&1 | tail -n 25 | tee -a "$OUT/gpu_session.log"
  python3 -m trainspeed plot "$OUT/bench_h200_mahjong_base.jsonl" --baseline cuda:eager:fp32 2>&1 | tee -a "$OUT/gpu_session.log"
fi

if stage feed; then
  # The same configurations with the batch kept on the device, then copied from pinned host memory
  # inside every timed step, back to back per configuration (--feed device,host).
  echo "== mahjong base: device-fed vs host-fed steps" | tee -a "$OUT/gpu_session.log"
  timeout 200 python3 -m trainspeed bench --workload mahjong --size base --no-progress --no-plot \
    --targets cuda:eager:bf16,cuda:compile:bf16 --batch-sizes 256,4096,16384 --feed device,host \
    --windows 3 --min-window-s 0.2 --out "$OUT/bench_h200_feed_mahjong_base.jsonl" 2>&1 | tail -n 8 | tee -a "$OUT/gpu_session.log"
  python3 -m trainspeed plot "$OUT/bench_h200_feed_mahjong_base.jsonl" --baseline cuda:eager:bf16 2>&1 | tee -a "$OUT/gpu_session.log"
fi

if stage stylegan3; then
  echo "== StyleGAN3 T-256 training step on CUDA" | tee -a "$OUT/gpu_session.log"
  timeout 110 python3 benchmarks/bench_stylegan3.py --target cuda:eager:bf16 --cases t256:4,t256:8,t256:32 \
    --variants activation --windows 3 --out "$OUT/stylegan3_h200.jsonl" 2>&1 | tail -n 15 | tee -a "$OUT/gpu_session.log"
fi

if stage train; then
  echo "== one-device CUDA training: real data vs synthetic vs bench" | tee -a "$OUT/gpu_session.log"
  timeout 100 python3 -m trainspeed study scaling --preset full --target cuda:eager:bf16 --size base --ranks 1 \
    --batch-sizes 512,8192 --steps 30 --repeats 1 --threads 4 --num-workers 4 \
    --timing-warmup-steps 10 --no-progress --out "$OUT/train_cuda" 2>&1 | tail -n 15 \
    | tee -a "$OUT/gpu_session.log"
fi

if stage remote; then
  # The study's TPU Node vs TPU VM figure on the GPU: the same CUDA target in the bench's process and
  # behind `trainspeed serve` on 127.0.0.1, host-fed (synchronous and 2 steps in flight) and
  # device-fed, per batch size back to back.
  echo "== mahjong base: local vs remote over loopback (trainspeed serve on the GPU)" | tee -a "$OUT/gpu_session.log"
  if python3 -c "import trainspeed.wire.remote_pb2_grpc" 2>>"$OUT/gpu_session.log"; then
    timeout 280 python3 -m trainspeed study remote --preset full --target cuda:eager:bf16 --size base --links loopback \
      --batch-sizes 64,512,2048,8192 --threads 4 --windows 3 --min-window-s 0.2 --no-progress \
      --out "$OUT/remote_h200" 2>&1 | tail -n 30 | tee -a "$OUT/gpu_session.log"
    python3 -m trainspeed report "$OUT/remote_h200" --out "$OUT/remote_h200/report.html" 2>&1 | tee -a "$OUT/gpu_session.log"
  else
    echo "skipped: grpcio/protobuf here cannot import the generated modules (carry grpcio==1.85.3, protobuf==7.36.2)" | tee -a "$OUT/gpu_session.log"
  fi
fi
ls -la "$OUT"
# the speed variants of docs/results/gpu_speed.md, about 8 more minutes (opt in: GPU_SPEED=1)
if [ "${GPU_SPEED:-0}" = 1 ]; then OUT="$OUT/speed" bash benchmarks/gpu_speed.sh; fi
