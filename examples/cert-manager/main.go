// cert-manager's own certificate controllers, wired by a main of ours, for zeroscaler's tests.
//
// cert-manager's controller binary lives in a nested module the Go module proxy does not serve,
// and its ACME DNS solvers import SDKs the proxy refuses. Its certificate controllers (trigger,
// key manager, request manager, issuing, readiness, revision manager), the CertificateRequest
// approver and the self-signed issuer import neither, and are cert-manager's real renewal logic:
// the trigger controller schedules each Certificate's renewal in memory at status.renewalTime.
// This main builds cert-manager's controller context, starts those controllers and their shared
// informers, and serves /healthz and /readyz; nothing else.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned" // registers the SelfSigned issuer
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

// The controllers run, by cert-manager's names for them.
var controllers = []string{
	issuers.ControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
	approver.ControllerName,
	crselfsigned.CRControllerName,
}

func main() {
	var (
		kubeconfig   string
		namespace    string
		clusterNS    string
		probeAddress string
		workers      int
	)
	flag.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster config when empty")
	flag.StringVar(&namespace, "namespace", "", "the one namespace to work in; all when empty")
	flag.StringVar(&clusterNS, "cluster-resource-namespace", "cert-manager", "where ClusterIssuers keep their Secrets")
	flag.StringVar(&probeAddress, "health-probe-bind-address", "127.0.0.1:9403", "address of /healthz and /readyz")
	flag.IntVar(&workers, "workers", 5, "workers per controller")
	logf.InitLogs()
	flag.Parse()
	log := logf.Log.WithName("main")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, log)

	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		Namespace:          namespace,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: clusterNS},
		CertificateOptions: controllerpkg.CertificateOptions{
			// cert-manager's own defaults for a failed issuance's back-off.
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		log.Error(err, "cannot build cert-manager's controller context")
		os.Exit(1)
	}
	var run []controllerpkg.Interface
	for _, name := range controllers {
		build, ok := controllerpkg.Known()[name]
		if !ok {
			log.Error(nil, "controller not registered", "controller", name)
			os.Exit(1)
		}
		c, err := build(factory)
		if err != nil {
			log.Error(err, "cannot build controller", "controller", name)
			os.Exit(1)
		}
		run = append(run, c)
	}
	// The informers every controller asked for, started once all have asked.
	shared, err := factory.Build()
	if err != nil {
		log.Error(err, "cannot build the shared context")
		os.Exit(1)
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	if shared.GatewaySolverEnabled {
		shared.GWShared.Start(ctx.Done())
	}

	var ready atomic.Bool
	go serveProbes(probeAddress, &ready, log.Info)
	var wg sync.WaitGroup
	for i, c := range run {
		wg.Add(1)
		go func(name string, c controllerpkg.Interface) {
			defer wg.Done()
			if err := c.Run(workers, ctx); err != nil {
				log.Error(err, "controller stopped", "controller", name)
				stop()
			}
		}(controllers[i], c)
	}
	// Ready once the informers hold their collections: every controller then reconciles.
	shared.SharedInformerFactory.WaitForCacheSync(ctx.Done())
	ready.Store(true)
	log.Info("started", "controllers", len(run), "namespace", namespace)
	wg.Wait()
}

func serveProbes(address string, ready *atomic.Bool, info func(string, ...any)) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "informers not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	info("serving probes", "address", address)
	if err := http.ListenAndServe(address, mux); err != nil {
		info("probes stopped", "error", err.Error())
	}
}
