#!/bin/sh
# The tuner-agent installer, as the tuning service serves it at /install.sh:
#   curl -fsSL <service>/install.sh > /tmp/agent-installer.sh && sh /tmp/agent-installer.sh
# It downloads the tuner-agent binary for this machine into the current directory, checks its
# SHA-256 against the SHA256SUMS written when the binaries were built, and makes it executable.
# POSIX sh; needs curl or wget, and sha256sum or shasum. It needs no root and writes nothing
# outside the current directory. On a Mac with Apple silicon it takes the native (arm64) binary,
# else the Intel one under Rosetta 2.
set -eu

SERVICE_URL=__SERVICE_URL__
DOWNLOADS="$SERVICE_URL/downloads"
TARGET_FILE=./tuner-agent
PARTIAL="./.tuner-agent.download.$$"

fail() {
  printf 'tuner-agent installer: %s\n' "$*" >&2
  exit 1
}

system=$(uname -s)
machine=$(uname -m)
case "$system" in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) fail "this system ($system) has no tuner-agent binary; run the agent as a container instead (see the setup page at $SERVICE_URL)" ;;
esac
case "$machine" in
  x86_64 | amd64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) fail "this processor ($machine) has no tuner-agent binary; run the agent as a container instead (see the setup page at $SERVICE_URL)" ;;
esac
# A shell translated by Rosetta 2 on Apple silicon sees x86_64 from uname -m; the kernel knows better.
if [ "$os" = darwin ] && [ "$arch" = x64 ] && [ "$(sysctl -n sysctl.proc_translated 2>/dev/null)" = 1 ]; then
  arch=arm64
fi
name="tuner-agent-$os-$arch"

if command -v curl >/dev/null 2>&1; then
  fetch() { curl -fsSL "$1"; }
  fetch_to() { curl -fsSL -o "$2" "$1"; }
elif command -v wget >/dev/null 2>&1; then
  fetch() { wget -q -O - "$1"; }
  fetch_to() { wget -q -O "$2" "$1"; }
else
  fail "needs curl or wget to download the agent"
fi

if command -v sha256sum >/dev/null 2>&1; then
  sha256_of() { sha256sum "$1" | cut -d ' ' -f 1; }
elif command -v shasum >/dev/null 2>&1; then
  sha256_of() { shasum -a 256 "$1" | cut -d ' ' -f 1; }
else
  fail "needs sha256sum or shasum to check the download"
fi

sums=$(fetch "$DOWNLOADS/SHA256SUMS") || fail "cannot read $DOWNLOADS/SHA256SUMS: is the tuning service reachable from this host?"
sum_of() { printf '%s\n' "$sums" | awk -v n="$1" '$2 == n || $2 == "*" n { print $1; exit }'; }
expected=$(sum_of "$name")
translated=
if [ -z "$expected" ] && [ "$os-$arch" = darwin-arm64 ] && [ -n "$(sum_of tuner-agent-darwin-x64)" ]; then
  # No native build offered: the Intel one runs on Apple silicon under Rosetta 2, if it is installed.
  arch -x86_64 /usr/bin/true 2>/dev/null \
    || fail "this Mac has Apple silicon and the tuning service offers only the Intel (darwin-x64) tuner-agent, which needs Rosetta 2: install it with
  softwareupdate --install-rosetta --agree-to-license
then run this installer again"
  arch=x64
  name=tuner-agent-darwin-x64
  expected=$(sum_of "$name")
  translated=' under Rosetta 2'
fi
if [ -z "$expected" ]; then
  offered=$(printf '%s\n' "$sums" | awk '$2 ~ /^\*?tuner-agent-/ { sub(/^\*?tuner-agent-/, "", $2); printf "%s ", $2 }')
  fail "the tuning service has no tuner-agent for $os-$arch (it offers: ${offered:-none}); run the agent as a container instead (see the setup page at $SERVICE_URL)"
fi

trap 'rm -f "$PARTIAL"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
printf 'downloading %s from %s\n' "$name" "$DOWNLOADS"
fetch_to "$DOWNLOADS/$name" "$PARTIAL" || fail "the download of $DOWNLOADS/$name failed"
actual=$(sha256_of "$PARTIAL")
if [ "$actual" != "$expected" ]; then
  rm -f "$PARTIAL"
  fail "the download does not match SHA256SUMS (expected $expected, got $actual): deleted it, nothing was installed"
fi
chmod 755 "$PARTIAL"
mv -f "$PARTIAL" "$TARGET_FILE"
trap - EXIT INT TERM

if ! version=$("$TARGET_FILE" --version 2>&1); then
  printf 'warning: %s --version failed on this host: %s\n' "$TARGET_FILE" "$version" >&2
  if [ "$os" = darwin ]; then
    printf 'macOS did not start it: see "macOS" in docs/install.md of tuner for what to check.\n' >&2
  fi
fi
printf '\ninstalled %s (%s, %s%s), its SHA-256 checked against SHA256SUMS\n' "$TARGET_FILE" "$version" "$os-$arch" "$translated"
cat <<EOF

Next steps:
  1. Put agent.yaml beside it: copy it from the agent setup page of your database at
     $SERVICE_URL
  2. Check every prerequisite (each FAIL says how to fix it):
       ./tuner-agent --managed-a --check
     (or __OTHER_TARGETS__: the target of your database)
  3. Run it in a terminal multiplexer session and detach (Ctrl+A then D):
       screen -S tuner-agent ./tuner-agent --managed-a
EOF
