// Command kstatus prints what sigs.k8s.io/cli-utils' kstatus (the library Flux's health checks and kpt
// wait on) computes for each Kubernetes object given as a JSON array on stdin: one JSON line each,
// {"status": "Current|InProgress|Failed|Terminating|...", "message": "..."}.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

func main() {
	var objects []json.RawMessage
	if err := json.NewDecoder(os.Stdin).Decode(&objects); err != nil {
		fmt.Fprintln(os.Stderr, "kstatus: reading a JSON array of objects from stdin:", err)
		os.Exit(2)
	}
	out := json.NewEncoder(os.Stdout)
	for _, raw := range objects {
		// Through apimachinery's decoder, so that numbers are int64 as kstatus expects.
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(raw); err != nil {
			fmt.Fprintln(os.Stderr, "kstatus: decoding an object:", err)
			os.Exit(2)
		}
		result, err := status.Compute(o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kstatus:", err)
			os.Exit(1)
		}
		_ = out.Encode(map[string]string{"status": result.Status.String(), "message": result.Message})
	}
}
