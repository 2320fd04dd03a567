// Command kube-local is one multi-call binary holding etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, the kubelet and kube-proxy of the real node, kwok and
// metrics-server, so the
// Kubernetes packages they share are compiled once. It dispatches on the name it was invoked by
// (symlinks) or, failing that, on its first argument.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/etcdmain"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kubeproxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
	metricsresource "sigs.k8s.io/kwok/kustomize/metrics/resource"
	metricsusage "sigs.k8s.io/kwok/kustomize/metrics/usage"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
	metricsserver "sigs.k8s.io/metrics-server/cmd/metrics-server/app"
)

var commands = map[string]func() int{
	"etcd":                    func() int { etcdmain.Main(os.Args); return 0 },
	"kube-apiserver":          func() int { return cli.Run(apiserver.NewAPIServerCommand()) },
	"kube-controller-manager": func() int { return cli.Run(controllermanager.NewControllerManagerCommand()) },
	"kube-scheduler":          func() int { return cli.Run(scheduler.NewSchedulerCommand()) },
	"kubelet":                 func() int { return cli.Run(kubelet.NewKubeletCommand(context.Background())) },
	"kube-proxy":              func() int { return cli.Run(kubeproxy.NewProxyCommand()) },
	"kwok":                    runKwok,
	"metrics-server":          runMetricsServer,
	"kwok-stages":             printKwokStages,
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && len(os.Args) > 1 {
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	run, ok := commands[name]
	if !ok {
		fmt.Fprintln(os.Stderr, "usage: kube-local {etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|kwok|kwok-stages|metrics-server} [flags]")
		os.Exit(2)
	}
	os.Exit(run())
}

// runKwok mirrors sigs.k8s.io/kwok/cmd/kwok, whose main package cannot be imported.
func runKwok() int {
	// Kubernetes packages linked into this binary register a non-bool --version flag on the
	// global flag set, which cobra would merge into kwok's command and then fail on.
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)
	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsAllowlist.UnknownFlags = true
	flagset.Usage = func() {}
	ctx := signals.SetupSignalContext()
	ctx, logger := kwoklog.InitFlags(ctx, flagset)
	ctx, err := kwokconfig.InitFlags(ctx, flagset)
	if err != nil {
		logger.Error("Init config flags", "err", err)
		return 1
	}
	command := kwokcmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flagset)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		return 1
	}
	return 0
}

// runMetricsServer mirrors sigs.k8s.io/metrics-server/cmd/metrics-server.
func runMetricsServer() int {
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)
	command := metricsserver.NewMetricsServerCommand(genericapiserver.SetupSignalHandler())
	if err := command.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// printKwokStages writes what kwokctl configures by default (fast node and pod
// lifecycle, node heartbeat through a Lease, and for metrics-server the kubelet's
// resource metrics with pod usage read from annotations) as one kwok config
// document stream, taken from the pinned kwok module so it always matches the
// kwok in this binary.
func printKwokStages() int {
	for _, doc := range []string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
		metricsresource.DefaultMetricsResource,
		metricsusage.DefaultUsageFromAnnotation,
	} {
		fmt.Printf("---\n%s\n", doc)
	}
	return 0
}
