#!/usr/bin/env bash
# Builds Magnetar's container images with docker (when its daemon answers) or podman.
#
#   deploy/docker/build-images.sh images       magnetar:$IMAGE_TAG and magnetar-spark:$IMAGE_TAG
#                                              (deploy/docker/Dockerfile, targets service and spark)
#   deploy/docker/build-images.sh service      (or spark): one of the two
#   deploy/docker/build-images.sh zookeeper    $ZOOKEEPER_IMAGE from deploy/docker/zookeeper/ (Debian's
#                                              ZooKeeper, the official image's settings: offline use)
#   deploy/docker/build-images.sh base         $BASE_IMAGE: Debian bookworm + Python 3.11 from Debian
#                                              packages (debootstrap), for machines without a registry
#   deploy/docker/build-images.sh engine       print the engine that would be used
#
# Settings (environment): IMAGE_TAG (dev), IMAGE (magnetar), SPARK_IMAGE (magnetar-spark),
# BASE (the images' base, python:3.11.11-slim-bookworm), ZOOKEEPER_IMAGE
# (localhost/magnetar-zookeeper:$IMAGE_TAG), ZOOKEEPER_BASE (debian:bookworm-slim),
# BASE_IMAGE (localhost/magnetar-base:bookworm), DEBIAN_MIRROR (this machine's apt mirror),
# CONTAINER_ENGINE (docker or podman: skip the detection), BUILD_OPTS (more flags for every
# build, e.g. --no-cache), PIP_HOST_CACHE (podman: the pip cache to mount, default this
# machine's `pip cache dir`; none: no cache).
#
# pip inside the builds gets this machine's CA bundle and index settings as build secrets
# (pip_ca, pip_conf): a mirror or a TLS-intercepting proxy works, and no layer keeps them.
# With podman, CONTAINERS_CONF defaults to deploy/podman/containers.conf (runc, netavark).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

IMAGE_TAG=${IMAGE_TAG:-dev}
IMAGE=${IMAGE:-magnetar}
SPARK_IMAGE=${SPARK_IMAGE:-magnetar-spark}
BASE=${BASE:-python:3.11.11-slim-bookworm}
ZOOKEEPER_IMAGE=${ZOOKEEPER_IMAGE:-localhost/magnetar-zookeeper:$IMAGE_TAG}
ZOOKEEPER_BASE=${ZOOKEEPER_BASE:-debian:bookworm-slim}
BASE_IMAGE=${BASE_IMAGE:-localhost/magnetar-base:bookworm}

die() { echo "build-images: $*" >&2; exit 1; }

# docker when its daemon answers, else podman; a one-line error when neither can build.
pick_engine() {
  if [ -n "${CONTAINER_ENGINE:-}" ]; then
    command -v "$CONTAINER_ENGINE" >/dev/null || die "CONTAINER_ENGINE=$CONTAINER_ENGINE is not installed"
    echo "$CONTAINER_ENGINE"; return
  fi
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then echo docker; return; fi
  if command -v podman >/dev/null; then echo podman; return; fi
  if command -v docker >/dev/null; then
    die "docker is installed but its daemon does not answer (docker info failed), and podman is not installed: start dockerd or run make setup (installs podman)"
  fi
  die "neither docker nor podman is installed: install one (make setup installs podman)"
}
ENGINE=$(pick_engine)
BUILD_FLAGS=()
if [ "$ENGINE" = podman ]; then
  export CONTAINERS_CONF=${CONTAINERS_CONF:-$ROOT/deploy/podman/containers.conf}
  # RUN steps (apt, pip) on the host's network: no dependence on podman's default bridge
  # network, its NAT and DNS (a stale CNI bridge on the same subnet breaks them).
  # --jobs 2: independent stages (the gRPC stubs, the service's packages) build side by side.
  # --format docker: the OCI image format has no HEALTHCHECK; podman would drop it.
  BUILD_FLAGS=(--network host --jobs 2 --format docker)
else
  export DOCKER_BUILDKIT=1  # build secrets and RUN --mount
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# This machine's pip settings as build secrets: the CA bundle pip verifies TLS with, and
# the index settings (only http(s) indexes; local paths mean nothing inside a build).
SECRETS=()
pip_secrets() {
  local py ca="" conf="$WORK/pip.conf" line key value
  py=$(command -v python3 || true)
  local config=""
  if [ -n "$py" ] && "$py" -m pip --version >/dev/null 2>&1; then
    config=$("$py" -m pip config list 2>/dev/null || true)
  fi
  for candidate in "${PIP_CERT:-}" \
      "$(sed -n "s/^[^=]*\.cert='\(.*\)'$/\1/p" <<<"$config" | head -n1)" \
      "${REQUESTS_CA_BUNDLE:-}" "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt; do
    if [ -n "$candidate" ] && [ -s "$candidate" ]; then ca=$candidate; break; fi
  done
  if [ -n "$ca" ]; then
    cp "$ca" "$WORK/pip-ca.pem"
    SECRETS+=(--secret "id=pip_ca,src=$WORK/pip-ca.pem")
  fi
  # `pip config list` shows the settings of pip's files and of the PIP_* variables (as
  # :env:); as in pip, a variable wins over a file, and a later file over an earlier one.
  declare -A settings=() from_env=()
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    key=${line%%=*}; key=${key##*.}
    [ "$key" = default-timeout ] && key=timeout
    if [ "${line#:env:}" = "$line" ] && [ -n "${from_env[$key]:-}" ]; then continue; fi
    [ "${line#:env:}" != "$line" ] && from_env[$key]=1
    value=${line#*=}; value=${value#\'}; value=${value%\'}
    case "$key" in
      index-url|extra-index-url)
        value=$(tr ' ' '\n' <<<"$value" | { grep -E '^https?://' || true; } | tr '\n' ' ' | sed 's/ $//')
        if [ -n "$value" ]; then settings[$key]=$value; fi ;;
      timeout|trusted-host|retries|proxy) settings[$key]=$value ;;
    esac
  done <<<"$config"
  echo "[global]" >"$conf"
  for key in "${!settings[@]}"; do echo "$key = ${settings[$key]}" >>"$conf"; done
  SECRETS+=(--secret "id=pip_conf,src=$conf")
}

build() {  # build NAME ARGS...: one image, timed
  local name=$1 start=$SECONDS; shift
  echo ">> building $name with $ENGINE"
  # shellcheck disable=SC2086  # BUILD_OPTS is a list of flags
  "$ENGINE" build "${BUILD_FLAGS[@]}" ${BUILD_OPTS:-} "$@" || die "building $name failed (see the output above)"
  echo ">> built $name in $((SECONDS - start)) s"
}

# podman: this machine's pip cache mounted into the builds (PIP_HOST_CACHE; "none": off),
# so a wheel pip built here once (pyspark is an sdist) is not built again in every image.
CACHE_ARGS=()
pip_cache() {
  [ "$ENGINE" = podman ] || return 0
  local dir=${PIP_HOST_CACHE:-}
  if [ -z "$dir" ] && command -v python3 >/dev/null; then
    dir=$(python3 -m pip cache dir 2>/dev/null || true)
  fi
  if [ -n "$dir" ] && [ "$dir" != none ] && [ -d "$dir" ] && [ -w "$dir" ]; then
    CACHE_ARGS=(--volume "$dir:/run/pip-cache" --build-arg PIP_CACHE_MOUNT=/run/pip-cache)
  fi
}

target() {  # target service|spark: one image of deploy/docker/Dockerfile
  if [ ${#SECRETS[@]} -eq 0 ]; then pip_secrets; pip_cache; fi
  local name=$IMAGE
  [ "$1" = spark ] && name=$SPARK_IMAGE
  if ! "$ENGINE" image inspect "$BASE" >/dev/null 2>&1; then
    echo ">> the base image $BASE is pulled first (no registry here? make base-image, then make images BASE=$BASE_IMAGE)"
  fi
  build "$name:$IMAGE_TAG" -f deploy/docker/Dockerfile --build-arg "BASE=$BASE" "${SECRETS[@]}" \
    "${CACHE_ARGS[@]}" --target "$1" -t "$name:$IMAGE_TAG" .
}

zookeeper() {
  build "$ZOOKEEPER_IMAGE" --build-arg "BASE=$ZOOKEEPER_BASE" -t "$ZOOKEEPER_IMAGE" deploy/docker/zookeeper
}

debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
  local uri
  uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs: *\(\S*\/debian\)\/\?$/\1/p' | head -n1)
  [ -n "$uri" ] || uri=$(sed -n 's/^deb \(\[[^]]*\] \)\?\(\S*\/debian\)\/\? .*/\2/p' /etc/apt/sources.list 2>/dev/null | head -n1)
  echo "${uri:-http://deb.debian.org/debian}"
}

base() {
  command -v debootstrap >/dev/null || die "debootstrap is not installed: apt-get install debootstrap (make setup does)"
  local sudo="" mirror start=$SECONDS
  [ "$(id -u)" = 0 ] || sudo=sudo
  mirror=$(debian_mirror)
  echo ">> building $BASE_IMAGE: debootstrap bookworm from $mirror (about a minute)"
  $sudo debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$WORK/root" "$mirror" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -n 20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (the log's end is above)"; }
  $sudo rm -rf "$WORK/root/var/lib/apt/lists/"* "$WORK/root/var/cache/apt/"*.bin "$WORK/root/var/cache/apt/archives/"*.deb
  $sudo tar -C "$WORK/root" -c . | "$ENGINE" import --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$BASE_IMAGE" \
    >"$WORK/import.log" 2>&1 || { tail -n 20 "$WORK/import.log" >&2; die "importing the Debian tree as $BASE_IMAGE failed"; }
  $sudo rm -rf "$WORK/root"
  echo ">> built $BASE_IMAGE in $((SECONDS - start)) s"
}

case "${1:-images}" in
  images) target service; target spark ;;   # spark is built on service's cached layers
  service|spark) target "$1" ;;
  zookeeper) zookeeper ;;
  base) base ;;
  engine) echo "$ENGINE" ;;
  *) die "unknown target ${1}: use images, service, spark, zookeeper, base or engine" ;;
esac
