// flux-apply: Flux's drift correction, played by Flux's own server-side apply library, for
// zeroscaler's tests.
//
// It applies the objects of a YAML file as kustomize-controller applies what Git holds:
// github.com/fluxcd/pkg/ssa's ResourceManager, field manager kustomize-controller, ownership
// forced, and, with -ignore, drift ignore rules on that JSON pointer of Deployments (the
// Kustomization's spec.ignore). It prints one line per object: its subject and what was done.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	"github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	file := flag.String("file", "", "YAML file of the objects to apply")
	ignore := flag.String("ignore", "", "a JSON pointer of Deployments to leave alone, e.g. /spec/replicas")
	flag.Parse()
	if err := apply(*kubeconfig, *file, *ignore); err != nil {
		fmt.Fprintln(os.Stderr, "flux-apply:", err)
		os.Exit(1)
	}
}

func apply(kubeconfig, file, ignore string) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	kube, err := client.New(config, client.Options{})
	if err != nil {
		return err
	}
	in, err := os.Open(file)
	if err != nil {
		return err
	}
	defer in.Close()
	objects, err := utils.ReadObjects(in)
	if err != nil {
		return err
	}
	manager := ssa.NewResourceManager(kube, nil, ssa.Owner{
		Field: "kustomize-controller",
		Group: "kustomize.toolkit.fluxcd.io",
	})
	options := ssa.DefaultApplyOptions()
	options.Force = true
	if ignore != "" {
		options.DriftIgnoreRules = []jsondiff.IgnoreRule{{
			Paths:    []string{ignore},
			Selector: &jsondiff.Selector{Group: "apps", Kind: "Deployment"},
		}}
	}
	for _, object := range objects {
		entry, err := manager.Apply(context.Background(), object, options)
		if err != nil {
			return err
		}
		fmt.Println(entry.Subject, entry.Action)
	}
	return nil
}
