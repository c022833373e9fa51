#!/usr/bin/env bash
# gpucap node bootstrap: run by cloud-init on every boot of a GPU node (from its per-boot
# scripts directory, the first boot included). Reads what the daemon rendered for this node
# from /etc/gpucap (node.env: who it is and what it serves; engine.args: the engine's
# arguments, one per line; engine.env: the container's environment; weights.sources: where
# its weights may come from, one URI a line, the nearest first), then: check the GPU driver,
# start the container runtime, pull the engine's image, fetch the model's weights with the
# node's own cloud identity, start the engine and wait until it serves. Each phase is
# reported to the daemon when a report URL is set; without one the daemon polls the
# engine's health instead. No secret is read from here except the node's single-use token.
#
# A boot after the first (a stopped node started again, a reboot) runs all of it again:
# the engine container of the previous boot is removed before anything else (docker's
# restart policy would start it on weights a stop wiped); weights still on disk as they
# were when fetched and verified (a reboot, a persistent disk) are kept, weights a stop
# wiped from instance-store NVMe are fetched again.
#
# Weights come from the first source that serves them whole: a missing object, a refused
# read or a checksum mismatch (bootstrap/fetch.py verifies every file) moves on to the
# next; the source used is the detail of the weights_fetched report.
#
# With BAKE=1 in node.env the node is an image builder: after the image pull it reports
# "baked" (with the pulled image's digest) and stops, having removed this boot's own files
# (its token, node.env, this script) so the image the daemon makes of its disk carries none
# of them and a node booted from it runs only its own bootstrap; that node finds the driver
# checked and the image's layers there, so its own pull is a no-op.
#
# The environment may set GPUCAP_ROOT (a prefix of the node's own paths), HEALTH_HOST (where
# the engine answers) and READY_POLL_S: on a cloud's node none is set; a local node of the
# simulated cloud (providers/sim/local.py) runs this same script under its own folder and
# loopback address.
set -euo pipefail

ROOT=${GPUCAP_ROOT:-}
CONF=${GPUCAP_CONF:-$ROOT/etc/gpucap}
# shellcheck source=/dev/null
. "$CONF/node.env"
: "${NODE_ID:?}" "${IMAGE:?}" "${PORT:?}" "${HEALTH_PATH:?}" "${GPUS:?}"
WEIGHTS_DIR=${WEIGHTS_DIR:-/mnt/gpucap/weights}  # as the engine sees them
WEIGHTS_HOST=$ROOT$WEIGHTS_DIR  # where they are on this machine
READY_TIMEOUT_S=${READY_TIMEOUT_S:-1800}
READY_POLL_S=${READY_POLL_S:-5}
HEALTH_HOST=${HEALTH_HOST:-127.0.0.1}

log() { printf '%s gpucap-bootstrap %s\n' "$(date -u +%FT%TZ)" "$*" >&2; }

report() {  # report PHASE [DETAIL]: best effort, never fails the boot
  local phase=$1 detail
  # (JSON-safe: no quotes, backslashes or control characters)
  detail=$(printf '%s' "${2:-}" | tr -d "\"\\\\" | tr '\n\t' '  ' | cut -c1-500)
  log "phase $phase $detail"
  [ -n "${REPORT_URL:-}" ] || return 0
  local token=""
  [ -r "$CONF/node.token" ] && token=$(cat "$CONF/node.token")
  curl --silent --show-error --fail --max-time 10 --retry 5 --retry-connrefused \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    --data "{\"node_id\":\"$NODE_ID\",\"phase\":\"$phase\",\"at\":$(date +%s),\"detail\":\"$detail\"}" \
    "$REPORT_URL" >/dev/null || log "report of $phase failed (the daemon polls health)"
}

fail() { report failed "$1"; log "FAILED: $1"; exit 1; }

check_driver() {
  command -v nvidia-smi >/dev/null || fail "no nvidia-smi: the image has no GPU driver"
  local seen
  seen=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
  [ "$seen" -ge "$GPUS" ] || fail "nvidia-smi sees $seen GPUs, the shape has $GPUS"
}

start_runtime() {
  command -v docker >/dev/null || fail "no docker on the image"
  systemctl start docker 2>/dev/null || true
  docker info >/dev/null 2>&1 || fail "the docker daemon does not answer"
}

MARK=.gpucap-weights  # in the weights' folder: their source, then each file's size and name

listing() {  # each file under the weights' folder (but the mark): size and name
  (cd "$WEIGHTS_HOST" && find . -type f ! -name "$MARK" -printf '%s %P\n' | LC_ALL=C sort)
}

fetch_from() {  # fetch_from URI: by the URI's scheme, with the node's own identity
  local uri=$1 fetch=$ROOT/opt/gpucap/fetch.py  # parallel ranged reads, verified, resumable
  case $uri in
    s3://*|gs://*) if [ -r "$fetch" ] && command -v python3 >/dev/null; then
        python3 "$fetch" "$uri" "$WEIGHTS_HOST"
      elif [ "${uri%%://*}" = s3 ]; then  # the instance profile
        aws s3 cp --recursive --only-show-errors "$uri" "$WEIGHTS_HOST"
      else  # the instance's service account
        gcloud storage cp --recursive "${uri%/}/*" "$WEIGHTS_HOST"
      fi ;;
    oci://*)  # the instance principal: oci://bucket@namespace/prefix, 32 objects at once
      local rest=${uri#oci://}
      local bucket=${rest%%@*} after=${rest#*@}
      local namespace=${after%%/*} prefix=${after#*/}
      oci os object bulk-download --auth instance_principal -bn "$bucket" -ns "$namespace" \
        --prefix "$prefix" --download-dir "$WEIGHTS_HOST" --overwrite \
        --parallel-operations-count 32 ;;
    file://*)  # a mounted file system (NFS, a local node's folder)
      cp -r "${uri#file://}/." "$WEIGHTS_HOST" ;;
    *) log "cannot fetch weights from $uri"; return 1 ;;
  esac
}

fetch_weights() {  # sets SOURCE: where the weights on disk came from
  local sources=() uri files
  SOURCE=""
  [ -r "$CONF/weights.sources" ] && mapfile -t sources < "$CONF/weights.sources"
  if [ "${#sources[@]}" -eq 0 ]; then
    log "no weights URI: the engine fetches its model itself"
    return 0
  fi
  mkdir -p "$WEIGHTS_HOST"
  # (Marked only once whole and verified, on the same disk: a stop that wipes them wipes it.)
  if [ -r "$WEIGHTS_HOST/$MARK" ] && [ "$(tail -n +2 "$WEIGHTS_HOST/$MARK")" = "$(listing)" ]; then
    SOURCE="on disk already, from $(head -n 1 "$WEIGHTS_HOST/$MARK")"
    return 0
  fi
  rm -f "$WEIGHTS_HOST/$MARK"
  for uri in "${sources[@]}"; do
    if fetch_from "$uri"; then
      files=$(listing)
      printf '%s\n%s\n' "$uri" "$files" > "$WEIGHTS_HOST/$MARK"
      SOURCE=$uri
      return 0
    fi
    log "weights not fetched from $uri; trying the next source"
  done
  fail "no source served the weights (tried ${sources[*]})"
}

start_engine() {
  local args=() leader=${LEADER:-}
  mapfile -t args < "$CONF/engine.args"
  if [ "$leader" = self ]; then  # a gang's rank 0 leads from its own private address
    leader=$(hostname -I | awk '{print $1}')
  fi
  args=("${args[@]//@GPUCAP_LEADER@/$leader}")
  docker run -d --name gpucap-engine --restart unless-stopped --gpus all \
    --network host --ipc host --env-file "$CONF/engine.env" \
    -v "$WEIGHTS_HOST:$WEIGHTS_DIR:ro" "$IMAGE" "${args[@]}" >/dev/null \
    || fail "docker run $IMAGE"
}

wait_ready() {
  local deadline=$(( $(date +%s) + READY_TIMEOUT_S ))
  until curl --silent --fail --max-time 5 "http://$HEALTH_HOST:$PORT$HEALTH_PATH" >/dev/null; do
    [ "$(docker inspect -f '{{.State.Running}}' gpucap-engine 2>/dev/null)" = true ] \
      || fail "the engine exited: $(docker logs --tail 5 gpucap-engine 2>&1 | tr '\n' ' ')"
    [ "$(date +%s)" -lt "$deadline" ] || fail "not serving after ${READY_TIMEOUT_S}s"
    sleep "$READY_POLL_S"
  done
}

report booted
check_driver
report driver_ok
start_runtime
docker rm -f gpucap-engine >/dev/null 2>&1 || true  # a previous boot's, if any
docker pull --quiet "$IMAGE" >/dev/null || fail "docker pull $IMAGE"
report image_pulled
if [ "${BAKE:-}" = 1 ]; then
  digest=$(docker image inspect --format '{{index .RepoDigests 0}}' "$IMAGE" 2>/dev/null || true)
  report baked "${digest:-$IMAGE}"
  rm -f "$CONF/node.token" "$CONF/node.env" "$CONF/engine.args" "$CONF/engine.env" "$0"
  exit 0
fi
fetch_weights
report weights_fetched "$SOURCE"
start_engine
report engine_started
wait_ready
report ready
