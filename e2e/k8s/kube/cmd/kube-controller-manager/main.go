// Command kube-controller-manager is a thin wrapper around the upstream Kubernetes kube-controller-manager
// (k8s.io/kubernetes/cmd/kube-controller-manager), built from the Go module proxy by ../../build.sh.
// It mirrors upstream cmd/kube-controller-manager so that the binary behaves exactly like the release one.
package main

import (
	"os"
	_ "time/tzdata" // for CronJob time zone support, as upstream

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version" // for version metric registration
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
