# Shared by demo.sh and test.sh: install what is missing, configure and build. Sourced.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${SWARMRT_BUILD_DIR:-$ROOT/build}
BUILD_TYPE=${SWARMRT_BUILD_TYPE:-Release}

# Debian bookworm packages the build, the tests and the data fetch need.
SWARMRT_PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache git clang-format clang libclang-rt-14-dev
  libcaf-dev libcapnp-dev capnproto libspdlog-dev libtorch-dev libopenblas0-pthread
  libgtest-dev libgmock-dev libbenchmark-dev libtomlplusplus-dev libcli11-dev
  nlohmann-json3-dev libreadline-dev zlib1g-dev libssl-dev libgloo-dev gnuplot-nox libcpp-httplib-dev
  iproute2 procps openssh-client openssh-server time chromium libsentencepiece-dev
)

# The packages named that are not installed, one a line.
missing_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"
  done
}

install_deps() {
  local missing
  mapfile -t missing < <(missing_packages "${SWARMRT_PACKAGES[@]}" "$@")
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "missing packages: ${missing[*]}; run as root (or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Packages of daemons that the tests start themselves, by pid, with configurations of their
# own: their postinst must not start them as services (they have no configuration yet, and a
# failed start would fail the install), so starts are denied while they install.
install_daemons() {
  local missing
  mapfile -t missing < <(missing_packages "$@")
  [ ${#missing[@]} -eq 0 ] && return 0
  local policy=/usr/sbin/policy-rc.d made=0 status=0
  if [ "$(id -u)" = 0 ] && [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# swarmrt scripts/common.sh: no service starts while test daemons install\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    made=1
  fi
  install_deps "${missing[@]}" || status=$?
  [ $made = 1 ] && rm -f "$policy"
  return $status
}

# What tests beyond the C++ build need: a one-host Slurm (slurmctld, slurmd, munge) for
# `launch --from-env` under sbatch, etcd for coordinator replicas (each test starts its own), and the Kubernetes API types (npm, pinned by
# tests/deploy/package-lock.json) that check deploy/k8s.
SWARMRT_TEST_PACKAGES=(slurmctld slurmd slurm-client munge etcd-server etcd-client)

install_test_tools() {
  install_daemons "${SWARMRT_TEST_PACKAGES[@]}"
  # Debian's npm, unless a Node.js with its own npm is already there.
  command -v npm >/dev/null || install_deps npm
  local dir="$ROOT/tests/deploy"
  # Again only when the lock file changed since the last install.
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.installed-lock.json"; then
    echo "installing the manifest checker's npm packages (tests/deploy)"
    (cd "$dir" && npm ci --silent --no-audit --no-fund)
    cp "$dir/package-lock.json" "$dir/node_modules/.installed-lock.json"
  fi
}

# build [TARGET...]: configures once, then builds the targets named (every target without).
build() {
  # Precompiled headers are only cacheable by ccache with these sloppiness settings.
  export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
  # Paths inside the checkout are hashed relative to it, so another clone hits the same cache.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT}
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE"
  fi
  if [ $# -gt 0 ]; then
    cmake --build "$BUILD_DIR" -j "$(nproc)" --target "$@"
  else
    cmake --build "$BUILD_DIR" -j "$(nproc)"
  fi
}

# A benchmark's start: what it needs installed (extra packages as arguments) and built, and
# for one that trains (prepare_bench) the corpus in data/.
prepare_build() {
  install_deps "$@"
  build
}

prepare_bench() {
  prepare_build "$@"
  "$ROOT/scripts/fetch_data.sh"
}

# log_port LOG WHO: the port WHO ("coordinator") printed it listens on in LOG, waiting up to 30 s
# for the line (a backgrounded process's log may not exist yet at the first look); empty when
# it never came.
log_port() {
  local port=""
  for _ in $(seq 1 300); do
    port=$(sed -n "s/^$2 listening on 127.0.0.1:\([0-9]*\)\$/\1/p" "$1" 2>/dev/null)
    [ -n "$port" ] && break
    sleep 0.1
  done
  echo "$port"
}

# wait_pid PID S: waits until PID has ended, for at most S seconds, and prints how many it
# waited; its status is 1 when PID still runs.
wait_pid() {
  local waited=0
  while kill -0 "$1" 2>/dev/null && [ "$waited" -lt "$2" ]; do
    sleep 1
    waited=$((waited + 1))
  done
  echo "$waited"
  ! kill -0 "$1" 2>/dev/null
}
