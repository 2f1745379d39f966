# Sourced by hack/kube/build.sh and hack/kind/bins.sh: the -ldflags that stamp a build of
# Kubernetes' commands with its version, as Kubernetes' own release build does.
kube_ldflags() {
    local version="$1" major minor pkg flags="-s -w"
    major="${version#v}"; major="${major%%.*}"
    minor="${version#v*.}"; minor="${minor%%.*}"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
        flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    echo "$flags"
}
