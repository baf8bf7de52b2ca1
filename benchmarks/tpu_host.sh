# Sourced by the TPU host's scripts (tpu_session.sh, tpu_train.sh): line-buffered output, and the
# wheels that host's own index lacks (.whl-tpu/, made by tpu_export.sh) installed under /tmp and
# put after its own JAX on PYTHONPATH.
export PYTHONUNBUFFERED=1
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl-tpu/*.whl
export PYTHONPATH=${PYTHONPATH:-}:/tmp/site
