// Package dashboard is pgqueue's web dashboard: an http.Handler an application mounts in its own
// server to see and drive its queues — every queue's counts, throughput and wait, a queue's jobs
// in the order they will run, a job's payload and every attempt's error, and actions on jobs one
// by one or by filter — updated live over Server-Sent Events fed by the client's LISTEN
// connection.
//
// Mount it under a prefix of the application's mux, behind the application's own
// authentication:
//
//	h, err := dashboard.New(client, &dashboard.Options{Authorize: allowAdmins})
//	if err != nil { … }
//	defer h.Close()
//	mux.Handle("/pgqueue/", http.StripPrefix("/pgqueue", requireLogin(h)))
//
// Every link, form, asset and event-stream URL the pages hold is relative, so the dashboard works
// at the root or under any prefix. It uses only the standard library; its CSS and script are
// embedded.
package dashboard
