#!/usr/bin/env bash
# What the tests leave behind on this host.
#
#   leftovers.sh snapshot FILE   records what exists now, and prints the network namespaces,
#                                directories, processes and nftables tables among it (never
#                                reported by the check)
#   leftovers.sh check FILE      fails, naming each one, if anything the tests make exists now
#                                and did not at the snapshot
#
# Looked at: network namespaces, links of the root namespace, nftables tables, the lab's and the
# harness's directories under /run/liqo-lab, and processes of the programs the tests start
# (the Kubernetes control plane, kwok, Liqo's binaries, the lab, wireguard-go, iperf3). Whatever
# existed at the snapshot (a lab someone runs by hand) is never reported.
set -euo pipefail

# The programs the tests start, by file name.
PROGRAMS='^(etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kwok|liqo-[a-z-]+|liqoctl|wireguard-go|boringtun-cli|iperf3|kubelet|kube-proxy|containerd|containerd-shim-runc-v2|coredns|pause|kubectl)$'

# One line per thing that exists now. A source that cannot be read (no `ip`, no nf_tables) is
# said on stderr and skipped: the check then covers the others.
state() {
  { ip netns list 2>/dev/null || echo "leftovers: cannot list network namespaces" >&2; } |
    awk '{print "netns " $1}'
  { ip -o link show 2>/dev/null || echo "leftovers: cannot list links" >&2; } |
    awk -F': ' '{sub(/@.*/, "", $2); print "link " $2}'
  { nft list tables 2>/dev/null || echo "leftovers: cannot list nftables tables" >&2; } |
    awk '{print "nftables " $2 " " $3}'
  for d in /run/liqo-lab /run/liqo-lab/k8s; do
    [ -d "$d" ] || continue
    find "$d" -mindepth 1 -maxdepth 1 ! -name k8s -printf "dir %p\n" 2>/dev/null || true
  done
  # The lab's real nodes: their data, mounts and cgroups.
  if [ -d /var/lib/liqo-lab ]; then
    find /var/lib/liqo-lab -mindepth 1 -maxdepth 1 -printf "dir %p\n" 2>/dev/null || true
  fi
  # A mount of the lab's, or one over the kernel's tunables (the kubelet's private copies).
  awk '$4 ~ /liqo-lab/ || $5 ~ /liqo-lab/ || $5 ~ /^\/proc\/sys\// {print "mount " $5}' /proc/self/mountinfo 2>/dev/null || true
  # The kubelet's container log links.
  find /var/log/containers -mindepth 1 -maxdepth 1 -lname '*liqo-lab*' -printf "loglink %p\n" 2>/dev/null || true
  find /sys/fs/cgroup -maxdepth 6 -type d -name 'liqo-lab-*' -printf "cgroup %p\n" 2>/dev/null || true
  for p in /proc/[0-9]*; do
    local exe
    # A process may exit while we look.
    exe=$( { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | awk '{print $1}') || continue
    [ -n "$exe" ] || continue
    if [[ "$(basename "$exe")" =~ $PROGRAMS ]]; then
      # A zombie is not left running.
      local st
      st=$(awk '{print $3}' "$p/stat" 2>/dev/null) || continue
      [ "$st" = Z ] && continue
      echo "process ${p#/proc/} $(basename "$exe")"
    fi
  done
}

if [ $# -ne 2 ] || { [ "$1" != snapshot ] && [ "$1" != check ]; }; then
  echo "usage: $0 snapshot FILE | check FILE" >&2
  exit 2
fi
case "$1" in
  snapshot)
    state | sort -u >"$2"
    # What is there already is never reported by the check: say it now (a lab run by hand, or
    # what an interrupted run left, whose processes may still use CPU).
    before=$(grep -E '^(netns|dir|process|nftables|mount|cgroup|loglink) ' "$2" || true)
    if [ -n "$before" ]; then
      echo "note: present before the tests (the check after them does not report these):"
      head -n 40 <<<"$before" | sed 's/^/  /'
      n=$(wc -l <<<"$before")
      [ "$n" -le 40 ] || echo "  ... and $((n - 40)) more"
    fi
    ;;
  check)
    now=$(mktemp)
    trap 'rm -f "$now"' EXIT
    # A process stopped by the last test's teardown may take a moment to be gone.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      state | sort -u >"$now"
      left=$(comm -13 "$2" "$now")
      [ -z "$left" ] && break
      sleep 0.5
    done
    if [ -n "$left" ]; then
      echo "error: the tests left these behind:" >&2
      sed 's/^/  /' <<<"$left" >&2
      exit 1
    fi
    echo "no leftovers (network namespaces, links, nftables tables, /run/liqo-lab, real nodes' data, mounts and cgroups, processes)"
    ;;
  *)
    echo "usage: $0 snapshot FILE | check FILE" >&2
    exit 2
    ;;
esac
