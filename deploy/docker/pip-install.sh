#!/bin/sh
# `pip install` inside the image builds (deploy/docker/Dockerfile), bind-mounted for the
# pip steps only, so nothing of it stays in an image:
#   sh /run/pip-install.sh PIP ARGS...     (PIP: the pip binary to run)
# It uses what the build was given, when it was given it:
#   /run/secrets/pip_ca     a CA bundle (build secret pip_ca): pip verifies TLS with it
#   /run/secrets/pip_conf   a pip.conf (build secret pip_conf): index settings
#   $PIP_CACHE_MOUNT        a pip cache directory mounted into the build (build argument;
#                           build-images.sh mounts this machine's with podman); else no cache
set -eu
pip=$1
shift
if [ -s /run/secrets/pip_ca ]; then export PIP_CERT=/run/secrets/pip_ca; fi
if [ -s /run/secrets/pip_conf ]; then export PIP_CONFIG_FILE=/run/secrets/pip_conf; fi
if [ -n "${PIP_CACHE_MOUNT:-}" ] && [ -d "$PIP_CACHE_MOUNT" ]; then
  cache="--cache-dir=$PIP_CACHE_MOUNT"
else
  cache="--no-cache-dir"
fi
exec "$pip" install --disable-pip-version-check "$cache" "$@"
