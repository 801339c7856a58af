// Command kube-apiserver is a thin wrapper around the upstream Kubernetes kube-apiserver
// (k8s.io/kubernetes/cmd/kube-apiserver), built from the Go module proxy by ../../build.sh.
// It mirrors upstream cmd/kube-apiserver so that the binary behaves exactly like the release one.
package main

import (
	"os"
	_ "time/tzdata" // for CronJob time zone support, as upstream

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version" // for version metric registration
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
