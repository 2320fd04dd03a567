// Command status-readers prints what generic tools make of each Kubernetes object given as a JSON
// array on stdin, one JSON line each: {"status": "...", "message": "..."}.
//
//	status-readers kstatus            sigs.k8s.io/cli-utils' kstatus (Flux's health checks, kpt)
//	status-readers argocd <script>    an Argo CD resource health check (Lua), run as Argo CD runs it
package main

import (
	"encoding/json"
	"fmt"
	"os"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type verdict struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	if len(os.Args) < 2 || (os.Args[1] == "argocd" && len(os.Args) < 3) {
		fail(2, "usage: status-readers kstatus | status-readers argocd <health.lua> (objects as a JSON array on stdin)")
	}
	var objects []json.RawMessage
	if err := json.NewDecoder(os.Stdin).Decode(&objects); err != nil {
		fail(2, "reading a JSON array of objects from stdin: %v", err)
	}
	read := kstatusOf
	if os.Args[1] == "argocd" {
		script, err := os.ReadFile(os.Args[2])
		if err != nil {
			fail(2, "%v", err)
		}
		read = func(raw json.RawMessage) verdict { return argocdHealthOf(string(script), raw) }
	} else if os.Args[1] != "kstatus" {
		fail(2, "unknown reader %q", os.Args[1])
	}
	out := json.NewEncoder(os.Stdout)
	for _, raw := range objects {
		_ = out.Encode(read(raw))
	}
}

func fail(code int, format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "status-readers: "+format+"\n", args...)
	os.Exit(code)
}

func kstatusOf(raw json.RawMessage) verdict {
	// Through apimachinery's decoder, so that numbers are int64 as kstatus expects.
	o := &unstructured.Unstructured{}
	if err := o.UnmarshalJSON(raw); err != nil {
		fail(2, "decoding an object: %v", err)
	}
	result, err := status.Compute(o)
	if err != nil {
		fail(1, "kstatus: %v", err)
	}
	return verdict{Status: result.Status.String(), Message: result.Message}
}

// argocdHealthOf runs a health script as Argo CD does: the object as the global `obj`, the script's
// return value a table with `status` and `message`.
func argocdHealthOf(script string, raw json.RawMessage) verdict {
	var obj interface{}
	if err := json.Unmarshal(raw, &obj); err != nil {
		fail(2, "decoding an object: %v", err)
	}
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, open := range []lua.LGFunction{lua.OpenBase, lua.OpenTable, lua.OpenString, lua.OpenMath} {
		l.Push(l.NewFunction(open))
		l.Call(0, 0)
	}
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		fail(1, "argocd health script: %v", err)
	}
	hs, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		fail(1, "argocd health script returned %s, not a table", l.Get(-1).Type())
	}
	return verdict{Status: lua.LVAsString(hs.RawGetString("status")), Message: lua.LVAsString(hs.RawGetString("message"))}
}

func toLua(l *lua.LState, v interface{}) lua.LValue {
	switch x := v.(type) {
	case map[string]interface{}:
		t := l.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	case []interface{}:
		t := l.NewTable()
		for _, e := range x {
			t.Append(toLua(l, e))
		}
		return t
	case string:
		return lua.LString(x)
	case float64:
		return lua.LNumber(x)
	case bool:
		return lua.LBool(x)
	default:
		return lua.LNil
	}
}
