// CoreDNS for the lab's real nodes, with only the plugins a cluster's DNS uses: the lab's
// Corefile (bind, errors, health, ready, kubernetes, cache), the rest of kubeadm's default one
// (forward, loop, reload, loadbalance, prometheus) and log and hosts, for a Corefile edited to
// debug a name or pin one. Upstream's main imports every plugin
// (the cloud DNS providers, etcd, tracing), which took 380 of the node build's 645 cold seconds.
// Same startup as upstream's coredns.go: coremain.Run.
package main

import (
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
