"""A real local Kubernetes control plane for tests, drills and users.

etcd, kube-apiserver and kube-controller-manager built from Kubernetes' own Go
modules (``make kube-bins``), on loopback, plus a kubelet stand-in that runs
pods as local processes. ``host.start`` brings one up; ``kooper cluster up``
is the command-line way.
"""
