// Command node-reset stops and removes every pod sandbox of the real node through the CRI, so that
// the runtime itself undoes what it did for them: CNI DEL (addresses, iptables rules), network
// namespaces, mounts. The local stack runs it when it stops the node and before it starts one.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: node-reset <containerd socket>")
		os.Exit(2)
	}
	if err := reset(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "node-reset:", err)
		os.Exit(1)
	}
}

func reset(socket string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := runtime.NewRuntimeServiceClient(conn)
	list, err := client.ListPodSandbox(ctx, &runtime.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("listing pod sandboxes: %w", err)
	}
	for _, sandbox := range list.Items {
		if _, err := client.StopPodSandbox(ctx, &runtime.StopPodSandboxRequest{PodSandboxId: sandbox.Id}); err != nil {
			return fmt.Errorf("stopping sandbox of %s/%s: %w", sandbox.Metadata.Namespace, sandbox.Metadata.Name, err)
		}
		if _, err := client.RemovePodSandbox(ctx, &runtime.RemovePodSandboxRequest{PodSandboxId: sandbox.Id}); err != nil {
			return fmt.Errorf("removing sandbox of %s/%s: %w", sandbox.Metadata.Namespace, sandbox.Metadata.Name, err)
		}
	}
	fmt.Printf("removed %d pod sandboxes\n", len(list.Items))
	return nil
}
