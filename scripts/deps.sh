#!/bin/sh
# Install the Debian packages weft needs that are missing. As root it installs
# them with apt-get; otherwise it names them and fails, so nothing is hidden.
# Usage: scripts/deps.sh [package ...]   (default: the build + test set)
set -eu
pkgs=${*:-"cmake ninja-build g++ make libgtest-dev python3 pkg-config"}
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "weft: missing Debian packages:$missing" >&2
  echo "weft: install them as root: apt-get install -y$missing" >&2
  exit 1
fi
echo "weft: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# Servers the benchmarks start themselves (nginx-light, apache2) would be
# started as system daemons by their postinst, holding port 80 and running
# on: a policy-rc.d that refuses (exit 101) keeps them stopped. Only when
# there is none, and removed after; an existing one (containers have one)
# is left as it is.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y --no-install-recommends $missing >/dev/null 2>&1 || {
  apt-get update >/dev/null && apt-get install -y --no-install-recommends $missing; }
