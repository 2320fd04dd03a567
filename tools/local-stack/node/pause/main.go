// Command pause is the real node's sandbox process: it holds a pod's namespaces until the runtime
// stops it. No image registry can be reached here, so the node's pause image is built from this.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
