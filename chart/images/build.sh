#!/usr/bin/env bash
# Builds the image of every program the chart runs, on a Debian machine with no container daemon
# and no image registry, as root:
#   - the bases: minimal Debian bookworm root file systems made with mmdebstrap (the essential
#     packages, plus what BASE_PACKAGES below lists), cached in $LIQO_IMAGES_CACHE (default
#     /var/cache/liqo-images) under a hash of everything that makes them, so a second run skips
#     them (--refresh-base makes them again, e.g. for Debian's security updates);
#   - the binaries: `cargo build --release` of the programs (or the ones in --bin-dir, or each
#     --extra-bin), copied stripped (the target directory is left as it is);
#   - each image: chart/images/<program>/Containerfile, built by buildah with a scratch storage
#     (overlay, else vfs) that is removed at the end, written as an OCI archive OUT/<program>.oci.tar whose
#     reference is the chart's: <registry>/<repositoryPrefix>/<program>:<tag> (chart/values.yaml,
#     the tag the chart's appVersion);
#   - the run check: every archive loaded into a scratch podman storage and run as the chart runs
#     its container (read-only root file system, no capability, no network) with --version,
#     which must name the program.
# With --images e2e/images it builds the lab's own images the same way (the demo application,
# the sandbox's pause), named localhost/liqo-lab/<name>:<tag>. A Containerfile there may have
# no base (FROM scratch and a static binary), and may name its binary's version flag with a
# line `# build.sh version flag: FLAG`.
# Then it prints one line per image: its reference, the archive's size in MB (10^6 bytes), the
# image's user and the version its binary printed; and the seconds it took.
# What it needs from Debian (mmdebstrap, buildah, binutils; podman and runc for the run check)
# it installs when missing. Nothing is left mounted or running, also after a failure.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: chart/images/build.sh [options]     (as root)

Builds every image of the chart (or of --images DIR) as an OCI archive, OUT/<program>.oci.tar.

  --out DIR                 where the archives go (default: target/images in the repository)
  --images DIR              the folder of <program>/Containerfile to build (default:
                            chart/images; e2e/images: the lab's images, whose --registry and
                            --repository-prefix default to localhost and liqo-lab)
  --bin-dir DIR             take the binaries from DIR instead of `cargo build --release`
                            (e.g. target/debug for a quick check; they are copied stripped)
  --extra-bin PATH          take the binary named as PATH's file from PATH (repeatable), e.g.
                            the lab's pause: --extra-bin "$(bash e2e/k8s/build.sh node)/pause"
  --only PROGRAM            build this image only (repeatable), e.g. --only liqo-gateway
  --registry HOST           the images' registry (default: chart/values.yaml's image.registry)
  --repository-prefix PATH  the path before the program (default: image.repositoryPrefix)
  --tag TAG                 the images' tag (default: chart/Chart.yaml's appVersion)
  --source URL              org.opencontainers.image.source (default: the git remote origin
                            when it is an https or git@ address, without credentials; else
                            https://github.com/liqo-rs/liqo-rs)
  --refresh-base            make the Debian bases again instead of using the cached ones
  --no-run-check            do not run the images (no podman needed); the version column is
                            then the copied binary's, run on this machine
  -h, --help                this help

Environment: LIQO_IMAGES_CACHE (default /var/cache/liqo-images), DEBIAN_MIRROR (default
http://deb.debian.org/debian), DEBIAN_SECURITY_MIRROR (default
http://deb.debian.org/debian-security), LIQO_IMAGES_STORAGE_DRIVER (overlay or vfs; default
overlay where it works), CARGO_TARGET_DIR (as cargo), TMPDIR (the scratch storage; default
/var/tmp).
EOF
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${LIQO_IMAGES_CACHE:-/var/cache/liqo-images}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
SUITE=bookworm

# What each base adds to Debian's essential packages (the Containerfiles name a base by its
# rootfs-<base>.tar). ca-certificates: the programs' TLS clients verify with the system's roots.
# net: what the data-plane daemons run or are inspected with: nft (the gateway's NAT table) and
# ip.
declare -A BASE_PACKAGES=(
  [plain]="ca-certificates"
  [net]="ca-certificates iproute2 nftables"
)
# The unprivileged user of the restricted containers (liqo.restrictedContainer: 65532).
NONROOT_UID=65532

log() { printf '[images] %s\n' "$*" >&2; }
# mb BYTES: in MB (10^6 bytes), one decimal. since START: seconds since $EPOCHREALTIME was START.
mb() { awk -v s="$1" 'BEGIN { printf "%.1f", s / 1e6 }'; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }'; }
die() {
  printf '[images] error: %s\n' "$*" >&2
  exit 1
}

out=$REPO/target/images
images=$HERE
bin_dir=
extra_bins=()
only=()
registry=
prefix=
prefix_set=0
tag=
source_url=
refresh_base=0
run_check=1
while [ $# -gt 0 ]; do
  case $1 in
    --out | --images | --bin-dir | --extra-bin | --only | --registry | --repository-prefix | --tag | --source)
      [ $# -ge 2 ] || die "$1 needs a value (see --help)"
      case $1 in
        --out) out=$2 ;;
        --images) images=$2 ;;
        --bin-dir) bin_dir=$2 ;;
        --extra-bin) extra_bins+=("$2") ;;
        --only) only+=("$2") ;;
        --registry) registry=$2 ;;
        --repository-prefix) prefix=$2 prefix_set=1 ;;
        --tag) tag=$2 ;;
        --source) source_url=$2 ;;
      esac
      shift 2
      ;;
    --refresh-base) refresh_base=1 && shift ;;
    --no-run-check) run_check=0 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap, buildah and podman with a storage of their own); run: sudo bash $0"
[ "$(uname -m)" = x86_64 ] || die "the bases are made for amd64; this machine is $(uname -m)"
case $out in *:*) die "--out $out: an OCI archive path may not hold ':'" ;; esac
[ -d "$images" ] || die "--images $images: no such folder"
images=$(cd "$images" && pwd)

# ---- the programs and the chart's naming -----------------------------------------------------
# Every program with a Containerfile, or the --only ones (each must have one).
mapfile -t all < <(cd "$images" && for f in */Containerfile; do echo "${f%/Containerfile}"; done)
[ "${#all[@]}" -gt 0 ] || die "no $images/*/Containerfile"
programs=()
if [ "${#only[@]}" -gt 0 ]; then
  for p in "${only[@]}"; do
    [ -f "$images/$p/Containerfile" ] || die "--only $p: no $images/$p/Containerfile (programs: ${all[*]})"
    programs+=("$p")
  done
else
  programs=("${all[@]}")
fi

# A top-level `key: value` of a YAML file (or, with a section, of that section's block), unquoted.
yaml_value() {
  local file=$1 section=$2 key=$3
  awk -v s="$section" -v k="$key" '
    /^[^ #]/ { in_s = (s == "" || $0 ~ "^" s ":") }
    in_s && (s == "" ? $0 ~ "^" k ":" : $0 ~ "^  " k ":") {
      sub("^ *" k ": *", ""); sub(" *#.*$", ""); gsub("\"", ""); print; exit
    }' "$file"
}
if [ "$images" = "$HERE" ]; then
  [ -n "$registry" ] || registry=$(yaml_value "$REPO/chart/values.yaml" image registry)
  [ "$prefix_set" -eq 1 ] || prefix=$(yaml_value "$REPO/chart/values.yaml" image repositoryPrefix)
else
  # Another folder's images (the lab's) are no chart's: a local name no registry serves.
  [ -n "$registry" ] || registry=localhost
  [ "$prefix_set" -eq 1 ] || prefix=liqo-lab
fi
[ -n "$tag" ] || tag=$(yaml_value "$REPO/chart/Chart.yaml" "" appVersion)
[ -n "$registry" ] || die "no image.registry in chart/values.yaml (give --registry)"
[ -n "$tag" ] || die "no appVersion in chart/Chart.yaml (give --tag)"
if [ -z "$source_url" ]; then
  # The remote as a web address, without any credentials in it (a label is public); a local
  # path or another scheme is no source to publish.
  source_url=$(git -C "$REPO" config --get remote.origin.url 2>/dev/null || true)
  case $source_url in
    https://*) source_url=$(sed -E 's|^https://[^/@]*@|https://|; s|\.git$||' <<<"$source_url") ;;
    git@*:*) source_url=$(sed -E 's|^git@([^:]+):|https://\1/|; s|\.git$||' <<<"$source_url") ;;
    *) source_url=https://github.com/liqo-rs/liqo-rs ;;
  esac
fi
revision=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)
# The chart's liqo.image: <registry>/<repositoryPrefix>/<program>:<tag>, an empty part left out.
ref_of() { echo "$registry${prefix:+/$prefix}/$1:$tag"; }

# What a Containerfile takes from the build context: its base and its binaries; where a binary
# goes in the image, and the flag that makes it print its version (default --version).
base_of() { sed -n 's|^ADD rootfs-\([a-z0-9]*\)\.tar /$|\1|p' "$images/$1/Containerfile"; }
bins_of() { sed -n 's|^COPY bin/\([^ ]*\) .*|\1|p' "$images/$1/Containerfile"; }
dest_of() { sed -n "s|^COPY bin/$2 \\([^ ]*\\)\$|\\1|p" "$images/$1/Containerfile"; }
version_flag_of() {
  local f
  f=$(sed -n 's|^# build.sh version flag: *\([^ ]*\) *$|\1|p' "$images/$1/Containerfile")
  echo "${f:---version}"
}
bases=()
binaries=()
for p in "${programs[@]}"; do
  b=$(base_of "$p")
  # The chart's images all have a base; another folder's may be FROM scratch and static binaries.
  [ -n "$b" ] || [ "$images" != "$HERE" ] || die "$HERE/$p/Containerfile: no 'ADD rootfs-<base>.tar /' line"
  if [ -n "$b" ]; then
    [ -n "${BASE_PACKAGES[$b]+x}" ] || die "$images/$p/Containerfile: base $b is not one of: ${!BASE_PACKAGES[*]}"
    [[ " ${bases[*]} " == *" $b "* ]] || bases+=("$b")
  fi
  mapfile -t bs < <(bins_of "$p")
  [ "${#bs[@]}" -gt 0 ] || die "$images/$p/Containerfile: no 'COPY bin/<binary> ...' line"
  binaries+=("${bs[@]}")
done

# ---- tools ---------------------------------------------------------------------------------------
declare -A pkg_for=([mmdebstrap]=mmdebstrap [buildah]=buildah [strip]=binutils)
if [ "$run_check" -eq 1 ]; then
  pkg_for[podman]=podman
  pkg_for[runc]=runc
fi
missing=()
for cmd in "${!pkg_for[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${pkg_for[$cmd]}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing from Debian: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

t_start=$EPOCHREALTIME
scratch=$(mktemp -d "${TMPDIR:-/var/tmp}/liqo-images.XXXXXX")
# buildah's and podman's own temporary files (layer blobs on their way into an archive) too.
mkdir "$scratch/tmp"
export TMPDIR=$scratch/tmp
# overlay where the kernel has it and the scratch directory can hold its layers (not itself on
# overlayfs), else vfs (a full copy of the file system per layer and per container: slower).
driver=${LIQO_IMAGES_STORAGE_DRIVER:-}
if [ -z "$driver" ]; then
  driver=vfs
  if grep -qw overlay /proc/filesystems && [ "$(stat -f -c %T "$scratch")" != overlayfs ]; then
    driver=overlay
  fi
fi
BUILDAH=(buildah --root "$scratch/buildah/root" --runroot "$scratch/buildah/run" --storage-driver "$driver")
# runc, not crun: crun refuses cgroup v1 hosts whose cgroup2 hierarchy has a controller (hybrid).
# The limits: podman lowers its own process limit to 32768 where it cannot raise it (no
# CAP_SYS_RESOURCE, e.g. in a container) and would then fail to give the container more.
PODMAN=(podman --root "$scratch/podman/root" --runroot "$scratch/podman/run"
  --tmpdir "$scratch/podman/tmp" --storage-driver "$driver" --cgroup-manager cgroupfs
  --events-backend none --runtime runc)
nofile=$(ulimit -Hn)
nproc=$(ulimit -Hu)
if [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; then nproc=32768; fi
if [ "$nofile" = unlimited ]; then nofile=1048576; fi
cleanup() {
  local rc=$? m
  if [ -d "$scratch/podman" ]; then
    # Every container of the run check was --rm; one left by an interruption is removed.
    "${PODMAN[@]}" rm --all --force >/dev/null 2>&1 || log "warning: podman rm --all failed"
  fi
  if [ -d "$scratch/buildah" ]; then
    "${BUILDAH[@]}" rm --all >/dev/null 2>&1 || log "warning: buildah rm --all failed"
  fi
  # Nothing should be mounted under the scratch directory; whatever is goes before it.
  while read -r m; do
    umount -l "$m" || log "warning: could not unmount $m"
  done < <(findmnt -rn -o TARGET | grep -F "$scratch/" | sort -r || true)
  rm -rf "$scratch" || log "warning: could not remove $scratch"
  rm -f "$CACHE/.rootfs-"*".$$.tar"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
ctx=$scratch/context
mkdir -p "$ctx/bin" "$CACHE" "$out"

# ---- the bases -----------------------------------------------------------------------------------
# mmdebstrap's options for base $1; the cache key is their hash with the suite, the mirrors and
# mmdebstrap's version.
mmdebstrap_options() {
  local pkgs=${BASE_PACKAGES[$1]}
  printf '%s\n' \
    --variant=essential \
    "--include=${pkgs// /,}" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/lintian/*' \
    "--customize-hook=echo 'nonroot:x:$NONROOT_UID:$NONROOT_UID:nonroot:/nonexistent:/usr/sbin/nologin' >>\"\$1/etc/passwd\"" \
    "--customize-hook=echo 'nonroot:x:$NONROOT_UID:' >>\"\$1/etc/group\"" \
    "--customize-hook=rm -f \"\$1/etc/machine-id\" \"\$1/var/cache/ldconfig/aux-cache\""
}
mirrors=("deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main"
  "deb $SECURITY_MIRROR $SUITE-security main")
for b in "${bases[@]}"; do
  mapfile -t opts < <(mmdebstrap_options "$b")
  key=$({ printf '%s\n' "${opts[@]}" "$SUITE" "${mirrors[@]}"; mmdebstrap --version; } |
    sha256sum | cut -c1-16)
  tar_path=$CACHE/rootfs-$b-$key.tar
  if [ "$refresh_base" -eq 1 ] || [ ! -f "$tar_path" ]; then
    log "making base $b (Debian $SUITE: essential + ${BASE_PACKAGES[$b]}) with mmdebstrap"
    t0=$EPOCHREALTIME
    # Written aside and renamed: an interrupted run never leaves half a base in the cache (the
    # exit trap removes the aside copy).
    partial=$CACHE/.rootfs-$b-$key.$$.tar
    if ! mmdebstrap --quiet --format=tar "${opts[@]}" "$SUITE" "$partial" "${mirrors[@]}" \
      >"$scratch/mmdebstrap-$b.log" 2>&1; then
      tail -n 30 "$scratch/mmdebstrap-$b.log" >&2
      die "mmdebstrap failed for base $b (mirror $MIRROR); the end of its output is above"
    fi
    mv "$partial" "$tar_path"
    # Older bases of this name (another package list) are not used again.
    for old in "$CACHE/rootfs-$b-"*.tar; do
      [ "$old" = "$tar_path" ] || rm -f "$old"
    done
    log "base $b: $(mb "$(stat -c %s "$tar_path")") MB in $(since "$t0") s"
  else
    log "base $b: cached ($tar_path)"
  fi
  # The build context's copy: a hard link where the cache is on the same file system.
  ln "$tar_path" "$ctx/rootfs-$b.tar" 2>/dev/null || cp "$tar_path" "$ctx/rootfs-$b.tar"
done

# ---- the binaries --------------------------------------------------------------------------------
mapfile -t binaries < <(printf '%s\n' "${binaries[@]}" | sort -u)
# The --extra-bin ones by name; the others from --bin-dir or cargo.
declare -A extra=()
for e in "${extra_bins[@]}"; do
  [ -x "$e" ] || die "--extra-bin $e: no executable"
  extra[$(basename "$e")]=$e
done
bin_args=()
for b in "${binaries[@]}"; do
  [ -n "${extra[$b]+x}" ] || bin_args+=(--bin "$b")
done
if [ -z "$bin_dir" ] && [ "${#bin_args[@]}" -gt 0 ]; then
  command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
  command -v cargo >/dev/null 2>&1 || die "cargo not found (install Rust, or give --bin-dir)"
  log "cargo build --release --locked ${bin_args[*]}"
  t0=$EPOCHREALTIME
  (cd "$REPO" && cargo build --release --locked "${bin_args[@]}") >&2
  target=$(cd "$REPO" && cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
  [ -n "$target" ] || die "cargo metadata did not name the target directory"
  bin_dir=$target/release
  log "release build: $(since "$t0") s"
fi
for b in "${binaries[@]}"; do
  src=${extra[$b]:-$bin_dir/$b}
  [ -x "$src" ] || die "no executable $src"
  strip --strip-all -o "$ctx/bin/$b" "$src" || die "strip $src failed"
done

# ---- the images ----------------------------------------------------------------------------------
declare -A size=() user=() version=()
for p in "${programs[@]}"; do
  ref=$(ref_of "$p")
  t0=$EPOCHREALTIME
  # --layers: the base's layer is made once and shared by every image on it.
  "${BUILDAH[@]}" build --quiet --layers --pull=never \
    --build-arg "VERSION=$tag" --build-arg "REVISION=$revision" --build-arg "SOURCE=$source_url" \
    -f "$images/$p/Containerfile" -t "$ref" "$ctx" >/dev/null ||
    die "building $images/$p/Containerfile failed"
  archive=$out/$p.oci.tar
  rm -f "$archive.tmp"
  "${BUILDAH[@]}" push --quiet "$ref" "oci-archive:$archive.tmp:$ref" >&2 ||
    die "writing $archive failed"
  mv "$archive.tmp" "$archive"
  size[$p]=$(stat -c %s "$archive")
  log "$archive: $(mb "${size[$p]}") MB in $(since "$t0") s"
  user[$p]=$("${BUILDAH[@]}" inspect --type image --format '{{.OCIv1.Config.User}}' "$ref")
done

# ---- the run check -------------------------------------------------------------------------------
# run IMAGE ENTRYPOINT FLAG: ENTRYPOINT FLAG (--version) in IMAGE, as the chart runs its
# containers.
run_version() {
  "${PODMAN[@]}" run --rm --pull=never --network=none --read-only --cap-drop=all \
    --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" \
    --entrypoint "$2" "$1" "$3"
}
t0=$EPOCHREALTIME
for p in "${programs[@]}"; do
  ref=$(ref_of "$p")
  flag=$(version_flag_of "$p")
  if [ "$run_check" -eq 0 ]; then
    v=$("$ctx/bin/$p" "$flag") || die "$ctx/bin/$p $flag failed"
    version[$p]=$v
    continue
  fi
  loaded=$("${PODMAN[@]}" load --quiet -i "$out/$p.oci.tar") || die "podman load -i $out/$p.oci.tar failed"
  [[ "$loaded" == *"$ref"* ]] || die "podman load -i $out/$p.oci.tar loaded '$loaded', not $ref"
  v=""
  for b in $(bins_of "$p"); do
    got=$(run_version "$ref" "$(dest_of "$p" "$b")" "$flag") || die "$ref: $b $flag failed: $got"
    [[ "$got" == "$b "* ]] || die "$ref: $b $flag printed '$got', which does not name $b"
    v+="${v:+, }$got"
  done
  version[$p]=$v
done
[ "$run_check" -eq 0 ] || log "run check: every image ran its binaries (their version flag) in $(since "$t0") s"

echo
printf '%-50s %8s %12s  %s\n' IMAGE MB USER VERSION
total=0
for p in "${programs[@]}"; do
  printf '%-50s %8s %12s  %s\n' "$(ref_of "$p")" "$(mb "${size[$p]}")" "${user[$p]:-0}" "${version[$p]}"
  total=$((total + size[$p]))
done
printf '%-50s %8s\n' "total: ${#programs[@]} archives in $out" "$(mb "$total")"
echo "built in $(since "$t_start") s"
