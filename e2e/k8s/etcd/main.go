// Command etcd is a thin wrapper around go.etcd.io/etcd/server/v3/etcdmain, identical to
// upstream server/main.go. A wrapper module is needed because `go install` refuses etcd's
// own module (it carries replace directives). Built by ../build.sh.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
