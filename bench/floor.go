package main

// The floor of scenario 4d: beside each of its steps, a probe of three connections of its own
// measures the least any queue woken by LISTEN/NOTIFY could take on this machine under that
// step's load, from an enqueue's return to a handler's start. One connection sends a
// notification (a transaction that commits, as an enqueue's does), a second one, listening,
// hears it, and a third one then runs one round trip (the least a claim could cost). The time
// from the first one's return to the end of that round trip is one sample; the probe takes one
// every besideEvery, as the quiet jobs come, so that it measures the same seconds they do.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// floorProbe is the probe of one step: its connections, and when each notification's send
// returned, by its sequence number.
type floorProbe struct {
	notifier, listener, querier *pgx.Conn
	channel                     string

	mu             sync.Mutex
	returned, done map[int]time.Time
}

// startFloorProbe connects the probe's three connections and listens.
func startFloorProbe(ctx context.Context, dsn string) (*floorProbe, error) {
	p := &floorProbe{channel: fmt.Sprintf("pgqbench_floor_%08x", rand.Uint32()), returned: map[int]time.Time{}, done: map[int]time.Time{}}
	for _, c := range []**pgx.Conn{&p.notifier, &p.listener, &p.querier} {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("floor probe: %w", err), p.close())
		}
		*c = conn
	}
	if _, err := p.listener.Exec(ctx, "LISTEN "+p.channel); err != nil {
		return nil, errors.Join(fmt.Errorf("floor probe: %w", err), p.close())
	}
	return p, nil
}

// run sends a notification every besideEvery until stop is closed, and returns each one's time
// from its send's return to the end of the round trip after it was heard.
func (p *floorProbe) run(ctx context.Context, stop <-chan struct{}) ([]time.Duration, error) {
	lctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var listenErr error
	wg.Go(func() { listenErr = p.listen(lctx) })
	sendErr := p.send(ctx, stop)
	p.awaitHeard(ctx, 2*time.Second) // the last notifications' way
	cancel()
	wg.Wait()
	if sendErr != nil || listenErr != nil {
		return nil, fmt.Errorf("floor probe: %w", errors.Join(sendErr, listenErr))
	}
	var samples []time.Duration
	for i, r := range p.returned {
		if d, ok := p.done[i]; ok {
			samples = append(samples, max(0, d.Sub(r))) // heard before the send returned: 0
		}
	}
	if len(samples) == 0 || len(samples)*10 < len(p.returned)*9 {
		return nil, fmt.Errorf("floor probe: %d of %d notifications heard", len(samples), len(p.returned))
	}
	return samples, nil
}

// awaitHeard waits until every notification sent has been heard and followed by its round
// trip, or for at most limit.
func (p *floorProbe) awaitHeard(ctx context.Context, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		p.mu.Lock()
		all := len(p.done) >= len(p.returned)
		p.mu.Unlock()
		if all {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *floorProbe) send(ctx context.Context, stop <-chan struct{}) error {
	tick := time.NewTicker(besideEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		if _, err := p.notifier.Exec(ctx, "SELECT pg_notify($1, $2)", p.channel, strconv.Itoa(i)); err != nil {
			return err
		}
		p.mu.Lock()
		p.returned[i] = time.Now()
		p.mu.Unlock()
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// listen hears each notification, runs a round trip on the third connection and records the
// sample, until ctx ends.
func (p *floorProbe) listen(ctx context.Context) error {
	for {
		n, err := p.listener.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if _, err := p.querier.Exec(ctx, "SELECT 1"); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		done := time.Now()
		i, err := strconv.Atoi(n.Payload)
		if err != nil {
			return err
		}
		p.mu.Lock()
		p.done[i] = done
		p.mu.Unlock()
	}
}

func (p *floorProbe) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	for _, c := range []*pgx.Conn{p.notifier, p.listener, p.querier} {
		if c != nil {
			err = errors.Join(err, c.Close(ctx))
		}
	}
	return err
}
