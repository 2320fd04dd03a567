// Command cluster-dns is CoreDNS with only the plugins the local stack's real node needs: the
// kubernetes plugin answers <service>.<namespace>.svc.cluster.local for its pods, forward sends the
// rest to the host's resolvers, bind keeps it on the node's address. Fewer plugins than a stock CoreDNS build compile in a fraction of
// its time.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

func init() {
	// The order in which plugins see a query, as CoreDNS's plugin.cfg gives it for these five.
	dnsserver.Directives = []string{"bind", "errors", "cache", "kubernetes", "forward"}
}

func main() {
	coremain.Run()
}
