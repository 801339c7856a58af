// Command kube-scheduler is a thin wrapper around the upstream Kubernetes kube-scheduler
// (k8s.io/kubernetes/cmd/kube-scheduler), built from the Go module proxy by ../../build.sh.
// It mirrors upstream cmd/kube-scheduler so that the binary behaves exactly like the release one.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version" // for version metric registration
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
