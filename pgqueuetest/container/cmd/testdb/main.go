// Command testdb starts a throwaway PostgreSQL in a container with testcontainers-go, prints its
// URL on a line of its own on standard output, and removes the container when its standard input
// closes (or on SIGINT or SIGTERM). pgqueue's own tests run it when no database URL is set, so
// that pgqueue's other modules (the root, pgqueuetest, …) need not require testcontainers-go.
// When it cannot start a container, it says why on standard error and exits with status 1.
//
//	go run ./cmd/testdb
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/pgqueue/pgqueue/pgqueuetest/container"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := container.Run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testdb:", err)
		os.Exit(1)
	}
	fmt.Println(srv.URL())
	stdinClosed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	select {
	case <-stdinClosed:
	case <-ctx.Done():
	}
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "testdb:", err)
		os.Exit(1)
	}
}
