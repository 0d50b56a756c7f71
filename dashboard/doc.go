// Package dashboard is pgqueue's web dashboard: an http.Handler an application mounts in its own
// server to see and drive its queues — every queue's counts, throughput and wait, a queue's jobs
// in the order they will run, a job's payload and every attempt's error, workflows with their
// steps and what each waits for, and actions on jobs one by one, by filter or by workflow —
// updated live over Server-Sent Events fed by the client's LISTEN
// connection. With no job changing, the pages still move: their times and waits count on in
// the browser, and the overview refreshes with each sample of its charts (Options.SampleEvery).
//
// Mount it under a prefix of the application's mux, behind the application's own
// authentication, and serve it with the application's http.Server:
//
//	h, err := dashboard.New(client, &dashboard.Options{Authorize: allowAdmins})
//	if err != nil { … }
//	defer h.Close()
//	mux.Handle("/pgqueue/", http.StripPrefix("/pgqueue", requireLogin(h)))
//	srv := &http.Server{Addr: ":8080", Handler: mux}
//	go srv.ListenAndServe()
//	…
//	err = srv.Shutdown(ctx) // open tabs do not hold it: their event streams end at once
//
// Every open page holds a Server-Sent Events stream, a response that does not end by itself.
// When the http.Server a stream came through begins Shutdown, the Handler ends that server's
// streams (it registers with Server.RegisterOnShutdown the first time a server carries one), so
// a graceful shutdown waits for the requests that end, not for open tabs; the pages reconnect
// by themselves to whatever serves the dashboard next. Close ends every stream too.
//
// Every link, form, asset and event-stream URL the pages hold is relative, so the dashboard works
// at the root or under any prefix — stripped: its routes start at its own root. Mounted under a
// prefix without http.StripPrefix, it answers every page 404 with a text saying how to mount it. It uses only the standard library; its CSS and script are
// embedded.
package dashboard
