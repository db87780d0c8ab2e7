// Command etcd runs the etcd server from the go.etcd.io/etcd/server/v3 module.
// The server module cannot be `go install`ed (its go.mod has replace directives), so this tiny main
// package depends on it as an ordinary library instead.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
