// Package pgqueueotel instruments pgqueue with OpenTelemetry: a span for every enqueue and every
// attempt of a job, with the enqueuer's trace carried into the job through its metadata, counters
// of what became of the jobs, histograms of their wait and run time, and gauges of every queue's
// counts read from Client.Stats at each collection.
//
// It lives in a module of its own, so an application that does not use OpenTelemetry never
// downloads it. Wire it into a client's Config before NewClient:
//
//	inst, err := pgqueueotel.New(nil) // the global TracerProvider, MeterProvider and propagator
//	if err != nil {
//		return err
//	}
//	cfg := pgqueue.Config{}
//	inst.Apply(&cfg)
//	client, err := pgqueue.NewClient(pool, &cfg)
//	if err != nil {
//		return err
//	}
//	stop, err := inst.ObserveClient(client) // the queue gauges
//	if err != nil {
//		return err
//	}
//	defer stop()
//
// Nothing here starts a goroutine or runs on pgqueue's own loops: the enqueue middleware runs in
// the enqueuing goroutine, the job middleware on the handler's goroutine, OnEvent on the
// worker's event goroutine, and the gauges' callback wherever the MeterProvider collects.
package pgqueueotel
