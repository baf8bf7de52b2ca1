# trainspeed: `make demo` runs a CPU sweep (installing into .venv first), `make test` runs the suite,
# `make report` writes docs/results/report.html from the committed result rows.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP_CACHE ?= $(HOME)/.cache/pip
export PJRT_DEVICE ?= CPU

.PHONY: venv demo test test-unit coverage report clean

# Every committed result file and run directory (docs/results/README.md lists the commands that wrote them).
RESULTS := docs/results
REPORT_INPUTS := $(RESULTS)/agents_bench.jsonl $(RESULTS)/agents_bench_h200host.jsonl \
	$(RESULTS)/batch_size_study.jsonl $(RESULTS)/batch_size_study_throughput.jsonl $(RESULTS)/bench_cpu_feed_mahjong_tiny.jsonl \
	$(RESULTS)/charlm_cpu_bench.jsonl $(RESULTS)/charlm_cpu \
	$(RESULTS)/data_in_place.jsonl $(RESULTS)/data_in_place_real \
	$(RESULTS)/bench_cpu_mahjong_tiny.jsonl $(RESULTS)/bench_h200_mahjong_base.jsonl \
	$(RESULTS)/harness_overhead.json $(RESULTS)/loader_bench.jsonl $(RESULTS)/loader_bench_checks.jsonl \
	$(RESULTS)/loader_bench_h200_cuda.jsonl $(RESULTS)/loader_bench_h200_ranks.jsonl \
	$(RESULTS)/mahjong_agreement.jsonl $(RESULTS)/mahjong_eval.jsonl $(RESULTS)/mahjong_eval_curve.jsonl \
	$(RESULTS)/mahjong_final $(RESULTS)/mahjong_null.jsonl $(RESULTS)/noise_scale_adaptdl.jsonl \
	$(RESULTS)/named_models_bench.jsonl $(RESULTS)/named_models_port_check $(RESULTS)/named_gpt2_2rank $(RESULTS)/named_remote_timm_resnet18.jsonl \
	$(RESULTS)/timm_side_by_side.jsonl $(RESULTS)/named_gpt2_spmd $(RESULTS)/named_time_to_target_gpt2.jsonl \
	$(RESULTS)/named_plan_bench_gpt2.jsonl $(RESULTS)/named_plan_gpt2.jsonl \
	$(RESULTS)/plan_bench_mahjong.jsonl $(RESULTS)/plan_bench_charlm.jsonl $(RESULTS)/plan_mahjong.jsonl \
	$(RESULTS)/plan_charlm.jsonl $(RESULTS)/plan_h200_mahjong_base.jsonl $(RESULTS)/plan_h200_mahjong_base_auto.jsonl \
	$(RESULTS)/plan_checks_mahjong.jsonl $(RESULTS)/plan_checks_charlm.jsonl $(RESULTS)/plan_checks_gpt2.jsonl \
	$(RESULTS)/plan_checks_mahjong $(RESULTS)/plan_checks_charlm $(RESULTS)/plan_checks_gpt2 $(RESULTS)/plan_checks_warm_cache.jsonl \
	$(RESULTS)/plan_check_seeds_charlm.jsonl $(RESULTS)/plan_check_seeds_charlm \
	$(RESULTS)/plan_checks_plain_charlm.jsonl $(RESULTS)/plan_checks_plain_charlm $(RESULTS)/plan_checks_plain_gpt2.jsonl $(RESULTS)/plan_checks_plain_gpt2 \
	$(RESULTS)/plan_check_study_seeds_gpt2.jsonl $(RESULTS)/plan_check_study_seeds_gpt2 \
	$(RESULTS)/noise_scale_bench_cpu.jsonl $(RESULTS)/noise_scale_bench_cpu_b64.jsonl $(RESULTS)/noise_scale_check.jsonl $(RESULTS)/noise_scale_overhead.jsonl $(RESULTS)/reference_cpu_mahjong_tiny.jsonl \
	$(RESULTS)/remote_cpu_mahjong_tiny.jsonl $(RESULTS)/remote_pipelined_cpu_mahjong_tiny.jsonl \
	$(RESULTS)/stylegan3_cpu.jsonl $(RESULTS)/stylegan3_cpu_fir.jsonl $(RESULTS)/stylegan3_cpu_targets.jsonl \
	$(RESULTS)/stylegan3_h200.jsonl $(RESULTS)/stylegan3_h200_compile.jsonl \
	$(RESULTS)/stylegan3_saved_memory.jsonl $(RESULTS)/startup.jsonl $(RESULTS)/time_to_target_one_rank \
	$(RESULTS)/time_to_target_study_mahjong.jsonl $(RESULTS)/time_to_target_study_charlm.jsonl \
	$(RESULTS)/time_to_target_two_ranks $(RESULTS)/time_to_target_killed_resumed $(RESULTS)/train_cuda.jsonl $(RESULTS)/train_quality \
	$(RESULTS)/auto_vs_fixed_mahjong.jsonl $(RESULTS)/auto_vs_fixed_mahjong_2ranks.jsonl $(RESULTS)/auto_vs_fixed_charlm.jsonl \
	$(RESULTS)/auto_vs_plain_mahjong.jsonl $(RESULTS)/auto_vs_plain_mahjong_2ranks.jsonl $(RESULTS)/auto_vs_plain_charlm.jsonl $(RESULTS)/auto_vs_plain_gpt2.jsonl $(RESULTS)/auto_vs_plain_cnn.jsonl \
	$(RESULTS)/auto_vs_fixed_mahjong_calibrated.jsonl $(RESULTS)/auto_vs_fixed_gpt2.jsonl $(RESULTS)/auto_vs_fixed_mahjong_auto_run $(RESULTS)/critical_batch_mahjong.jsonl $(RESULTS)/critical_batch_mahjong_tolerance.jsonl $(RESULTS)/critical_batch_mahjong_base \
	$(RESULTS)/critical_batch_charlm.jsonl $(RESULTS)/critical_batch_charlm_base $(RESULTS)/critical_batch_charlm_plan.jsonl \
	$(RESULTS)/critical_batch_gpt2.jsonl $(RESULTS)/critical_batch_gpt2_base $(RESULTS)/critical_batch_gpt2_plan.jsonl \
	$(RESULTS)/critical_batch_cost.jsonl \
	$(RESULTS)/train_quality_tiny $(RESULTS)/train_scaling.jsonl $(RESULTS)/xla_cpu_threads.jsonl \
	$(RESULTS)/tpu_mahjong_base.jsonl $(RESULTS)/tpu_exported_mahjong_base.jsonl \
	$(RESULTS)/tpu_mahjong_tiny_bench.jsonl $(RESULTS)/tpu_train_mahjong_tiny_b64 $(RESULTS)/tpu_train_mahjong_tiny_b256 \
	$(RESULTS)/tpu_train_mahjong_tiny_whole $(RESULTS)/tpu_train_mahjong_tiny_killed_resumed $(RESULTS)/tpu_named_models.jsonl $(RESULTS)/tpu_stylegan3_t256.jsonl \
	$(RESULTS)/cpu_train_mahjong_tiny_eager_b64 $(RESULTS)/cpu_train_mahjong_tiny_eager_b256 $(RESULTS)/cpu_train_mahjong_tiny_exported_b64 \
	$(RESULTS)/cpu_train_mahjong_tiny_exported_b256 $(RESULTS)/tpu_vs_cpu_same_goal.jsonl \
	$(RESULTS)/tpu_mahjong_attention.jsonl $(RESULTS)/noise_scale_cost.jsonl $(RESULTS)/auto_vs_fixed_cnn.jsonl \
	$(RESULTS)/auto_vs_fixed_cnn_bench.jsonl $(RESULTS)/auto_vs_fixed_cnn_bound.jsonl \
	$(RESULTS)/tpu_plan_check_bench.jsonl $(RESULTS)/tpu_plan_check_b64 $(RESULTS)/tpu_plan_check_b128 \
	$(RESULTS)/tpu_plan_check_b256 $(RESULTS)/tpu_plan_check_b128_s1000 $(RESULTS)/tpu_plan_check_b256_s1000 \
	$(RESULTS)/tpu_plan_check_b128_s2000 $(RESULTS)/tpu_plan_check_b256_s2000 $(RESULTS)/tpu_plan_check.jsonl \
	$(RESULTS)/tpu_mahjong_fused_bf16.jsonl $(RESULTS)/tpu_mahjong_fused_fp32.jsonl \
	$(RESULTS)/tpu_qkv_attention_kernel_bf16.jsonl $(RESULTS)/tpu_qkv_attention_kernel_fp32.jsonl \
	$(RESULTS)/tpu_models.jsonl $(RESULTS)/model_coverage.jsonl $(RESULTS)/jax_recurrent_cpu.jsonl \
	$(RESULTS)/jax_scan_compile_cpu.jsonl $(RESULTS)/jax_scaling_cpu.jsonl $(RESULTS)/jax_scaling_cpu_bench.jsonl \
	$(RESULTS)/tpu_plan_set_tiny.jsonl $(RESULTS)/tpu_plan_set_tiny $(RESULTS)/tpu_plan_set_tiny_second.jsonl \
	$(RESULTS)/tpu_plan_set_tiny_second $(RESULTS)/tpu_mahjong_like_for_like.jsonl \
	$(RESULTS)/tpu_mesh_one_device.jsonl

$(BIN)/trainspeed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	PIP_CACHE_DIR=$(PIP_CACHE) $(BIN)/pip install --upgrade pip
	PIP_CACHE_DIR=$(PIP_CACHE) $(BIN)/pip install -r requirements.txt
	touch $@

venv: $(BIN)/trainspeed

demo: venv
	$(BIN)/trainspeed info
	$(BIN)/trainspeed bench --workload mahjong --size tiny \
		--targets cpu:eager:fp32,cpu:compile:fp32,xla:lazy:fp32 --baseline cpu:eager:fp32 \
		--batch-sizes 2^6..2^10 --threads 1 --windows 3 --min-window-s 0.3 --out results/demo.jsonl

# The suite runs on TEST_WORKERS processes (pytest-xdist), a test file at a time, each torch on one
# thread. Three on the 2-core machine CI runs on: most tests wait on child processes part of the time,
# and a third worker fills those waits (on a fresh clone, one run each: 10m43s of tests with three
# against 11m38s with two; runs on this shared machine vary by a minute or more). `make test-unit`
# runs only the tests that start no child process (`-m "not e2e"`); `make coverage` runs the suite
# under coverage.py, child processes too. The sources are compiled to bytecode first: where
# PYTHONDONTWRITEBYTECODE is set nothing else writes it, and each child process of the suite would
# compile what it imports again (all of trainspeed takes 0.55 CPU-s).
TEST_WORKERS ?= 3
PYTEST := TRAINSPEED_TEST_THREADS=1 $(BIN)/python -m pytest -q -p no:cacheprovider
BYTECODE := $(BIN)/python -m compileall -q -j 0 trainspeed tests examples benchmarks > /dev/null

test: venv
	$(BYTECODE)
	$(PYTEST) --durations=15 -n $(TEST_WORKERS) --dist loadfile tests

test-unit: venv
	$(BYTECODE)
	$(PYTEST) --durations=15 -n $(TEST_WORKERS) --dist loadfile -m "not e2e" tests

coverage: venv
	rm -f .coverage .coverage.*
	$(BIN)/python -m coverage run -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile tests
	$(BIN)/python -m coverage combine -q
	$(BIN)/python -m coverage report --skip-covered

report: venv
	$(BIN)/python -m trainspeed report $(REPORT_INPUTS) --baseline cuda:eager:fp32 --baseline cuda:eager:bf16 \
		--title "trainspeed: committed measurements" --out $(RESULTS)/report.html

clean:
	rm -rf results build *.egg-info
