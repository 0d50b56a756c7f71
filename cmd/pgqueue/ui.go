package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgqueue/pgqueue/dashboard"
)

// shutdownTimeout bounds how long ui waits for requests in flight when it stops.
const shutdownTimeout = 5 * time.Second

// uiCommand is "ui".
func (a *app) uiCommand() *cobra.Command {
	var addr string
	var readOnly bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web dashboard",
		Long: `Serve pgqueue's web dashboard: the queues with their counts, throughput and
wait, a queue's jobs, a job's payload and errors, and actions on jobs one by one
or by filter, updated live. It listens on 127.0.0.1:8080 by default; it has no
login of its own, so keep it on a loopback address (or behind a proxy that
authenticates). On a loopback address it answers only to the host names
localhost, 127.0.0.1, [::1] and the one --addr gives (any port), which keeps
out a site whose name is rebound to the address. --read-only serves it without
any action. Runs until Ctrl-C or a signal.

Prints the address it serves once it listens (--json: one line, {"url": "http://..."}).`,
		Example: "  pgqueue ui\n  pgqueue ui --addr 127.0.0.1:9000 --read-only",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.serveUI(cmd.Context(), addr, readOnly)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "show everything, change nothing")
	return cmd
}

// serveUI serves the dashboard on addr until ctx ends.
func (a *app) serveUI(ctx context.Context, addr string, readOnly bool) error {
	client, err := a.client(ctx)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	bound := ln.Addr().(*net.TCPAddr)
	logger := slog.New(slog.NewTextHandler(a.std.err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := dashboard.New(client, &dashboard.Options{ReadOnly: readOnly, Logger: logger, AllowedHosts: allowedHosts(addr, bound)})
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer h.Close()
	a.announceUI(bound, readOnly)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Shutdown ends the open pages' event streams as it begins (the dashboard's shutdown hook).
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	if served := <-served; !errors.Is(served, http.ErrServerClosed) {
		return served
	}
	return err
}

// allowedHosts are the hosts the dashboard answers to when it listens on a loopback address, any
// port: the loopback names and addresses, the address it listens on and the host --addr gave.
// A site whose name is rebound to the address (DNS rebinding) is refused. Nil, every host,
// when it listens on another address.
func allowedHosts(addr string, bound *net.TCPAddr) []string {
	if !bound.IP.IsLoopback() {
		return nil
	}
	hosts := []string{"localhost", "127.0.0.1", "::1", bound.IP.String()}
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		hosts = append(hosts, host)
	}
	return hosts
}

// announceUI prints the dashboard's URL, and a warning when it is reachable from other machines.
func (a *app) announceUI(addr *net.TCPAddr, readOnly bool) {
	url := "http://" + addr.String() + "/"
	if a.json {
		_ = writeJSONLine(a.std.out, map[string]string{"url": url}) // a closed stdout does not stop serving
	} else {
		mode := ""
		if readOnly {
			mode = " (read-only)"
		}
		fmt.Fprintf(a.std.out, "serving the dashboard on %s%s; Ctrl-C stops\n", url, mode)
	}
	if !addr.IP.IsLoopback() {
		fmt.Fprintf(a.std.err, "warning: %s is reachable from other machines, and the dashboard has no login of its own\n", addr)
	}
}
